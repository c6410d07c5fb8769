"""EoG's solver as a knowledge-graph agent (seed 004, issue 40): the graph tools (<relations>,
<neighbors>) against the executed queries, the graph protocol, rollouts that call them and answer
a set, the set scored by Hit@1 and set F1 (no longer capped by one answer), the calls counted per
round and per question, the EoG rows offered the tools end to end, and the topology warm start's
demonstrations of them."""

import dataclasses

import numpy as np
import pytest
import torch

from test_rollout import PASSAGES, passage_store
from tiny_policy import memorized
from workbench import store
from workbench.config import MethodConfig, preset
from workbench.kg import topology
from workbench.kg.tinyworld import build_world
from workbench.peers.eog import queries as eog, warmstart as eog_warmstart
from workbench.method import rewards as R
from workbench.method.metrics import tool_use_metrics
from workbench.method.round import Rollout, Slot, TrajectoryScore
from workbench.method.score import score_trajectory
from workbench.peers.eog import rewards as eog_rewards
from workbench.method.methods import METHODS, uses_graph_tools
from workbench.method.path_support import EvidenceGraph, PathSupportParams
from workbench.policy import protocol
from workbench.policy.model import Policy, tiny_model
from workbench.policy.rollout import rollout, score_questions
from workbench.policy.tokenizer import train_tokenizer
from workbench.scoring import answer_list, set_f1
from workbench.search.graph_tools import GraphTools, split_call
from workbench.search.tool import SearchTool

EDGES = [(1, 2, "lived in"), (1, 5, "lived in"), (2, 3, "located in"), (5, 3, "located in"), (4, 1, "directed by")]


@pytest.fixture(scope="module")
def con():
    con = passage_store()  # test_rollout's world, with a fifth entity, edges and an alias
    con.execute("INSERT INTO entities VALUES (5, 'Velor', 'thing', 'entity', 'test')")
    con.execute("INSERT INTO passages VALUES (15, 5, 0, 'Velor is a town in Lorentia.')")
    con.executemany("INSERT INTO edges VALUES (?, ?, ?, 'test')", EDGES)
    con.execute("INSERT INTO aliases VALUES (3, 'Republic of Lorentia')")
    return con


@pytest.fixture(scope="module")
def world():
    con = store.connect(":memory:")
    build_world(con, preset="smoke", seed=3, n_entities=150)
    return con


# ---------------------------------------------------------------- the tools

def test_neighbors_is_the_executed_1p_query_and_relations_count_it(world):
    tools, graph = GraphTools(world), topology.TopologyGraph.from_store(world)
    queries = topology.sample_queries(graph, "1p", 60, seed=0)
    assert len(queries) == 60
    for q in queries:
        (a,), (r,) = q.anchors, q.relations
        expected = topology.execute(graph, "1p", q.anchors, q.relations).tolist()
        assert tools.neighbors(a, r) == expected == list(q.answers)
        assert tools.relation_counts(a)[r] == len(expected)
        hit = tools.call("neighbors", f"{tools.titles[a]} | {r}")
        assert hit.entity_ids == (a,) and hit.relation == r and list(hit.found) == expected
        assert hit.text == f"{tools.titles[a]} --{r}--> " + "; ".join(tools.titles[e] for e in expected) + "\n"


def test_calls_link_names_follow_several_entities_and_say_what_is_missing(con):
    tools = GraphTools(con)
    assert tools.call("relations", "Kavimo Rutell").text == "Kavimo Rutel: lived in (2)\n"  # a fuzzy name links
    two = tools.call("neighbors", "Dagiju; Velor | located in")
    assert two.found == (3,) and two.text == "Dagiju --located in--> Lorentia\nVelor --located in--> Lorentia\n"
    assert tools.call("neighbors", "Kavimo Rutel | lives in").relation == "lived in"  # the closest of its labels
    assert tools.call("neighbors", "Kavimo Rutel | capital of").text == 'Kavimo Rutel has no relation "capital of"\n'
    assert tools.call("neighbors", "Nobody Here | lived in").text == 'No entity matches "Nobody Here".\n'
    assert "Name a relation" in tools.call("neighbors", "Kavimo Rutel").text
    capped = GraphTools(con, max_neighbors=1).call("neighbors", "Kavimo Rutel | lived in")
    assert capped.text == "Kavimo Rutel --lived in--> Dagiju (and 1 more)\n" and capped.found == (2,)
    assert split_call("A ; B | r") == (["A", "B"], "r")
    with pytest.raises(ValueError, match="graph_max_neighbors"):
        GraphTools(con, max_neighbors=0)
    with pytest.raises(ValueError, match="graph tool"):
        tools.call("kg_search", "Kavimo Rutel")


def test_the_graph_protocol_offers_the_graph_tools_instead_of_document_search():
    message = protocol.solver_user_message("Who?", graph=True)
    assert "<relations>" in message and "<neighbors>" in message and "<search>" not in message
    assert protocol.parse_action("<relations> Ann </relations>", graph=True) == protocol.Action("relations", "Ann")
    assert protocol.parse_action("<search> Ann </search>", graph=True).kind == "invalid"
    assert protocol.parse_action("<neighbors> Ann | r </neighbors>").kind == "invalid"  # not offered elsewhere
    with pytest.raises(ValueError, match="not both"):
        protocol.solver_user_message("Who?", kg=True, graph=True)


def test_only_the_eog_rows_explore_with_the_graph_tools():
    assert {m for m, spec in METHODS.items() if uses_graph_tools(spec)} == {m for m in METHODS if m.startswith("eog")}
    assert not uses_graph_tools(METHODS["eog"], "off") and uses_graph_tools(METHODS["coevokg"], "on")
    with pytest.raises(ValueError, match="method.graph_tools"):
        preset("smoke", **{"method.graph_tools": "yes"})
    with pytest.raises(ValueError, match="method.graph_max_neighbors"):
        preset("smoke", **{"method.graph_max_neighbors": 0})


def test_graph_tools_are_refused_beside_the_kg_tool_and_under_several_ranks(con):
    from workbench.method import distributed
    from workbench.method.loop import Trainer

    cfg = preset("smoke", **{"method.kg_tool": "on"})
    with pytest.raises(ValueError, match="not both"):
        Trainer(con, cfg, METHODS["eog"], "r", policy=None, reference=None, search=None)
    with pytest.raises(ValueError, match="method.graph_tools under --gpus 2"):
        distributed.check_config(preset("smoke"), METHODS["eog"], 2)
    distributed.check_config(preset("smoke", **{"method.graph_tools": "off"}), METHODS["eog"], 2)


# ---------------------------------------------------------------- a rollout that explores and answers a set

QUESTION = "Where did Kavimo Rutel live?"
SCRIPT = ["<think>his relations</think><relations> Kavimo Rutel </relations>",
          "<think>where he lived</think><neighbors> Kavimo Rutel | lived in </neighbors>",
          "<answer> Dagiju; Velor </answer>"]


@pytest.fixture(scope="module")
def graph_policy(con):
    """A tiny model overfitted on one script that explores with both graph tools and answers a set."""
    tools = GraphTools(con)
    corpus = [protocol.SOLVER_INSTRUCTION_GRAPH, *(t for _, _, t in PASSAGES), *SCRIPT] * 10
    tok = train_tokenizer(corpus, vocab_size=400, extra_tokens=protocol.GRAPH_TAGS)
    backbone = dataclasses.replace(preset("smoke").backbone, hidden_size=64, layers=2, heads=2, kv_heads=1)
    policy = Policy(tiny_model(backbone, tok, seed=0), tok, device="cpu")
    ids = policy.encode(policy.chat_prompt(protocol.solver_user_message(QUESTION, graph=True)))
    n_prompt = len(ids)
    for turn in SCRIPT:
        ids += policy.encode(turn)
        action = protocol.parse_action(turn, graph=True)
        if action.kind in protocol.GRAPH_ACTIONS:
            ids += policy.encode(protocol.information_block(tools.render(tools.call(action.kind, action.text))))
    ids = torch.tensor([ids + [tok.eos_token_id]])
    labels = ids.clone()
    labels[0, :n_prompt] = -100
    with memorized(policy, ids, labels, 60):
        yield policy, tools, SearchTool(con, topk=1)


def _topology_slot(answers):
    view = eog.TopologyView(-1, "", [1, *range(2, 2 + len(answers))], ["Kavimo Rutel", *answers], ["lived in"],
                            [""] * (1 + len(answers)), pattern="1p", n_anchors=1)
    return Slot(QUESTION, list(answers), 1, "generated", view)


def test_a_rollout_calls_the_graph_tools_and_its_answer_set_is_scored(graph_policy):
    policy, tools, search = graph_policy
    (t,) = rollout(policy, search, [QUESTION], 1, temperature=0.0, max_new_tokens=32, max_total_tokens=400,
                   graph=tools)
    assert t.kg_queries == ["Kavimo Rutel", "Kavimo Rutel | lived in"] and t.kg_tools == ["relations", "neighbors"]
    assert t.kg_entity_ids == [1, 1] and t.queries == [] and t.invalid_actions == 0
    assert answer_list(t.answer) == ["Dagiju", "Velor"]
    inserted = policy.tokenizer.decode([i for i, m in zip(t.response_ids, t.loss_mask) if not m])
    assert "Kavimo Rutel --lived in--> Dagiju; Velor" in inserted  # the tools' text is masked out of the loss
    # scored as the loop scores it: the whole set against the query's complete answer set
    graph = EvidenceGraph({}, PathSupportParams())
    score = score_trajectory(t, ["Dagiju", "Velor"], {}, graph, R.SOLVER_REWARDS["eog_f1"],
                             slot=_topology_slot(["Dagiju", "Velor"]), answer_sets=True)
    assert (score.r_ans, score.reward) == (1.0, 1.0)
    hit1 = score_trajectory(t, ["Velor", "Oslo"], {}, graph, R.SOLVER_REWARDS["eog_hit1"],
                            slot=_topology_slot(["Velor", "Oslo"]), answer_sets=True)
    assert (hit1.r_ans, hit1.reward) == (0.0, 0.0)  # Hit@1 reads the first answer only
    # the calls are counted per rollout, as DynaSearcher's KG searches
    metrics = tool_use_metrics([Rollout(t, score)], kg_tool=True)
    assert metrics == {"searches_doc": 0.0, "searches_kg": 2.0}
    # offered no graph tools, the same model's <relations> is an invalid action
    (plain,) = rollout(policy, search, [QUESTION], 1, temperature=0.0, max_new_tokens=32, max_total_tokens=400,
                       max_turns=2)
    assert plain.kg_queries == [] and plain.invalid_actions >= 1


def test_score_questions_counts_the_calls_and_scores_the_first_answer(graph_policy):
    import pandas as pd

    policy, tools, search = graph_policy
    frame = pd.DataFrame({"question_id": [1, 2], "family": ["1p", "1p"], "question": [QUESTION, QUESTION],
                          "answers": [["Dagiju", "Velor"], ["Velor"]]})
    scored = score_questions(policy, search, frame, preset("smoke").rollout, graph=tools)
    assert scored.prediction.tolist() == ["Dagiju; Velor"] * 2  # the whole set is kept for set F1
    assert scored.em.tolist() == [1.0, 0.0]  # em is the first answer's: Hit@1 against the golds
    assert scored.searches_kg.tolist() == [2, 2] and scored.searches_doc.tolist() == [0, 0]


# ---------------------------------------------------------------- the set metrics

def test_an_answer_set_is_no_longer_capped_at_two_over_one_plus_the_set():
    answers = ["Rome", "Oslo", "Bern"]
    slot = _topology_slot(answers)
    one = R.SolverInputs(1.0, trajectory=type("T", (), {"answer": "Oslo"})(), slot=slot)
    every = R.SolverInputs(1.0, trajectory=type("T", (), {"answer": "Oslo; Rome; Bern"})(), slot=slot)
    assert eog_rewards.eog_f1(one) == pytest.approx(2 / (1 + len(answers)))  # what one answer can reach
    assert eog_rewards.eog_f1(every) == 1.0 and eog_rewards.eog_hit1(every) == 1.0
    wrong_first = R.SolverInputs(0.0, trajectory=type("T", (), {"answer": "Lima; Rome"})(), slot=slot)
    assert eog_rewards.eog_hit1(wrong_first) == 0.0
    assert eog_rewards.eog_f1(wrong_first) == pytest.approx(set_f1(["Lima", "Rome"], answers))
    # a seed question (one entity, its aliases): a set naming it scores by precision, one answer as EM
    seed = Slot("q?", ["Zafonil", "Federation of Zafonil"], 2, "seed")
    assert eog_rewards.eog_f1(R.SolverInputs(1.0, trajectory=type("T", (), {"answer": "Zafonil"})(), slot=seed)) == 1.0
    assert eog_rewards.eog_f1(R.SolverInputs(1.0, trajectory=type("T", (), {"answer": "Zafonil; Oslo"})(),
                                   slot=seed)) == pytest.approx(2 / 3)


def test_set_scores_read_a_prediction_as_its_ranked_answers():
    from workbench.evaluate import set_scores

    c = store.connect(":memory:")
    c.execute("INSERT INTO questions (question_id, dataset, split, family, question, answers) VALUES "
              "(1, 'tinyworld_topology', 'test', '2p', 'q?', ['Rome', 'Oslo']), "
              "(2, 'tinyworld_topology', 'test', '2p', 'q?', ['Rome', 'Oslo'])")
    c.execute("INSERT INTO eval_outcomes (eval_id, model, dataset, question_id, prediction, em, f1, cover_em, turns) "
              "VALUES ('e', 'm', 'tinyworld_topology', 1, 'Oslo; Rome', 0, 0, 0, 1), "
              "('e', 'm', 'tinyworld_topology', 2, 'Bern; Rome', 0, 0, 0, 1)")
    macro = set_scores(c, "e").set_index("group").loc["macro"]
    assert macro.hit1 == pytest.approx(0.5) and macro.f1 == pytest.approx((1.0 + 0.5) / 2)


# ---------------------------------------------------------------- the warm start's demonstrations

def test_family_demonstrations_explore_with_the_graph_tools_alone(world):
    from workbench.policy import warmstart as ws

    tools = GraphTools(world)
    demos = ws.world_demos(world, SearchTool(world), ws.DEMO_FAMILIES, False, "<|im_end|>", graph=tools)
    questions = world.execute("SELECT count(*) FROM questions WHERE family IS NOT NULL").fetchone()[0]
    assert {d.family for d in demos} == set(ws.DEMO_FAMILIES) and len(demos) >= 0.8 * questions
    for demo in demos:
        assert "<neighbors>" in demo.user and not any(t.startswith(protocol.SEARCH_OPEN) for t, _ in demo.segments)
        calls = [(t, s[0]) for (t, _), s in zip(demo.segments, demo.segments[1:]) if t.startswith("<")
                 and not t.startswith(protocol.ANSWER_OPEN)]
        for text, info in calls:  # each call's information block is what the tools return for it
            kind = protocol.parse_action(text, graph=True)
            assert info == protocol.information_block(tools.render(tools.call(kind.kind, kind.text)))
        answer = protocol.parse_action(demo.segments[-1][0], graph=True)
        assert answer.kind == "answer"
        # read off the last call; a comparison's answer is the subject the question names whose year wins
        assert answer.text in (demo.user if demo.family == "comparison" else calls[-1][1])
    assert ws.demo_tool_calls(demos)["comparison"]["kg"] == 4 * ws.demo_tool_calls(demos)["comparison"]["demos"]


def test_topology_solver_demonstrations_answer_the_querys_set(world):
    tools = GraphTools(world)
    demos_of = eog_warmstart.TopologyDemos.from_config(preset("smoke"))
    assert demos_of.graph == {"max_neighbors": 20, "min_similarity": 0.75} and demos_of.solver_share > 0
    views = demos_of.views(world, 0, 12)
    planned = 0
    for v in views:
        plan = eog_warmstart.topology_solver_calls(tools, v)
        if plan is None:
            continue
        planned += 1
        calls, answers = plan
        assert len(calls) == topology.N_RELATIONS[v.pattern] and all(k == "neighbors" for k, _, _ in calls)
        assert set(answers) <= set(v.answer_titles)
        assert len(answers) == min(len(v.answer_titles), eog_warmstart.DEMO_MAX_LISTED)
    assert planned >= 0.8 * len(views)
    demos = demos_of(world, 0, "<|im_end|>")
    solver = [d for d in demos if d.role == "solver"]
    assert {d.family for d in solver} == {f"topology:solver:{p}" for p in topology.PATTERNS}
    assert all(d.user.startswith(protocol.SOLVER_INSTRUCTION_GRAPH) for d in solver)


def test_demo_set_with_graph_tools_keeps_the_mix_and_teaches_only_the_graph_tools():
    from workbench.policy.warmstart import demo_set

    plain, _ = demo_set(40, seed=0, eos="<|im_end|>")
    extra = eog_warmstart.TopologyDemos.from_config(preset("smoke"))
    mixed, _ = demo_set(40, seed=0, eos="<|im_end|>", extra=extra)
    assert len(mixed) == len(plain)
    solver = [d for d in mixed if d.role == "solver"]
    assert len(solver) == sum(d.role == "solver" for d in plain)
    assert sum(d.family.startswith("topology:solver:") for d in solver) == round(len(solver) * extra.solver_share)
    assert all(not any(t.startswith(protocol.SEARCH_OPEN) for t, _ in d.segments) for d in solver)


# ---------------------------------------------------------------- the EoG rows, end to end at smoke size

def test_eog_rows_explore_with_the_graph_tools_and_log_their_calls(tmp_path):
    """Plumbing at smoke size (the 190k-parameter base learns nothing): an EoG round offers the graph
    tools, logs the calls per rollout, validates with them, and its best checkpoint carries them to eval."""
    import json

    from workbench.evaluate import evaluate, model_graph_tools
    from workbench.method.train import ensure_world, run_dir, train
    from workbench.policy.warmstart import warmstart

    db = tmp_path / "smoke.duckdb"
    c = store.connect(db)
    ensure_world(c, preset("smoke"))
    base = warmstart(c, "smoke", log=None)  # the default smoke warm start: plumbing, not learning
    c.close()
    run = "eog-graph-tools"  # a name no other test's run takes (runs/ is shared by the session's tests)
    (row,) = train(str(db), run=run, method="eog", preset="smoke", steps=1, model=base, progress=False, log=None)
    assert {"searches_doc", "searches_kg", "topology_tasks"} <= set(row) and row["searches_doc"] == 0.0
    info = json.loads((run_dir(run) / "best" / "workbench.json").read_text())
    assert info["graph_tools"] == {"max_neighbors": 20, "min_similarity": 0.75}
    c = store.connect(db)
    assert isinstance(model_graph_tools(run_dir(run) / "best", c), GraphTools)
    eval_id = evaluate(c, run_dir(run) / "best", "tinyworld_topology", limit=1, log=None)
    assert c.execute("SELECT count(*) FROM eval_outcomes WHERE eval_id = ?", [eval_id]).fetchone()[0] == 6
    c.close()
    (plain,) = train(str(db), run="eog-graph-tools-off", method="eog", preset="smoke", steps=1, model=base,
                     progress=False, log=None, overrides={"method.graph_tools": "off"})
    assert "searches_kg" not in plain  # without the tools, EoG's round is the document-search one
