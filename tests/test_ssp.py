"""SSP as published (issue 40): the proposer searches while writing its question, SSP's rule checks
and its RAG verification keep a question, 1 - acc rewards it, an invalid one gets the format penalty.

As in test_rollout.py, a tiny model is overfitted on a scripted SSP proposer trajectory (two
searches, then a question) and on the RAG answer to it, so greedy rollouts over the real BM25 tool
take a known path and the whole chain (search, checks, RAG check) runs on real components.
"""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import pytest
import torch

from test_rollout import PASSAGES, passage_store
from tiny_policy import memorized
from workbench.config import preset
from workbench.method import loop, ssp, update
from workbench.method.gate import Verdict
from workbench.method.memory import ChainView
from workbench.method.methods import method_spec
from workbench.method.proposer import proposer_rewards
from workbench.method.rewards import GroupOutcome, Schedule
from workbench.policy import protocol
from workbench.policy.model import Policy, tiny_model
from workbench.policy.tokenizer import train_tokenizer
from workbench.search.tool import SearchTool

ANSWER = "Lorentia"
QUESTION = "In which small country is the city where the director of the film Tesamu was born?"
TURNS = ["<think>who directed it</think><search> Tesamu </search>",
         "<think>where was he born</think><search> Kavimo Rutel </search>",
         f"<question> {QUESTION} </question> <answer> {ANSWER} </answer>"]
KW = dict(max_turns=4, topk=2, temperature=0.0, top_p=1.0, max_new_tokens=40, max_total_tokens=600)


@pytest.fixture(scope="module")
def con():
    return passage_store()


@pytest.fixture(scope="module")
def tool(con):
    return SearchTool(con, index="bm25", topk=2)


def _scripted(policy, tool):
    """The proposer's scripted token ids, and its retrieved blocks (as the rollout inserts them)."""
    ids, blocks = policy.encode(policy.chat_prompt(ssp.proposer_message(ANSWER))), []
    for turn in TURNS:
        ids += policy.encode(turn)
        action = protocol.parse_action(turn)
        if action.kind == "search":
            blocks.append(protocol.information_block(tool.render(tool.search([action.text], 2)[0])))
            ids += policy.encode(blocks[-1])
    return ids + [policy.tokenizer.eos_token_id], blocks


@pytest.fixture(scope="module")
def policy(tool):
    corpus = [ssp.PROPOSER_INSTRUCTION, ssp.RAG_INSTRUCTION, *(t for _, _, t in PASSAGES), *TURNS] * 10
    tok = train_tokenizer(corpus, vocab_size=400)
    backbone = dataclasses.replace(preset("smoke").backbone, hidden_size=64, layers=2, heads=2, kv_heads=1)
    policy = Policy(tiny_model(backbone, tok, seed=0), tok, device="cpu")
    proposer, blocks = _scripted(policy, tool)
    rag = ssp.rag_prompts([QUESTION], [ssp.materials(SimpleNamespace(retrieved=blocks))], [], 0, 0)[0]
    rag_prompt = policy.encode(policy.chat_prompt(rag))
    seqs = [(proposer, len(policy.encode(policy.chat_prompt(ssp.proposer_message(ANSWER))))),
            (rag_prompt + policy.encode(f"<answer> {ANSWER} </answer>") + [tok.eos_token_id], len(rag_prompt))]
    width = max(len(s) for s, _ in seqs)
    ids = torch.full((len(seqs), width), tok.pad_token_id)
    labels = torch.full((len(seqs), width), -100)
    for i, (seq, prompt) in enumerate(seqs):
        ids[i, :len(seq)] = labels[i, :len(seq)] = torch.tensor(seq)
        labels[i, :prompt] = -100
    with memorized(policy, ids, labels, 120, attention_mask=(labels != -100) | (ids != tok.pad_token_id)):
        yield policy


def _round(policy, tool, answers=(ANSWER,), m=2, **over):
    trajs = ssp.propose(policy, tool, list(answers), m, seed=0, **KW)
    settings = dict(min_words=10, min_searches=2, noise=0, seed=0, generate=ssp.greedy(policy, 16), **over)
    return trajs, ssp.verdicts(trajs, [ANSWER] * len(answers), m, 1, **settings)


def test_the_proposer_searches_and_its_rag_checked_question_is_admitted(policy, tool):
    trajs, verdicts = _round(policy, tool)
    first = trajs[0]
    assert first.prompt.endswith(policy.chat_prompt(ssp.proposer_message(ANSWER))[-40:])
    assert first.queries == ["Tesamu", "Kavimo Rutel"] and len(first.retrieved) == 2  # the real tool answered
    assert ssp.question_of(first) == QUESTION and 0 in first.loss_mask  # retrieved tokens are masked
    assert [(v.reason, v.extracted, v.passed, v.admitted) for v in verdicts[0]] == [
        ("ok", True, True, True), ("ok", True, True, False)]  # the first k = 1 valid one is posed


def test_the_rag_check_rejects_a_question_its_documents_do_not_answer(policy, tool):
    trajs = ssp.propose(policy, tool, [ANSWER], 1, seed=0, **KW)
    # the same rollout claimed for another answer: the policy answers Lorentia from the documents
    out = ssp.verdicts(trajs, ["Dagiju"], 1, 1, min_words=10, min_searches=2, noise=0, seed=0,
                       generate=ssp.greedy(policy, 16))
    assert [(v.reason, v.extracted, v.admitted) for v in out[0]] == [("rag check failed", False, False)]
    # SSP's rules, each on the real rollout
    assert ssp.verdicts(trajs, [ANSWER], 1, 1, min_words=30, min_searches=2, noise=0, seed=0,
                        generate=ssp.greedy(policy, 16))[0][0].reason == "question too short"
    assert ssp.verdicts(trajs, [ANSWER], 1, 1, min_words=10, min_searches=3, noise=0, seed=0,
                        generate=ssp.greedy(policy, 16))[0][0].reason == "too few searches"


def test_the_rules_in_ssps_order():
    def traj(text, queries, retrieved=("<information>Doc 1(Title: A) a</information>",)):
        return SimpleNamespace(text=text, queries=list(queries), retrieved=list(retrieved))

    q = "<question> Which country holds the city where the director was born? </question>"
    cases = [(traj("<answer> x </answer>", ["a", "b"]), "extraction failed"),
             (traj("<question> Which country? </question>", ["a", "b"]), "question too short"),
             (traj("<question> Which country holds lorentia and all of its many old cities? </question>", ["a", "b"]),
              "answer in question"),
             (traj(q, ["a", "b"], retrieved=()), "no retrieval"),
             (traj(q, ["a"]), "too few searches"),
             (traj(q, ["a", " A "]), "repeated search"),
             (traj(q, ["a", "b"]), None)]
    for t, reason in cases:
        assert ssp.check(t, ssp.question_of(t), "Lorentia", 10, 2) == reason, reason
    assert set(r for _, r in cases if r) <= set(ssp.REASONS)


def test_the_rag_documents_mix_in_other_rollouts_and_fit_the_budget():
    pool = [f"doc {i}" for i in range(8)]
    prompts = ssp.rag_prompts(["q?", "r?"], ["doc 0", "doc 1"], pool, 4, seed=3)
    assert prompts == ssp.rag_prompts(["q?", "r?"], ["doc 0", "doc 1"], pool, 4, seed=3)  # by seed
    for prompt, mine in zip(prompts, ["doc 0", "doc 1"]):
        docs = prompt.split("Documents:\n")[1].split("\nQuestion:")[0].splitlines()
        assert mine in docs and len(docs) == 5 and len(set(docs)) == 5
    base = len(ssp.rag_prompts(["q?"], [""], [], 0, 0)[0])  # the instruction and the question
    small = ssp.rag_prompts(["q?"], ["doc 0 " * 5], pool, 4, seed=3, fits=lambda p: len(p) <= base + 30)[0]
    assert small.count("doc 0") == 5 and not any(f"doc {i}" in small for i in range(1, 8))  # distractors go first
    cut = ssp.rag_prompts(["q?"], ["doc 0 " * 20], pool, 4, seed=3, fits=lambda p: len(p) <= base + 40)[0]
    assert len(cut) <= base + 40 and "doc 0" in cut and cut.endswith("Question: q?\n")  # then its own, from the front


def test_an_invalid_question_gets_the_format_penalty_a_valid_one_1_minus_acc():
    verdicts = [Verdict(0, "q", ANSWER, False, reason="rag check failed"),
                Verdict(1, "q2", ANSWER, True, q=1.0, passed=True, admitted=True, reason="ok"),
                Verdict(2, "q3", ANSWER, True, q=1.0, passed=True, reason="ok")]
    rewards = proposer_rewards(verdicts, {1: GroupOutcome((True, False, False, False))}, Schedule(0, 10), -0.1,
                               "ssp_adversarial")
    assert rewards == [-0.1, 0.75, None]


def test_the_ssp_row_searches_and_the_no_search_row_says_so():
    assert (method_spec("ssp").task_source, method_spec("ssp_no_search").task_source) == ("ssp", "answer_entity")
    assert "w/o proposer search" in method_spec("ssp_no_search").label
    assert method_spec("ssp").proposer_reward == method_spec("ssp_no_search").proposer_reward == "ssp_adversarial"


def test_a_trainer_round_poses_ssps_question_and_masks_the_proposers_retrieved_tokens(policy, tool, con,
                                                                                        monkeypatch):
    """Trainer.propose on the SSP row: the searching proposer, the checks, the RAG check, the slot;
    its update whitens the proposer's return over generated tokens only (last in this file: the
    update moves the shared model)."""
    con.execute("INSERT INTO questions VALUES (900, 'tinyworld', 'seed', 'single_hop', 'Where is Dagiju?', "
                "['Lorentia'], [2, 3], 1, 't')")
    cfg = preset("smoke")
    cfg = dataclasses.replace(cfg, rollout=dataclasses.replace(cfg.rollout, **{k: KW[k] for k in (
        "max_turns", "max_new_tokens", "max_total_tokens")}, temperature=0.0, top_p=1.0),
        search=dataclasses.replace(cfg.search, topk=2),
        method=dataclasses.replace(cfg.method, lora_rank=0, chains_per_round=1, candidates_per_chain=2,
                                   admit_top_k=1, group_size=2, ssp_rag_noise=0))
    reference = Policy(policy.model, policy.tokenizer, device="cpu")
    trainer = loop.Trainer(con, cfg, method_spec("ssp"), "ssp-t", policy, reference, tool)
    monkeypatch.setattr(trainer.tasks, "draw", lambda t: [ChainView(-1, "", [3], [ANSWER], [], [""])])
    tasks, slots = trainer.propose(0)
    assert [c.verdict.reason for c in tasks[0].candidates] == ["ok", "ok"]
    assert [(s.question, s.answers, s.source, s.hops) for s in slots] == [(QUESTION, [ANSWER], "generated", 2)]
    masks = []
    real = update.reinforce_pp_advantages
    monkeypatch.setattr(update, "reinforce_pp_advantages", lambda r, mask, **kw: masks.append(mask) or real(r, mask, **kw))
    for cand, reward in zip(tasks[0].candidates, (0.5, -0.1)):
        cand.reward = reward
    trainer.update(0, tasks, [])
    seq = tasks[0].candidates[0].sequence
    assert masks[0][0, :len(seq.loss_mask)].tolist() == [float(x) for x in seq.loss_mask] and 0 in seq.loss_mask
