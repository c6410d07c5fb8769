"""Seed 002's train-test overlap check (Table 14; issue 40): the similar-pair and exact-question rules,
and ``workbench audit overlap`` over a run's generated questions and the seed pool."""

import doctest

import pytest

from workbench import store
from workbench.cli import main
from workbench.kg.tinyworld import build_world
from workbench.method import overlap as O


def test_doctests():
    assert doctest.testmod(O).failed == 0


def test_similar_needs_both_the_jaccard_and_a_shared_alias():
    train = [("Who directed the film Rutel in Dagiju?", ["Kavimo Rutel", "Kavimo"])]
    # 3 of 5 words shared: Jaccard exactly 0.6 counts ("at least 0.6"); normalisation drops "the" and "?"
    assert O.jaccard(O.words("w1 w2 w3 w4"), O.words("w1 w2 w3 w5")) == pytest.approx(0.6)
    assert O.overlap([("w1 w2 w3 w4?", ["x"])], [("w1 w2 w3 w5?", ["X"])])["similar_pairs"] == 1
    assert O.overlap([("w1 w2 w3 w4 w6?", ["x"])], [("w1 w2 w3 w5?", ["x"])])["similar_pairs"] == 0  # 3/6
    same_q_other_answer = [("Who directed the film Rutel in Dagiju?", ["Betomi"])]
    assert O.overlap(train, same_q_other_answer) == {"similar_pairs": 0, "exact_questions": 1, "eval_questions": 1}
    alias = [("Who directed film Rutel in Dagiju?", ["kavimo"])]  # one alias in common, case and article aside
    assert O.overlap(train, alias) == {"similar_pairs": 1, "exact_questions": 1, "eval_questions": 1}
    # an evaluation question matched by several training pairs counts once
    assert O.overlap(train * 3, alias)["similar_pairs"] == 1
    assert O.overlap([], alias) == {"similar_pairs": 0, "exact_questions": 0, "eval_questions": 1}


def test_table_and_cli_over_a_run_and_the_seed_pool(tmp_path, capsys):
    db = str(tmp_path / "s.duckdb")
    con = store.connect(db)
    build_world(con, preset="smoke", seed=0)
    test = O.split_questions(con, "tinyworld", "test")
    # a run whose two generated questions copy one test question and paraphrase another
    (q0, a0), (q1, a1) = test[0], test[1]
    con.execute("INSERT INTO questions VALUES (900001, 'generated', 'r', NULL, ?, ?, NULL, 2, NULL), "
                "(900002, 'generated', 'r', NULL, ?, ?, NULL, 2, NULL)", [q0, a0, q1 + " exactly", a1])
    con.execute("INSERT INTO generated_questions VALUES (900001, 'r', 0, 1), (900002, 'r', 0, 1)")
    table = O.overlap_table({"r": O.run_questions(con, "r"), "seed pool": O.split_questions(con, "tinyworld", "seed")},
                            test).set_index("training_source")
    assert table.loc["r", "exact_questions"] == 1 and table.loc["r", "similar_pairs"] >= 1
    assert table.loc["r", "exact_pct"] == pytest.approx(100 / len(test))
    with pytest.raises(ValueError, match="no generated questions"):
        O.run_questions(con, "nope")
    con.close()
    assert main(["audit", "overlap", "--db", db, "--run", "r", "--seed-pool"]) == 0
    out = capsys.readouterr().out
    assert "seed pool" in out and "similar_pct" in out
    assert main(["audit", "overlap", "--db", db]) == 2
    assert "name a training source" in capsys.readouterr().err
