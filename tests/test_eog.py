"""EoG (seed 004) as a method of the round: topology tasks, their gate, set rewards, role ablations,
the curriculum metrics (issue 19)."""

import doctest

import numpy as np
import pytest

from workbench import store
from workbench.config import preset
from workbench.kg import topology
from workbench.method import eog, methods
from workbench.method.rewards import PROPOSER_REWARDS, SOLVER_REWARDS, SolverInputs
from workbench.method.train import ensure_world, train
from workbench.policy.rollout import Trajectory


def test_doctests():
    assert doctest.testmod(eog).failed == 0


def _view(pattern="2p", anchors=("Ann",), answers=("Rome", "Oslo"), relations=("born in", "located in")):
    titles = [*anchors, *answers]
    return eog.TopologyView(-1, "", list(range(len(titles))), titles, list(relations),
                            [f"{t} is described here." for t in titles], pattern=pattern, n_anchors=len(anchors))


def test_gate_accepts_any_member_of_the_answer_set_and_names_anchors_freely():
    v = _view()
    q = "Where is the city located in which Ann was born?"
    verdicts = eog.topology_gate(v, [(q, "Oslo"), (q, "rome"), (q, "Bergen")], eog.TopologyVerifier(), 0.5, 2)
    assert [x.admitted for x in verdicts] == [True, True, False]
    assert verdicts[2].reason == "answer not in answer set"
    assert verdicts[0].scores["multi_hop"] == 1.0 and verdicts[0].scores["answer_focus"] == 1.0


def test_gate_rejects_a_question_naming_any_answer():
    v = _view()
    verdicts = eog.topology_gate(v, [("Where was Ann born, Rome perhaps?", "Oslo"), None],
                                 eog.TopologyVerifier(), 0.0, 2)
    assert [x.reason for x in verdicts] == ["leak: names answer 'Rome'", "extraction failed"]
    assert not any(x.admitted for x in verdicts)


def test_an_intersection_question_must_name_every_anchor():
    """2i with one branch named asks a wider query (a superset of the answers scored against)."""
    v = _view("2i", anchors=("Ann", "Bo"), relations=("born in", "lives in"))
    one = "Where was Ann born?"
    both = "Which city was Ann born in that Bo lives in?"
    verdicts = eog.topology_gate(v, [(one, "Rome"), (both, "Rome")], eog.TopologyVerifier(), 0.0, 2)
    assert verdicts[0].reason == "misses anchor: 'Bo'" and not verdicts[0].passed
    assert verdicts[1].extracted and not verdicts[1].reason.startswith("misses anchor")
    single = eog.topology_gate(_view(), [("Where is the city located in which someone was born?", "Rome")],
                               eog.TopologyVerifier(), 0.0, 1)
    assert not single[0].reason.startswith("misses anchor")  # one anchor: the verifier's faithfulness weighs it


def test_gate_admits_the_top_k_by_quality():
    v = _view()
    good = "Where is the city located in which Ann was born?"
    weak = "Where was the person born?"  # touches one of two relations and names no anchor
    verdicts = eog.topology_gate(v, [(weak, "Rome"), (good, "Rome")], eog.TopologyVerifier(), 0.0, 1)
    assert verdicts[1].q > verdicts[0].q > 0
    assert [x.admitted for x in verdicts] == [False, True] and all(x.passed for x in verdicts)


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    path = tmp_path_factory.mktemp("eog") / "smoke.duckdb"
    con = store.connect(path)
    ensure_world(con, preset("smoke"))
    con.close()
    return str(path)


def test_views_carry_the_executed_answer_set(db):
    con = store.connect(db, read_only=True)
    g = topology.TopologyGraph.from_store(con)
    titles = dict(con.execute("SELECT entity_id, title FROM entities").fetchall())
    queries = eog.draw_queries(g, topology.PATTERNS, 24, seed=3, max_answers=20)
    assert eog.draw_queries(g, topology.PATTERNS, 24, seed=3, max_answers=20) == queries  # deterministic
    assert set(q.pattern for q in queries) == set(topology.PATTERNS)
    for q, v in zip(queries, eog.topology_views(con, queries, titles)):
        assert v.anchor_titles == [titles[a] for a in q.anchors]
        assert v.answer_titles == [titles[a] for a in topology.execute(g, q.pattern, q.anchors, q.relations)]
        assert all(v.passages)  # every anchor and answer has a lead passage in TinyWorld
        prompt = eog.topology_prompts(lambda u: u, [v], prompt="query")[0]
        assert all(t in prompt for t in v.titles) and all(r in prompt for r in v.relations)
        with pytest.raises(ValueError, match="no witness"):  # views built without the graph
            eog.topology_prompts(lambda u: u, [v], prompt="witness")
    con.close()


def _holds(edges, pattern, grounding, relations):
    """Brute force: every atom of Table 6's formula holds on the edge set for this grounding."""
    env = dict(zip(topology.VARIABLES[pattern], grounding))
    atoms = [a.strip() for a in topology.FORMULAS[pattern].split("∧")]
    for atom in atoms:
        rel, args = atom.split("(")
        s, o = (x.strip() for x in args.rstrip(")").split(","))
        if (env[s], env[o], relations[int(rel[1:]) - 1]) not in edges:
            return False
    return True


def test_witness_grounds_every_atom_for_every_answer(db):
    con = store.connect(db, read_only=True)
    g = topology.TopologyGraph.from_store(con)
    edges = set(con.execute("SELECT src, dst, relation FROM edges").fetchall())
    for p in topology.PATTERNS:
        queries = topology.sample_queries(g, p, 15, seed=5)
        assert queries
        for q in queries:
            assert topology.witness(g, q) == topology.witness(g, q, q.answers[0])
            for x in q.answers:
                w = topology.witness(g, q, x)
                assert w[:len(q.anchors)] == q.anchors and w[-1] == x
                assert _holds(edges, p, w, q.relations), (q, w)
        non_member = next(e for e in g.node_ids.tolist() if e not in q.answers)
        with pytest.raises(ValueError, match="answer"):
            topology.witness(g, q, non_member)
    con.close()


def _witness_view(pattern):
    names = {"a": "Ann", "a1": "Ann", "a2": "Bo", "y": "Yale", "y1": "Yale", "y2": "Yew", "x": "Rome"}
    rels = [f"rel{i + 1}" for i in range(topology.N_RELATIONS[pattern])]
    variables = topology.VARIABLES[pattern]
    n_anchors = topology.N_ANCHORS[pattern]
    titles = [names[v] for v in variables]
    return eog.TopologyView(-1, pattern, list(range(n_anchors)) + [99], titles[:n_anchors] + ["Rome"], rels,
                            [f"{t} text." for t in titles[:n_anchors]] + ["Rome text."], pattern=pattern,
                            n_anchors=n_anchors, witness=tuple(range(len(variables))), witness_titles=tuple(titles),
                            witness_passages=tuple(f"{t} text." for t in titles))


# The chain each pattern linearises to (eog.LINEARISATION): (node, relation to the next) lines.
WITNESS_CHAINS = {
    "1p": "[1] Ann: Ann text.\n    --rel1-->\n[2] Rome: Rome text.",
    "2p": "[1] Ann: Ann text.\n    --rel1-->\n[2] Yale: Yale text.\n    --rel2-->\n[3] Rome: Rome text.",
    "3p": ("[1] Ann: Ann text.\n    --rel1-->\n[2] Yale: Yale text.\n    --rel2-->\n[3] Yew: Yew text.\n"
           "    --rel3-->\n[4] Rome: Rome text."),
    "2i": "[1] Ann: Ann text.\n    --rel1-->\n[2] Rome: Rome text.\n[3] Bo: Bo text.\n    --rel2--> [2]",
    "ip": ("[1] Ann: Ann text.\n    --rel1-->\n[2] Yale: Yale text.\n    --rel3-->\n[3] Rome: Rome text.\n"
           "[4] Bo: Bo text.\n    --rel2--> [2]"),
    "pi": ("[1] Ann: Ann text.\n    --rel1-->\n[2] Yale: Yale text.\n    --rel2-->\n[3] Rome: Rome text.\n"
           "[4] Bo: Bo text.\n    --rel3--> [3]"),
}


@pytest.mark.parametrize("pattern", topology.PATTERNS)
def test_witness_prompt_renders_each_pattern_as_a_chain(pattern):
    v = _witness_view(pattern)
    text = eog.render_witness(v)
    assert text == eog.render_witness(_witness_view(pattern))  # deterministic
    head, _, chain = text.partition("Chain:\n")
    assert head == eog.WITNESS_INSTRUCTION.format(x=eog.LINEARISATION[pattern][0].index("x") + 1)
    assert chain.strip() == WITNESS_CHAINS[pattern]
    assert eog.topology_prompts(lambda u: "<u>" + u, [v], 2) == ["<u>" + text] * 2


def test_witness_prompt_from_the_store_is_deterministic(db):
    con = store.connect(db, read_only=True)
    views = eog.sample_views(con, per_pattern=3, seed=2)
    again = eog.sample_views(con, per_pattern=3, seed=2)
    con.close()
    assert eog.topology_prompts(lambda u: u, views) == eog.topology_prompts(lambda u: u, again)
    for v, prompt in zip(views, eog.topology_prompts(lambda u: u, views)):
        assert v.witness_titles[-1] == v.answer_titles[0]  # the witness derives the first answer
        assert all(t in prompt for t in v.witness_titles) and all(r in prompt for r in v.relations)


def test_topology_prompt_config_is_checked():
    assert preset("tiny").method.topology_prompt == "query"  # seed 004's skeleton (since 2026-12-04)
    assert preset("tiny", **{"method.topology_prompt": "witness"}).method.topology_prompt == "witness"
    with pytest.raises(ValueError, match="method.topology_prompt"):
        preset("tiny", **{"method.topology_prompt": "chain"})
    with pytest.raises(ValueError, match="method.topology_prompt"):
        eog.topology_prompts(lambda u: u, [_witness_view("1p")], prompt="chain")


def test_patterns_config_is_checked():
    assert eog.parse_patterns("2i,pi") == ("2i", "pi")
    with pytest.raises(ValueError, match="method.topology_patterns"):
        eog.parse_patterns("2p,4p")


def test_set_rewards_score_against_the_whole_set():
    v = _view(answers=("Rome", "Oslo", "Bern", "Lima"))
    from workbench.method.loop import Slot

    slot = Slot("q?", v.answer_titles, 2, "generated", v)
    hit = Trajectory(0, 0, "p", [], answer="Bern")
    miss = Trajectory(0, 0, "p", [], answer="Ann")
    assert SOLVER_REWARDS["eog_hit1"](SolverInputs(1.0, trajectory=hit, slot=slot)) == 1.0
    assert SOLVER_REWARDS["eog_f1"](SolverInputs(1.0, trajectory=hit, slot=slot)) == pytest.approx(0.4)
    assert SOLVER_REWARDS["eog_f1"](SolverInputs(0.0, trajectory=miss, slot=slot)) == 0.0
    seed = Slot("q?", ["Rome", "Roma"], 2, "seed")  # aliases of one entity: F1 is EM there
    assert SOLVER_REWARDS["eog_f1"](SolverInputs(1.0, trajectory=Trajectory(0, 0, "p", [], answer="Roma"),
                                                 slot=seed)) == 1.0


def test_eog_rows_are_method_specs():
    assert methods.method_spec("eog").task_source == "kg_topology"
    assert methods.method_spec("eog").proposer_reward == "eog_variance"
    assert methods.method_spec("eog_adversarial").proposer_reward == "ssp_adversarial"
    assert methods.method_spec("eog_random_walk").task_source == "kg_chains"
    assert not methods.method_spec("eog_wo_solver_update").update_solver
    assert not methods.method_spec("eog_wo_proposer_update").update_proposer
    for m in methods.METHODS.values():
        SOLVER_REWARDS[m.solver_reward]
        if m.proposer_reward:
            PROPOSER_REWARDS[m.proposer_reward]


def _force_admission(monkeypatch):
    """The smoke base writes nothing the gate admits: give each query a question that walks its
    relations and names its anchors, with its first answer."""
    real = eog.topology_gate

    def gate(view, candidates, *args, **kwargs):
        q = f"Which is the {' of the '.join(reversed(view.relations))} of {' and '.join(view.anchor_titles)}?"
        return real(view, [(q, view.answer_titles[0])] * len(candidates), *args, **kwargs)

    monkeypatch.setattr(eog, "topology_gate", gate)


def test_an_eog_round_poses_queries_and_counts_the_curriculum(db, monkeypatch):
    _force_admission(monkeypatch)
    rows = train(db, run="eog-forced", method="eog", preset="smoke", steps=2, progress=False, log=None)
    cfg = preset("smoke").method
    for r in rows:
        assert sum(r["topology_tasks"].values()) == cfg.chains_per_round
        assert r["topology_admitted"] == r["topology_tasks"]  # every forced question passes
        assert all(v == 1.0 for v in r["topology_success"].values())
        assert r["seed_fallback_rate"] == 0.0 and r["avg_hops_generated"] >= 1
    con = store.connect(db, read_only=True)
    stored = con.execute("SELECT q.answers, c.reward FROM generated_questions g JOIN questions q USING (question_id) "
                         "JOIN candidates c ON c.run = g.run AND c.round = g.round AND c.question = q.question "
                         "AND c.admitted WHERE g.run = 'eog-forced'").fetchall()
    con.close()
    assert stored and all(len(a) >= 1 for a, _ in stored)
    assert all(r is not None and 0.0 <= r <= 0.25 for _, r in stored)  # a variance of scores in [0, 1]


def test_other_methods_report_no_curriculum(db):
    rows = train(db, run="c1-plain", method="c1", preset="smoke", steps=1, progress=False, log=None)
    assert not any(k.startswith("topology_") for k in rows[0])


@pytest.mark.parametrize("method, solver, proposer", [("eog", True, True), ("eog_wo_solver_update", False, True),
                                                       ("eog_wo_proposer_update", True, False)])
def test_role_ablations_drop_that_role_from_the_update(db, monkeypatch, method, solver, proposer):
    from workbench.method import loop

    seen = []
    real = loop.Trainer._step

    def step(self, t, rows, advantages, **kwargs):
        seen.extend(rows)
        return real(self, t, rows, advantages, **kwargs)

    monkeypatch.setattr(loop.Trainer, "_step", step)
    train(db, run=f"roles-{method}", method=method, preset="smoke", steps=1, progress=False, log=None)
    cfg = preset("smoke").method
    n_solver = cfg.chains_per_round * cfg.admit_top_k * cfg.group_size
    n_proposer = cfg.chains_per_round * cfg.candidates_per_chain  # every smoke candidate fails extraction: penalised
    assert len(seen) == solver * n_solver + proposer * n_proposer
    assert np.all([len(r.response_ids) > 0 for r in seen])


def test_curriculum_pools_runs_and_splits_simple_from_complex():
    import pandas as pd

    from workbench import figures

    m = pd.DataFrame([
        dict(run="a", round=0, topology_tasks={"1p": 3, "ip": 1}, topology_admitted={"1p": 3, "ip": 0}),
        dict(run="b", round=0, topology_tasks={"1p": 1, "pi": 3}, topology_admitted={"1p": 0, "pi": 2}),
        dict(run="a", round=1, topology_tasks={"3p": 2}, topology_admitted={"3p": 1}),
        dict(run="c", round=0, admitted_rate=0.5),  # a run of another method: no topology keys
    ])
    s = figures.topology_success(m).set_index(["round", "topology"]).success
    assert s[(0, "1p")] == 0.75 and s[(0, "ip")] == 0.0 and s[(0, "pi")] == pytest.approx(2 / 3)
    assert s[(0, "simple")] == 0.75 and s[(0, "complex")] == 0.5 and s[(1, "complex")] == 0.5
    assert figures.topology_success(m, runs=["b"]).set_index(["round", "topology"]).success[(0, "1p")] == 0.0
    assert figures.topology_success(m[m.run == "c"]).empty


def test_curriculum_figure_reads_an_eog_run(db):
    from workbench import figures

    train(db, run="eog-fig", method="eog", preset="smoke", steps=1, progress=False, log=None)
    con = store.connect(db, read_only=True)
    fig = figures.topology_curriculum(con, runs=["eog-fig"])
    con.close()
    names = [t.name for t in fig.data]
    assert names[:2] == ["simple", "complex"][:len(names[:2])] and set(names[2:]) <= set(topology.PATTERNS)
    assert "eog-fig" in fig.layout.title.subtitle.text


def test_bench_topology_command(capsys):
    import json

    from workbench.cli import main

    assert main(["bench", "topology", "--edges", "4000", "--queries", "3"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["edges"] == 4000 and all(r[p]["n"] >= 1 and r[p]["sql_vs_csr"] > 0 for p in topology.PATTERNS)


def test_topology_questions_hold_complete_answer_sets(db):
    from workbench.kg import topology_qa

    con = store.connect(db)
    n = topology_qa.ensure_topology_questions(con, per_pattern=5, split="probe")
    assert topology_qa.ensure_topology_questions(con, per_pattern=5, split="probe") == n  # built once
    rows = con.execute("SELECT family, question, answers, chain FROM questions WHERE dataset = ? AND split = 'probe' "
                       "ORDER BY question_id", [topology_qa.DATASET]).fetchall()
    g = topology.TopologyGraph.from_store(con)
    titles = dict(con.execute("SELECT entity_id, title FROM entities").fetchall())
    con.close()
    assert len(rows) == n and {r[0] for r in rows} == set(topology.PATTERNS)
    queries = [q for p in topology.PATTERNS for q in topology_qa.askable_queries(g, p, 5, seed=topology_qa.SEED_OFFSET)]
    for q, (pattern, question, answers, chain) in zip(queries, rows, strict=True):
        executed = topology.execute(g, q.pattern, q.anchors, q.relations)
        assert pattern == q.pattern and chain == [*q.anchors, *executed.tolist()]
        assert answers == [titles[a] for a in executed]
        assert all(titles[a] in question and r in question for a in q.anchors for r in q.relations)
        assert not set(q.anchors) & set(executed.tolist())  # no question names one of its own answers


def test_set_scores_hand_computed(con):
    from workbench.evaluate import set_scores

    con.execute("INSERT INTO questions VALUES (0, 'tinyworld_topology', 'test', '2p', 'q0?', ['Ann', 'Bo'], [], 2, 't'), "
                "(1, 'tinyworld_topology', 'test', '2p', 'q1?', ['Cy'], [], 2, 't'), "
                "(2, 'tinyworld_topology', 'test', '1p', 'q2?', ['Di', 'Ed', 'Fo'], [], 1, 't')")
    con.execute("INSERT INTO eval_outcomes (eval_id, model, dataset, question_id, prediction, em, f1, cover_em, turns) "
                "VALUES ('e', 'm', 'tinyworld_topology', 0, 'bo', 1, 1, 1, 1), ('e', 'm', 'tinyworld_topology', 1, 'x', 0, 0, 0, 1), "
                "('e', 'm', 'tinyworld_topology', 2, 'Fo', 1, 1, 1, 1)")
    s = set_scores(con, "e", n_boot=50).set_index("group")
    # 2p: hits 1 of 2, F1 (2/3 + 0) / 2; 1p: hit, F1 2 / (1 + 3); macro: the mean of the families
    assert s.loc["2p", "hit1"] == 0.5 and s.loc["2p", "f1"] == pytest.approx(1 / 3)
    assert s.loc["1p", "hit1"] == 1.0 and s.loc["1p", "f1"] == pytest.approx(0.5)
    assert s.loc["macro", "hit1"] == 0.75 and s.loc["macro", "f1"] == pytest.approx((1 / 3 + 0.5) / 2)
    assert s.loc["macro", "f1_low"] <= s.loc["macro", "f1"] <= s.loc["macro", "f1_high"]


def test_eval_on_topology_questions_reports_hit1_and_f1(db):
    from workbench.evaluate import evaluate, set_scores
    from workbench.method.train import run_dir

    train(db, run="eog-eval", method="eog", preset="smoke", steps=1, progress=False, log=None)
    lines = []
    eval_id = evaluate(db, run_dir("eog-eval") / "best", "tinyworld_topology", "test", limit=2, log=lines.append)
    assert any("Hit@1" in line and "F1" in line for line in lines)
    con = store.connect(db, read_only=True)
    s = set_scores(con, eval_id)
    con.close()
    assert set(s.group) == {*topology.PATTERNS, "macro"} and s.n.iloc[-1] == 12
    assert ((0 <= s.f1) & (s.f1 <= s.hit1) & (s.hit1 <= 1)).all()


def test_training_draws_never_pose_a_held_out_test_query(db):
    """The smoke graph's query space is small: 20 rounds of the trainer's seeds hit the test set
    (tinyworld_topology) 5 times in 40 draws; with the store's held-out set every hit is redrawn."""
    from workbench.kg import topology_qa

    con = store.connect(db)
    topology_qa.ensure_topology_questions(con)
    g = topology.TopologyGraph.from_store(con)
    titles = dict(con.execute("SELECT entity_id, title FROM entities").fetchall())
    keys, held_out = topology_qa.held_out_keys(con), eog.held_out_queries(con, titles)
    con.close()
    plain = [eog.draw_queries(g, topology.PATTERNS, 2, t * 101 + 1, 20) for t in range(20)]
    kept = [eog.draw_queries(g, topology.PATTERNS, 2, t * 101 + 1, 20, held_out) for t in range(20)]
    assert sum(topology_qa.query_key(q, titles) in keys for qs in plain for q in qs) > 0
    assert not any(topology_qa.query_key(q, titles) in keys for qs in kept for q in qs)
    assert [len(qs) for qs in kept] == [len(qs) for qs in plain]
    assert kept == [eog.draw_queries(g, topology.PATTERNS, 2, t * 101 + 1, 20, held_out) for t in range(20)]
    # a round without a hit draws exactly what it drew without the check
    assert all(k == p for k, p in zip(kept, plain) if not any(topology_qa.query_key(q, titles) in keys for q in p))


def test_an_eog_run_builds_the_test_set_and_leaves_it_out(db, monkeypatch):
    from workbench.kg import topology_qa

    calls, real = [], eog.draw_queries

    def draw(*args, **kwargs):
        out = real(*args, **kwargs)
        calls.append((args[5] if len(args) > 5 else kwargs.get("held_out"), out))
        return out

    monkeypatch.setattr(eog, "draw_queries", draw)
    train(db, run="eog-held-out", method="eog", preset="smoke", steps=2, progress=False, log=None)
    con = store.connect(db, read_only=True)
    assert con.execute("SELECT count(*) FROM questions WHERE dataset = ? AND split = 'test'",
                       [topology_qa.DATASET]).fetchone()[0] > 0
    titles = dict(con.execute("SELECT entity_id, title FROM entities").fetchall())
    keys = topology_qa.held_out_keys(con)
    con.close()
    assert len(calls) == 2 and all(h is not None for h, _ in calls)
    assert not any(topology_qa.query_key(q, titles) in keys for _, qs in calls for q in qs)


def test_the_topology_verifier_counts_a_relation_phrased_in_another_word_form():
    """'Who is the director of X?' walks `directed by` (the verifier's multi-hop and answer focus),
    as TinyWorld's own question forms phrase it; a synonym still does not count, and the chain
    methods' verifier (gate.StructuralVerifier) still matches label words exactly."""
    from workbench.method.gate import StructuralVerifier
    from workbench.method.memory import ChainView

    v = eog.TopologyView(-1, "", [1, 2], ["Kavimo", "Dagiju"], ["directed by"], ["Kavimo is a film.", ""],
                         pattern="1p", n_anchors=1)
    judge = lambda q: eog.TopologyVerifier().judge(v, [(q, "Dagiju")])[0]  # noqa: E731
    assert judge("Who is the director of Kavimo?").reason == "ok"  # every dimension 1
    assert judge("Who directed Kavimo?").scores["multi_hop"] == 1.0
    assert judge("Who made Kavimo?").scores["multi_hop"] == 0.0
    w = eog.TopologyView(-1, "", [1, 2, 3], ["Ann", "Bo", "Rome"], ["employed by", "rises in"], ["", "", ""],
                         pattern="2i", n_anchors=2)
    assert eog.TopologyVerifier().judge(w, [("Which is the employer of Ann where Bo rise?", "Rome")])[0].scores[
        "multi_hop"] == 1.0
    chain = ChainView(0, "h", [1, 2], ["Kavimo", "Dagiju"], ["directed by"], ["Kavimo is a film.", ""])
    assert StructuralVerifier().judge(chain, [("Who is the director of Kavimo?", "Dagiju")])[0].scores["multi_hop"] == 0


def test_held_out_questions_never_name_an_answer_and_keep_the_other_draws(db):
    """A held-out query whose answer set holds one of its anchors would be answered by its own
    question (the anchor is named there): left out, replaced by the pattern's next draw; every other
    draw keeps its place."""
    from workbench.kg import topology_qa

    con = store.connect(db, read_only=True)
    g = topology.TopologyGraph.from_store(con)
    con.close()
    seen_self = False
    for p in topology.PATTERNS:
        drawn = topology.sample_queries(g, p, 30, seed=topology_qa.SEED_OFFSET)
        kept = topology_qa.askable_queries(g, p, 20, seed=topology_qa.SEED_OFFSET)
        free = [q for q in drawn if not set(q.anchors) & set(q.answers)]
        seen_self |= len(free) < len(drawn)
        m = min(len(free), 20)  # where 30 draws hold fewer than 20 free ones, askable_queries draws on
        assert kept[:m] == free[:m] and all(not set(q.anchors) & set(q.answers) for q in kept)
    assert seen_self  # the smoke world has such queries (ip: an inverse relation back to the anchor)


def test_training_draws_pose_no_query_whose_answers_hold_an_anchor(db):
    con = store.connect(db, read_only=True)
    g = topology.TopologyGraph.from_store(con)
    con.close()
    drawn = eog.draw_queries(g, topology.PATTERNS, 300, seed=3, max_answers=topology.MAX_ANSWERS)
    assert len(drawn) == 300 and {q.pattern for q in drawn} == set(topology.PATTERNS)
    assert not any(set(q.anchors) & set(q.answers) for q in drawn)
