"""DynaSearcher (seed 003, issue 18): the multi-reward's terms by hand, the KG search tool
(linking, triples, filters; in-process and on the server), the protocol's KG tag, rollouts that
use both tools, the method rows and their per-round terms, and the KG warm start's demonstrations."""

import dataclasses
import json
import urllib.request

import pytest
import torch

from test_rollout import PASSAGES, passage_store
from tiny_policy import memorized
from workbench import store
from workbench.config import KG_FILTERS, MethodConfig, preset
from workbench.peers.dynasearcher import multireward as M
from workbench.method import rewards as R
from workbench.method.metrics import tool_use_metrics
from workbench.method.round import Rollout, Slot, TrajectoryScore
from workbench.peers.dynasearcher.rewards import term_metrics
from workbench.method.methods import METHODS, method_spec, uses_kg_tool
from workbench.policy import protocol
from workbench.policy.model import Policy, tiny_model
from workbench.policy.rollout import Trajectory, rollout
from workbench.policy.tokenizer import train_tokenizer
from workbench.search import kg_search as K
from workbench.search.client import RemoteKGSearch, RemoteRetriever
from workbench.search.server import running_server
from workbench.search.tool import SearchTool

EDGES = [(1, 2, "born in"), (1, 3, "citizen of"), (2, 3, "located in"), (4, 1, "directed by"), (1, 4, "director of")]


@pytest.fixture(scope="module")
def con():
    con = passage_store()  # test_rollout's world, with edges and an alias
    con.executemany("INSERT INTO edges VALUES (?, ?, ?, 'test')", EDGES)
    con.execute("INSERT INTO aliases VALUES (3, 'Republic of Lorentia')")
    return con


# ---------------------------------------------------------------- the multi-reward, by hand

def _traj(answer="Lorentia", reason="answer", invalid=0, queries=(), kg_queries=(), entity_ids=(), kg_ids=()):
    return Trajectory(0, 0, "p", [], answer=answer, finished_reason=reason, invalid_actions=invalid,
                      queries=list(queries), kg_queries=list(kg_queries), entity_ids=list(entity_ids),
                      kg_entity_ids=list(kg_ids))


def test_each_term_by_hand():
    assert M.format_reward("answer", 0) == 0.0
    assert M.format_reward("max_turns", 0, -1.0) == -1.0 and M.format_reward("answer", 2, -0.5) == -0.5
    # "small Lorentia" vs "Lorentia": precision 1/2, recall 1 -> F1 2/3; the gold is covered -> CEM 1
    f1, cem, r_ans = M.answer_reward("small Lorentia", ["Lorentia"], 0.5)
    assert (round(f1, 6), cem, round(r_ans, 6)) == (0.666667, 1.0, 0.833333)
    assert M.answer_reward("Dagiju", ["Lorentia"]) == (0.0, 0.0, 0.0)
    assert M.answer_reward("small Lorentia", ["Lorentia"], 1.0)[2] == 1.0  # CEM alone
    assert M.recall_reward([1, None, 4], [1, 2, 3]) == pytest.approx(1 / 3)
    assert M.recall_reward([1, 2, 3], [1, 2, 3]) == 1.0
    # t = i: no penalty; t = i + 1: -0.2 (1 - 0.9); t = i + 3: -0.2 (1 - 0.9^3) = -0.0542
    assert M.step_penalty(2, 2) == 0.0 and M.step_penalty(1, 2) == 0.0
    assert M.step_penalty(3, 2) == -0.02 and M.step_penalty(5, 2) == -0.0542
    # as written: 0.9 * -0.2; 0.9^3 * -0.2 = -0.1458
    assert M.step_penalty(3, 2, form="literal") == -0.18 and M.step_penalty(5, 2, form="literal") == -0.1458
    assert M.total_reward(0.833333, 1 / 3, -0.18, 0.5) == pytest.approx(0.833333 + 0.5 * (1 / 3 - 0.18))


def test_terms_of_a_trajectory_with_both_tools():
    slot = Slot("In which country was Kavimo Rutel born?", ["Lorentia"], 2, "seed", gold_chain=[1, 2, 3])
    traj = _traj(queries=["Kavimo Rutel", "Dagiju", "x"], kg_queries=["Dagiju"], entity_ids=[1, 4, 2, 1],
                 kg_ids=[2])
    t = M.terms(traj, slot)
    # recall: entities 1 and 2 of {1, 2, 3}; 4 searches over 2 hops: -0.2 (1 - 0.9^2) = -0.038
    assert (t["format"], t["ans"], t["recall"], t["steps"], t["penalty"]) == (0.0, 1.0, 2 / 3, 4, -0.038)
    assert t["total"] == pytest.approx(1.0 + 0.5 * (2 / 3 - 0.038))
    assert M.terms(traj, slot, accuracy_only=True)["total"] == 1.0
    bad = M.terms(_traj(answer=None, reason="max_turns"), slot)
    assert (bad["format"], bad["ans"], bad["recall"], bad["total"]) == (-1.0, 0.0, 0.0, -1.0)


def test_the_registered_rewards_read_the_run_config():
    slot = Slot("q", ["Lorentia"], 1, "seed", gold_chain=[1, 3])
    traj = _traj(queries=["a", "b"], entity_ids=[1])
    x = R.SolverInputs(1, 0.0, 0.2, traj, slot)
    assert R.SOLVER_REWARDS["dynasearcher"](x) == pytest.approx(1.0 + 0.5 * (0.5 - 0.02))
    assert R.SOLVER_REWARDS["dynasearcher_acc"](x) == 1.0
    cfg = MethodConfig(mr_alpha=1.0, mr_gamma=0.5, mr_beta=-0.4)
    x = dataclasses.replace(x, config=cfg)
    assert R.SOLVER_REWARDS["dynasearcher"](x) == pytest.approx(1.0 + 1.0 * (0.5 - 0.2))  # -0.4 (1 - 0.5)
    x = dataclasses.replace(x, config=dataclasses.replace(cfg, mr_penalty_form="literal", mr_gamma=0.25))
    assert R.SOLVER_REWARDS["dynasearcher"](x) == pytest.approx(1.0 + 1.0 * (0.5 - 0.1))  # 0.25 * -0.4
    with pytest.raises(ValueError, match="trajectory and its slot"):
        R.SOLVER_REWARDS["dynasearcher"](R.SolverInputs(1))


def test_every_further_excess_search_costs_more_by_default_and_less_as_written():
    """Seed 003's r_penalty = gamma^(t-i) beta with beta "the penalty lower bound" (issue 40): the
    default reading penalises each further excess search more and never passes beta; the literal
    one, kept selectable, penalises it less."""
    from workbench.config import MR_PENALTY_FORMS

    assert MR_PENALTY_FORMS == M.PENALTY_FORMS and M.MultiRewardParams().penalty_form == "saturating"
    assert MethodConfig().mr_penalty_form == "saturating"
    default = [M.step_penalty(2 + k, 2) for k in range(1, 30)]
    assert all(b < a for a, b in zip(default, default[1:])) and all(-0.2 <= p < 0 for p in default)
    literal = [M.step_penalty(2 + k, 2, form="literal") for k in range(1, 30)]
    assert all(b > a for a, b in zip(literal, literal[1:])) and all(-0.2 <= p < 0 for p in literal)
    slot = Slot("q", ["Lorentia"], 1, "seed", gold_chain=[1])
    few, many = _traj(queries=["a", "b"], entity_ids=[1]), _traj(queries=list("abcdef"), entity_ids=[1])
    assert M.terms(many, slot)["total"] < M.terms(few, slot)["total"]
    as_written = M.MultiRewardParams(penalty_form="literal")
    assert M.terms(many, slot, as_written)["total"] > M.terms(few, slot, as_written)["total"]
    assert M.MultiRewardParams.of(MethodConfig(mr_penalty_form="literal")).penalty_form == "literal"
    with pytest.raises(ValueError, match="mr_penalty_form"):
        M.step_penalty(3, 2, form="inverse")


def test_imported_hotpot_questions_carry_their_gold_documents_for_r_recall(tmp_path):
    """r_recall was 0 on every imported question (an empty chain); HotpotQA's supporting facts and
    2Wiki's supporting documents now resolve to the store's entities at import (issue 40)."""
    from workbench.qa_import import build_seed_pool, import_qa

    con = store.connect(":memory:")
    con.execute("INSERT INTO entities (entity_id, title) VALUES (1, 'Alba'), (2, 'Zed'), (3, 'Bo Lind')")
    records = [{"_id": f"r{i}", "question": f"Which film is older, {i}?", "answer": "Alba", "type": "comparison",
                "supporting_facts": [["Alba", 0], ["Zed", 1], ["Alba", 2], ["Missing Page", 0]], "context": []}
               for i in range(4)]
    path = tmp_path / "hotpot_train.json"
    path.write_text(json.dumps(records))
    report = import_qa(con, path, "hotpotqa", split="train")
    assert (report["support_titles"], report["support_resolved"]) == (12, 8)  # 'Missing Page' is not in the store
    assert {tuple(c) for (c,) in con.execute("SELECT chain FROM questions").fetchall()} == {(1, 2)}
    build_seed_pool(con, ["hotpotqa"], name="hp", val=1)
    qid, question, answers, hops, chain = con.execute(
        "SELECT question_id, question, answers, hops, chain FROM questions WHERE dataset = 'hp' AND split = 'seed' "
        "ORDER BY question_id LIMIT 1").fetchone()
    slot = Slot(question, list(answers), hops, "seed", gold_chain=list(chain), question_id=qid)
    t = M.terms(_traj(answer="Alba", queries=["a", "b"], entity_ids=[2, 3]), slot)
    assert t["recall"] == 0.5  # Zed retrieved, Alba not
    # a question without gold documents: recall 0 in every rollout of its group (no advantage from it)
    plain = Slot(question, list(answers), hops, "seed")
    assert {M.terms(_traj(queries=["a"], entity_ids=e), plain)["recall"] for e in ([1], [2, 3], [])} == {0.0}


def test_config_refuses_a_positive_penalty_and_unknown_tool_settings():
    for key, value in (("method.mr_beta", 0.2), ("method.kg_filter", "bm25"), ("method.kg_tool", "yes"),
                       ("method.mr_gamma", 1.5), ("method.mr_penalty_form", "inverse")):
        with pytest.raises(ValueError, match=key):
            preset("smoke", **{key: value})
    assert tuple(sorted(KG_FILTERS)) == tuple(sorted(K.FILTERS))


def test_round_metrics_have_the_terms_only_where_the_reward_or_tool_is():
    slot = Slot("q", ["Lorentia"], 1, "seed", gold_chain=[1, 3])
    traj = _traj(queries=["a", "b"], entity_ids=[1])
    terms = M.terms(traj, slot)
    plain = [Rollout(traj, TrajectoryScore(1.0, [], 0.0, False, 1.0))]
    assert tool_use_metrics(plain, kg_tool=False) == {}
    assert tool_use_metrics(plain, kg_tool=True) == {"searches_doc": 2.0, "searches_kg": 0.0}
    out = tool_use_metrics([Rollout(traj, TrajectoryScore(1.0, [], 0.0, False, terms["total"], terms))], False,
                           term_metrics([terms]))
    assert out["mr_recall"] == 0.5 and out["mr_penalty"] == -0.02 and out["over_hops_rate"] == 1.0
    assert out["mr_total"] == terms["total"]


# ---------------------------------------------------------------- the KG search tool

def test_entity_linking_exact_alias_fuzzy_and_none(con):
    kg = K.KGSearch(con)
    assert kg.matcher.match("kavimo  rutel") == (1, 1.0)
    assert kg.matcher.match("the Republic of Lorentia") == (3, 1.0)  # an alias
    eid, score = kg.matcher.match("Kavimo Rutl")
    assert eid == 1 and 0.75 <= score < 1.0
    assert kg.matcher.match("Zebulon") is None and kg.matcher.match("?!") is None


def test_triples_outgoing_then_incoming_and_the_overlap_filter(con):
    kg = K.KGSearch(con, max_triples=10, filter="none")
    assert [str(t) for t in kg.triples(1)] == ["(Kavimo Rutel, born in, Dagiju)", "(Kavimo Rutel, citizen of, Lorentia)",
                                               "(Kavimo Rutel, director of, Tesamu)", "(Tesamu, directed by, Kavimo Rutel)"]
    hit = K.KGSearch(con, max_triples=1).search(["Kavimo Rutel"], ["Which film was directed by Kavimo Rutel?"])[0]
    assert [str(t) for t in hit.triples] == ["(Tesamu, directed by, Kavimo Rutel)"]  # an incoming edge
    hit = K.KGSearch(con, max_triples=2).search(["Kavimo Rutel"], ["Where was Kavimo Rutel born?"])[0]
    assert [t.relation for t in hit.triples] == ["born in", "citizen of"]
    assert K.render(K.KGSearch(con).search(["Zebulon"])[0]) == 'No entity matches "Zebulon".\n'


def test_the_llm_filter_keeps_what_the_judge_names(con):
    prompts = []

    def judge(batch):
        prompts.extend(batch)
        return ["2" for _ in batch]
    kg = K.KGSearch(con, filter="llm", judge=judge)
    hit = kg.search(["Kavimo Rutel", "Zebulon"], ["Which country?", "?"])
    assert [t.relation for t in hit[0].triples] == ["citizen of"] and hit[1].triples == ()
    assert len(prompts) == 1 and "2. (Kavimo Rutel, citizen of, Lorentia)" in prompts[0]
    with pytest.raises(ValueError, match="needs a judge"):
        K.KGSearch(con, filter="llm")
    with pytest.raises(ValueError, match="kg_filter"):
        K.KGSearch(con, filter="bm25")


def test_the_server_serves_kg_search_beside_an_unchanged_retrieve(con):
    kg, tool = K.KGSearch(con), SearchTool(con, topk=2)
    queries, questions = ["Kavimo Rutel", "Dagiju", "Zebulon"], ["Where was he born?", None, None]
    with running_server(tool) as url:
        plain = RemoteRetriever(url, cache=False).search(["Dagiju city"])
        with pytest.raises(ValueError, match="404"):
            RemoteKGSearch(url).search(["x"])
    with running_server(tool, kg=kg) as url:
        assert RemoteRetriever(url, cache=False).search(["Dagiju city"]) == plain
        assert RemoteKGSearch(url).search(queries, questions) == kg.search(queries, questions)
        with urllib.request.urlopen(url.replace("/retrieve", "/health"), timeout=10) as r:
            assert json.loads(r.read())["kg_search"] == {"entities": 4, "edges": 5, "settings": kg.settings}
        body = json.dumps({"queries": ["a", "b"], "questions": ["only one"]}).encode()
        request = urllib.request.Request(url.replace("/retrieve", "/kg_search"), data=body)
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(request, timeout=10)
        assert err.value.code == 400 and b"one per query" in err.value.read()


# ---------------------------------------------------------------- protocol and rollouts

def test_the_kg_tag_exists_only_for_methods_that_offer_it():
    text = "<think>x</think><kg_search> Kavimo Rutel </kg_search>"
    assert protocol.parse_action(text).kind == "invalid"
    assert protocol.parse_action(text, kg=True) == protocol.Action("kg_search", "Kavimo Rutel")
    assert protocol.parse_action("<search> a </search>", kg=True).kind == "search"
    assert protocol.STOP_STRINGS == ("</search>", "</answer>")
    assert "kg_search" not in protocol.solver_user_message("Who?") + protocol.INVALID_ACTION
    assert not any(s.kg_tool for s in METHODS.values() if not s.name.startswith("dynasearcher"))
    assert [uses_kg_tool(method_spec(n)) for n in ("dynasearcher", "dynasearcher_wo_kg", "dynasearcher_wo_mr")] == \
        [True, False, True]
    assert method_spec("dynasearcher_wo_mr").solver_reward == "dynasearcher_acc"


SCRIPT = ["<think>the person</think><kg_search> Kavimo Rutel </kg_search>",
          "<think>the city</think><search> Dagiju </search>",
          "<answer> Lorentia </answer>"]
QUESTION = "In which country was Kavimo Rutel born?"


@pytest.fixture(scope="module")
def kg_policy(con):
    """A tiny model overfitted on one script that uses both tools (as tests/test_rollout.py does)."""
    kg, tool = K.KGSearch(con, max_triples=2), SearchTool(con, topk=1)
    corpus = [protocol.SOLVER_INSTRUCTION_KG, *(t for _, _, t in PASSAGES), *SCRIPT] * 10
    tok = train_tokenizer(corpus, vocab_size=400, extra_tokens=protocol.KG_TAGS)
    backbone = dataclasses.replace(preset("smoke").backbone, hidden_size=64, layers=2, heads=2, kv_heads=1)
    policy = Policy(tiny_model(backbone, tok, seed=0), tok, device="cpu")
    ids = policy.encode(policy.chat_prompt(protocol.solver_user_message(QUESTION, kg=True)))
    n_prompt = len(ids)
    for turn in SCRIPT:
        ids += policy.encode(turn)
        action = protocol.parse_action(turn, kg=True)
        if action.kind == "search":
            ids += policy.encode(protocol.information_block(tool.render(tool.search([action.text], 1)[0])))
        elif action.kind == "kg_search":
            ids += policy.encode(protocol.information_block(kg.render(kg.search([action.text], [QUESTION])[0])))
    ids = torch.tensor([ids + [tok.eos_token_id]])
    labels = ids.clone()
    labels[0, :n_prompt] = -100
    with memorized(policy, ids, labels, 60):
        yield policy, kg, tool


def test_a_rollout_uses_both_tools_and_masks_both_answers(kg_policy):
    policy, kg, tool = kg_policy
    (t,) = rollout(policy, tool, [QUESTION], 1, topk=1, temperature=0.0, max_new_tokens=24, max_total_tokens=400,
                   kg=kg)
    assert (t.kg_queries, t.queries, t.answer) == (["Kavimo Rutel"], ["Dagiju"], "Lorentia")
    assert t.kg_entity_ids == [1] and t.entity_ids == [2] and t.invalid_actions == 0
    assert "(Kavimo Rutel, born in, Dagiju)" in t.text
    inserted = policy.tokenizer.decode([i for i, m in zip(t.response_ids, t.loss_mask) if not m])
    assert "born in, Dagiju" in inserted and "Dagiju is a city" in inserted
    # offered no KG tool, the same model's <kg_search> is an invalid action
    (plain,) = rollout(policy, tool, [QUESTION], 1, topk=1, temperature=0.0, max_new_tokens=24, max_total_tokens=400,
                       max_turns=2)
    assert plain.kg_queries == [] and plain.invalid_actions >= 1


# ---------------------------------------------------------------- the method and its warm start

def test_kg_demonstrations_take_relation_hops_with_the_kg_tool():
    from workbench.kg.tinyworld import build_world
    from workbench.policy import warmstart as ws

    c = store.connect(":memory:")
    build_world(c, preset="smoke", seed=5, n_entities=150)
    tool, kg = SearchTool(c), K.KGSearch(c)
    plain = ws.world_demos(c, tool, ws.DEMO_FAMILIES, False, "<|im_end|>")
    both = ws.world_demos(c, tool, ws.DEMO_FAMILIES, False, "<|im_end|>", kg=kg)
    assert len(plain) == len(both)
    calls = ws.demo_tool_calls(both)
    assert calls["single_hop"]["kg"] > 0 and calls["comparison"]["kg"] == 0
    assert sum(r["kg"] for r in ws.demo_tool_calls(plain).values()) == 0
    for demo in both:
        segs = demo.segments
        for i, (text, trained) in enumerate(segs):
            if text.startswith(protocol.KG_SEARCH_OPEN):  # its answer names the hop's next entity
                assert "(" in segs[i + 1][0] and not segs[i + 1][1]
    kinds = {ws.kg_settings({"max_triples": 4, "min_similarity": 0.75})["filter"]}
    assert kinds == {"overlap"}


def test_dynasearcher_rounds_log_every_term(tmp_path):
    from workbench.method.train import ensure_world, train
    from workbench.policy.warmstart import warmstart

    db = tmp_path / "smoke.duckdb"
    c = store.connect(db)
    ensure_world(c, preset("smoke"))
    base = warmstart(c, "smoke", log=None)  # the default smoke warm start: plumbing, not learning
    c.close()
    keys = {f"mr_{k}" for k in ("format", "f1", "cover_em", "ans", "recall", "penalty", "total")}
    for method in ("dynasearcher", "dynasearcher_wo_mr", "search_r1"):
        (row,) = train(str(db), run=method, method=method, preset="smoke", steps=1, model=base, progress=False,
                       log=None)
        if method == "search_r1":
            assert not keys & set(row) and "searches_kg" not in row
            continue
        assert keys <= set(row) and {"searches_doc", "searches_kg", "over_hops_rate"} <= set(row)
        expected = row["mr_total"] if method == "dynasearcher" else row["mr_format"] + row["mr_ans"]
        assert row["solver_reward"] == pytest.approx(expected)


def test_the_llm_filter_runs_with_a_real_policy_as_judge(kg_policy, con):
    from workbench.search.retriever import make_kg_tool

    policy, _, _ = kg_policy
    kg = make_kg_tool(con, MethodConfig(kg_filter="llm", kg_max_triples=2), policy)
    kg.use_cache = False
    first = kg.search(["Kavimo Rutel"], [QUESTION])[0]
    candidates = set(K.KGSearch(con, filter="none", max_triples=10).search(["Kavimo Rutel"])[0].triples)
    assert set(first.triples) <= candidates and len(first.triples) <= 2
    assert kg.search(["Kavimo Rutel"], [QUESTION])[0] == first  # greedy: the same choice again


def test_the_kg_warm_start_has_its_own_key_label_and_tags(tmp_path, monkeypatch):
    import json

    from workbench.kg.tinyworld import build_world
    from workbench.policy.model import Policy
    from workbench.policy.warmstart import warmstart

    monkeypatch.setenv("WORKBENCH_DATA", str(tmp_path / "data"))
    c = store.connect(tmp_path / "w.duckdb")
    build_world(c, preset="smoke")
    cfg = preset("smoke", **{"backbone.sft_steps": 2})
    path = warmstart(c, cfg, log=None, val_per_family=1, kg_tool={"max_triples": 3, "min_similarity": 0.8})
    meta = json.loads((path / "workbench.json").read_text())
    assert meta["method"] == "base_kg" and meta["kg_tool"] == {"max_triples": 3, "min_similarity": 0.8,
                                                               "filter": "overlap"}
    assert sum(r["kg"] for r in meta["demo_tool_calls"].values()) > 0
    assert set(meta["tool_use"]) == {"single_hop", "two_hop", "three_hop", "comparison", "bridge"}
    tok = Policy.load(path).tokenizer
    assert tok.convert_ids_to_tokens(tok("<kg_search> A </kg_search>")["input_ids"])[0] == "<kg_search>"
    default = warmstart(c, cfg, log=None, val_per_family=1)
    assert default.name != path.name and "kg_tool" not in json.loads((default / "workbench.json").read_text())
    c.close()
