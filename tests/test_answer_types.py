"""Answer types of generated vs seed questions per round (issue 15): the metric on a constructed
round over a real (in-memory) store, and its figure with and without data."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from workbench import figures, reference, store
from workbench.method.metrics import chain_entities, round_metrics
from workbench.method.round import Rollout, RoundResult, Slot, TrajectoryScore
from workbench.method.memory import ChainView
from workbench.policy.rollout import Trajectory

NO_COUNTS = "tiny_table2_20rounds.json"  # a reference whose runs predate the answer-type counts

# id, title, type: a chain Ann -> Rome -> Italy, an untyped entity, a bridge chain ending at a year,
# two bands of a comparison
ENTITIES = [(1, "Ann", "person"), (2, "Rome", "city"), (3, "Italy", "country"), (4, "Zed", None),
            (5, "The Nobun Affair", "film"), (6, "Rakular Burur", "person"), (7, "1932", "year"),
            (8, "The Savopel", "band"), (9, "Letuhu", "band")]
UPDATE = dict(kl=0.0, kl_coef=0.1, entropy=1.0, loss=0.0, skipped=False)


def _slots() -> list[Slot]:
    chain = ChainView(0, "h", [1, 2, 3], ["Ann", "Rome", "Italy"], ["born in", "in"], ["", "", ""])
    lone = ChainView(-1, "", [4], ["Zed"], [], [""])  # SSP: one entity, no chain
    return [Slot("Where was the author born?", ["Rome"], 2, "generated", chain),  # a middle entity
            Slot("In which country was the author born?", ["Italy"], 2, "generated", chain),
            Slot("Who is it?", ["zed"], 1, "generated", lone),  # NULL type, matched case-insensitively
            Slot("In what year was the director born?", ["1932"], 2, "seed", gold_chain=[5, 6, 7]),
            Slot("Which band formed first?", ["The Savopel"], 2, "seed", gold_chain=[8, 9]),  # not the chain's end
            Slot("Is it?", ["yes"], 2, "seed", gold_chain=[]),  # an imported question without a chain
            Slot("Where?", ["Paris"], 2, "seed", gold_chain=[1, 2])]  # an answer on no chain entity


def _round(entities) -> RoundResult:
    slots = _slots()
    for i, slot in enumerate(slots):
        traj = Trajectory(i, 0, "p", [1], [2], [1], [-0.1], text="<answer> x </answer>", answer="x", n_generated=1)
        slot.rollouts.append(Rollout(traj, TrajectoryScore(float(i % 2), [], 0.5, True, float(i % 2))))
    return RoundResult(3, [], slots, UPDATE, entities=entities)


def test_answer_types_count_the_type_of_the_entity_each_answer_names():
    con = store.connect(":memory:")
    con.executemany("INSERT INTO entities (entity_id, title, type) VALUES (?, ?, ?)", ENTITIES)
    con.execute("INSERT INTO entities (entity_id, title, type) VALUES (10, 'Unused', 'river')")
    entities = chain_entities(con, _slots())
    assert sorted(entities) == [1, 2, 3, 4, 5, 6, 7, 8, 9]  # the slots' chain entities only
    m = round_metrics(_round(entities), tau_path=0.5)
    assert m["answer_types_generated"] == {"city": 1, "country": 1, "untyped": 1}
    assert m["answer_types_seed"] == {"band": 1, "literal": 2, "year": 1}
    assert list(m["answer_types_seed"]) == sorted(m["answer_types_seed"])
    # the other keys do not depend on the lookup; without it (a rank other than 0) the two keys are left out
    without = round_metrics(_round(None), tau_path=0.5)
    assert "answer_types_seed" not in without
    assert without == {k: v for k, v in m.items() if not k.startswith("answer_types_")}
    assert (m["avg_hops_generated"], m["avg_hops_seed"], m["seed_fallback_rate"]) == (5 / 3, 2.0, 4 / 7)
    assert json.loads(json.dumps(m)) == m  # what run_metrics stores


def test_a_group_without_slots_counts_nothing():
    r = _round({e: (t, k) for e, t, k in ENTITIES})
    r.slots = [s for s in r.slots if s.source == "seed"]  # Search-R1: every slot a seed question
    m = round_metrics(r, tau_path=0.5)
    assert m["answer_types_generated"] == {} and m["answer_types_seed"] == {"band": 1, "literal": 2, "year": 1}


# -- the figure --------------------------------------------------------------------------------

@pytest.fixture()
def db(tmp_path):
    """Two runs: 'old' without the counts (logged before them), 'new' with two rounds of them."""
    path = tmp_path / "types.duckdb"
    con = store.connect(path)
    for run in ("old", "new"):
        con.execute("INSERT INTO runs (run, method, preset, seed, config, config_hash, steps, status) "
                    "VALUES (?, 'coevokg', 'tiny', 7, '{}', 'hash', 2, 'done')", [run])
    rounds = {"old": [{}, {}],
              "new": [dict(answer_types_generated={"city": 1}, answer_types_seed={"year": 2, "literal": 1}),
                      dict(answer_types_generated={"city": 1, "person": 2}, answer_types_seed={"year": 1})]}
    for run, rows in rounds.items():
        for rnd, extra in enumerate(rows):
            con.execute("INSERT INTO run_metrics VALUES (?, ?, ?)",
                        [run, rnd, json.dumps(dict(round=rnd, val_em=0.1, avg_hops_seed=1.5, **extra))])
    con.close()
    return path


def _bars(fig, xaxis: str = "x") -> dict[str, list[float]]:
    return {t.name: [round(v, 6) for v in t.y] for t in fig.data if t.xaxis == xaxis}


def test_answer_types_figure_stacks_each_groups_shares(db):
    con = figures.open_store(db)
    fig = figures.answer_types(con, ref=reference.load(NO_COUNTS))
    con.close()
    # 'new' pooled over its rounds: generated city 2, person 2 (4 slots); seed year 3, literal 1 (4 slots)
    assert [a.text for a in fig.layout.annotations] == ["this run: new"]  # the reference has no counts: no panel
    assert _bars(fig) == {"city": [0.5, 0.0], "person": [0.5, 0.0], "year": [0.0, 0.75], "literal": [0.0, 0.25]}
    assert list(fig.data[0].x) == ["generated (4 slots)", "seed (4 slots)"]
    assert fig.layout.barmode == "stack" and {t.marker.color for t in fig.data if t.name == "literal"} == {"#7f7f7f"}
    assert "this run: new (coevokg)" in fig.layout.title.subtitle.text
    assert "data/reference/" not in fig.layout.title.subtitle.text  # no reference panel: not named either


def test_answer_types_figure_of_a_run_without_counts_or_no_store_says_so(db):
    con = figures.open_store(db)
    for fig in (figures.answer_types(con, run="old"), figures.answer_types(None, ref=reference.load(NO_COUNTS))):
        assert [a.text for a in fig.layout.annotations] == ["no answer types recorded"] and not fig.data
    con.close()


def test_answer_types_figure_draws_a_reference_that_has_the_counts(db):
    fig = figures.answer_types(None, ref=reference.load())  # the default file's runs recorded them
    assert [a.text for a in fig.layout.annotations] == ["reference CoEvoKG, 6 seeds pooled"] and fig.data
    ref = reference.load(NO_COUNTS)
    rows = ref.metrics.copy()
    rows["answer_types_generated"] = [{"city": 1}] * len(rows)
    rows["answer_types_seed"] = [{"year": 1, "city": 1}] * len(rows)
    fig = figures.answer_types(None, ref=reference.Reference(ref.name, ref.preset, ref.provenance,
                                                               ref.evaluations, rows))
    assert [a.text for a in fig.layout.annotations] == ["reference CoEvoKG, 4 seeds pooled"]
    assert _bars(fig) == {"city": [1.0, 0.5], "year": [0.0, 0.5]}
    assert f"data/reference/{NO_COUNTS}" in fig.layout.title.subtitle.text


def test_a_group_without_slots_is_drawn_empty_and_named():
    m = pd.DataFrame([dict(run="a", round=0, answer_types_generated={}, answer_types_seed={"year": 4})])
    shares = figures.answer_type_shares(m)
    assert shares.to_dict("index") == {"generated": {"slots": 0, "year": 0.0}, "seed": {"slots": 4, "year": 1.0}}
    assert figures.answer_type_shares(m.drop(columns=["answer_types_generated", "answer_types_seed"])).empty


def test_build_all_saves_the_answer_types_figure_when_a_run_logged_them(db, tmp_path, monkeypatch):
    monkeypatch.setenv("BROWSER_PATH", "/nonexistent/chromium")
    monkeypatch.setattr(figures.base, "_png_works", None)
    names = {p.name for p in figures.build_all(db=db, out_dir=tmp_path / "figs")}
    assert "answer_types.html" in names
    assert "answer_types.html" not in {p.name for p in figures.build_all(paper_only=True, out_dir=tmp_path / "p")}
