"""Multi-turn solver rollouts over the real BM25 SearchTool, and the trajectories table (issue 3).

A tiny model (hidden 64, 2 layers) is first overfitted on two scripted trajectories built with
the same token bookkeeping as ``rollout`` (one answers at once, one searches twice), so greedy
rollouts take known paths and the tests can check turn counts, queries and masks exactly.
"""

import dataclasses

import pytest
import torch

from tiny_policy import memorized
from workbench import store
from workbench.config import preset
from workbench.policy.rollout import batch_tensors, rollout
from workbench.method.run_store import store_trajectories
from workbench.policy import protocol
from workbench.policy.model import Policy, tiny_model
from workbench.policy.tokenizer import train_tokenizer
from workbench.search.tool import SearchTool

PASSAGES = [(1, "Kavimo Rutel", "Kavimo Rutel was born in Dagiju."),
            (2, "Dagiju", "Dagiju is a city in Lorentia."),
            (3, "Lorentia", "Lorentia is a small country."),
            (4, "Tesamu", "Tesamu is a film directed by Kavimo Rutel.")]
EASY = "Say nowhere."
HARD = "In which country was Kavimo Rutel born?"
SCRIPTS = {EASY: ["<think>easy</think><answer> nowhere </answer>"],
           HARD: ["<think>first the person</think><search> Kavimo Rutel </search>",
                  "<think>now the city</think><search> Dagiju </search>",
                  "<think>done</think><answer> Lorentia </answer>"]}


def passage_store():
    """An in-memory store holding PASSAGES' entities and passages (passage id = 10 + entity id)."""
    con = store.connect(":memory:")
    for eid, title, text in PASSAGES:
        con.execute("INSERT INTO entities VALUES (?, ?, 'thing', 'entity', 'test')", [eid, title])
        con.execute("INSERT INTO passages VALUES (?, ?, 0, ?)", [10 + eid, eid, text])
    return con


@pytest.fixture(scope="module")
def con():
    return passage_store()


@pytest.fixture(scope="module")
def tool(con):
    return SearchTool(con, index="bm25", topk=2)


def _prompt_ids(policy, question):
    return policy.encode(policy.chat_prompt(protocol.solver_user_message(question)))


def _script_ids(policy, tool, question, turns):
    ids = _prompt_ids(policy, question)
    for turn in turns:
        ids += policy.encode(turn)
        action = protocol.parse_action(turn)
        if action.kind == "search":
            ids += policy.encode(protocol.information_block(tool.render(tool.search([action.text], 2)[0])))
    return ids + [policy.tokenizer.eos_token_id]


@pytest.fixture(scope="module")
def policy(tool):
    corpus = [protocol.SOLVER_INSTRUCTION, *(t for _, _, t in PASSAGES), *sum(SCRIPTS.values(), [])] * 10
    tok = train_tokenizer(corpus, vocab_size=400)
    backbone = dataclasses.replace(preset("smoke").backbone, hidden_size=64, layers=2, heads=2, kv_heads=1)
    policy = Policy(tiny_model(backbone, tok, seed=0), tok, device="cpu")
    seqs = [_script_ids(policy, tool, q, turns) for q, turns in SCRIPTS.items()]
    width = max(map(len, seqs))
    ids = torch.full((len(seqs), width), tok.pad_token_id)
    labels = torch.full((len(seqs), width), -100)
    for i, (seq, question) in enumerate(zip(seqs, SCRIPTS)):
        ids[i, :len(seq)] = labels[i, :len(seq)] = torch.tensor(seq)
        labels[i, :len(_prompt_ids(policy, question))] = -100  # learn the responses only
    with memorized(policy, ids, labels, 80, attention_mask=(labels != -100) | (ids != tok.pad_token_id)):
        yield policy


class Spy:
    """Passes every call through to the real object and records the batch sizes."""

    def __init__(self, obj, method):
        self.sizes, self._call = [], getattr(obj, method)

    def __call__(self, batch, *args, **kwargs):
        self.sizes.append(len(batch))
        return self._call(batch, *args, **kwargs)


def _kw(**over):
    return {"topk": 2, "max_new_tokens": 24, "max_total_tokens": 400, **over}


def test_greedy_rollout_follows_searches_and_drops_finished_rows(policy, tool, monkeypatch):
    gen_spy, search_spy = Spy(policy, "generate_ids"), Spy(tool, "search")
    monkeypatch.setattr(policy, "generate_ids", gen_spy)
    monkeypatch.setattr(tool, "search", search_spy)
    trajs = rollout(policy, tool, [EASY, HARD], 2, temperature=0, **_kw())
    assert [(t.question_index, t.sample) for t in trajs] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert gen_spy.sizes == [4, 2, 2]  # the easy rows answered in turn 1 and left the batch
    assert search_spy.sizes == [2, 2]  # one search call per turn for the whole batch
    easy, hard = trajs[0], trajs[2]
    assert (easy.turns, easy.finished_reason, easy.answer, easy.queries) == (1, "answer", "nowhere", [])
    assert (hard.turns, hard.finished_reason, hard.answer) == (3, "answer", "Lorentia")
    assert hard.queries == ["Kavimo Rutel", "Dagiju"]
    assert hard.passage_ids[0] == 11 and hard.entity_ids[0] == 1
    assert len(hard.passage_ids) == len(hard.entity_ids) == sum(len(tool.search([q], 2)[0]) for q in hard.queries)
    assert hard.text.startswith(SCRIPTS[HARD][0]) and hard.gen_seconds > 0 and hard.search_seconds > 0


def test_mask_marks_exactly_the_inserted_information(policy, tool):
    for t in rollout(policy, tool, [EASY, HARD], 2, temperature=0, **_kw()):
        assert len(t.response_ids) == len(t.loss_mask) == len(t.old_logprobs)
        inserted = [i for i, m in zip(t.response_ids, t.loss_mask) if m == 0]
        blocks = [policy.encode(protocol.information_block(tool.render(tool.search([q], 2)[0]))) for q in t.queries]
        assert inserted == sum(blocks, [])
        # Each block sits right after the generated tag that asked for it.
        close = policy.tokenizer.convert_tokens_to_ids(protocol.SEARCH_CLOSE)
        starts = [k for k in range(1, len(t.loss_mask)) if t.loss_mask[k] == 0 and t.loss_mask[k - 1] == 1]
        assert [t.response_ids[k - 1] for k in starts] == [close] * len(t.queries)
        assert t.n_generated == sum(t.loss_mask) and t.n_retrieved == len(inserted)
        assert all(lp == 0.0 for lp, m in zip(t.old_logprobs, t.loss_mask) if m == 0)


def test_old_logprobs_match_recomputation_and_sampling_is_seeded(policy, tool):
    trajs = rollout(policy, tool, [EASY, HARD], 4, temperature=0.6, top_p=0.95, seed=3, **_kw())
    again = rollout(policy, tool, [EASY, HARD], 4, temperature=0.6, top_p=0.95, seed=3, **_kw())
    assert [t.response_ids for t in trajs] == [t.response_ids for t in again]
    batch = batch_tensors(trajs, policy.tokenizer.pad_token_id)
    with torch.no_grad():
        lp = policy.token_logprobs(batch["input_ids"], batch["attention_mask"])
    mask = batch["loss_mask"].bool()
    assert mask.sum() == sum(t.n_generated for t in trajs)
    assert torch.allclose(lp[mask], batch["old_logprobs"][mask], atol=1e-4)


def test_max_turns_is_respected(policy, tool):
    trajs = rollout(policy, tool, [EASY, HARD], 1, temperature=0, max_turns=2, **_kw())
    easy, hard = trajs
    assert easy.finished_reason == "answer"
    assert (hard.turns, hard.finished_reason, hard.answer) == (2, "max_turns", None)
    assert hard.queries == ["Kavimo Rutel"]  # the last turn's search is not run: no turn left to read it


def test_length_limit_cuts_rows(policy, tool):
    prompt_len = len(_prompt_ids(policy, HARD))
    trajs = rollout(policy, tool, [HARD], 2, temperature=0, **_kw(max_total_tokens=prompt_len + 30))
    for t in trajs:
        assert t.finished_reason == "length" and t.length == prompt_len + 30
    with pytest.raises(ValueError, match="max_total_tokens"):
        rollout(policy, tool, [HARD], 1, **_kw(max_total_tokens=prompt_len))


def test_invalid_actions_get_the_corrective_message(tool):
    tok = train_tokenizer([protocol.SOLVER_INSTRUCTION] * 5, vocab_size=400)
    untrained = Policy(tiny_model(preset("smoke").backbone, tok, seed=1), tok, device="cpu")
    (t,) = rollout(untrained, tool, ["Q?"], 1, temperature=0, max_turns=3, **_kw(max_new_tokens=4))
    assert (t.turns, t.finished_reason, t.queries) == (3, "max_turns", [])
    inserted = [i for i, m in zip(t.response_ids, t.loss_mask) if m == 0]
    assert inserted == untrained.encode(protocol.INVALID_ACTION) * 2


def test_store_trajectories_round_trip(policy, tool, con):
    trajs = rollout(policy, tool, [EASY, HARD], 2, temperature=0, **_kw())
    ids = store_trajectories(con, "r1", 0, trajs, question_ids=[100, 200])
    assert ids == [0, 1, 2, 3]
    rows = con.execute("SELECT trajectory_id, question_id, sample, role, response, queries, passage_ids, "
                       "entity_ids, answer, n_generated, n_retrieved FROM trajectories WHERE run = 'r1' "
                       "ORDER BY trajectory_id").fetchall()
    assert [r[1:4] for r in rows] == [(100, 0, "solver"), (100, 1, "solver"), (200, 0, "solver"), (200, 1, "solver")]
    hard = trajs[2]
    assert rows[2][4:] == (hard.text, hard.queries, hard.passage_ids, hard.entity_ids, "Lorentia",
                           hard.n_generated, hard.n_retrieved)
    assert store_trajectories(con, "r1", 1, trajs[:1], question_ids=[100], scores=[(1.0, 0.5, 1.1)]) == [4]
    assert con.execute("SELECT r_ans, s_path, reward FROM trajectories WHERE trajectory_id = 4").fetchone() == (1.0, 0.5, 1.1)
    assert con.execute("SELECT count(reward) FROM trajectories WHERE run = 'r1' AND round = 0").fetchone() == (0,)
    with pytest.raises(ValueError, match="question_index 1"):
        store_trajectories(con, "r2", 0, trajs, question_ids=[100])
    with pytest.raises(ValueError, match="2 scores for 1 trajectories"):
        store_trajectories(con, "r2", 0, trajs[:1], question_ids=[100], scores=[(0, 0, 0)] * 2)
    assert con.execute("SELECT count(*) FROM trajectories WHERE run = 'r2'").fetchone() == (0,)
