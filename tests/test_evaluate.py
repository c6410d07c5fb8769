"""Evaluation: sign test, bootstrap intervals, stored outcomes, Table 1, the CLI."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from workbench import store
from workbench.cli import main
from workbench.evaluate import (across_seeds, compare, eval_preset, evaluate, make_eval_id, model_preset, outcomes,
                                parse_eval_id, sign_test, table1)
from workbench.policy.rollout import load_questions
from workbench.scoring import bootstrap_ci, macro_bootstrap_ci, summarize


def test_sign_test_matches_the_binomial_formula_by_hand():
    # 7 questions only A solves, 2 only B, 5 both, 6 neither.
    a = {i: 1 for i in range(7)} | {i: 0 for i in range(7, 9)} | {i: 1 for i in range(9, 14)} | {i: 0 for i in range(14, 20)}
    b = {i: 0 for i in range(7)} | {i: 1 for i in range(7, 9)} | {i: 1 for i in range(9, 14)} | {i: 0 for i in range(14, 20)}
    t = sign_test(a, b)
    assert (t.a_only, t.b_only, t.both, t.neither) == (7, 2, 5, 6)
    # Two-sided exact: P(X <= 2) + P(X >= 7) for X ~ Bin(9, 1/2) = 2 * (1 + 9 + 36) / 512.
    assert t.p == pytest.approx(2 * (math.comb(9, 0) + math.comb(9, 1) + math.comb(9, 2)) / 2 ** 9)
    assert sign_test(b, a).p == pytest.approx(t.p)


def test_sign_test_uses_shared_questions_only_and_handles_no_discordance():
    t = sign_test({1: 1, 2: 0, 99: 1}, {1: 1, 2: 0, 50: 0})
    assert (t.a_only, t.b_only, t.both, t.neither, t.p) == (0, 0, 1, 1, 1.0)
    with pytest.raises(ValueError, match="share no question"):
        sign_test({1: 1}, {2: 1})


def test_bootstrap_contains_the_mean_and_is_deterministic_by_seed():
    values = np.random.default_rng(3).integers(0, 2, 200)
    mean, lo, hi = bootstrap_ci(values, seed=7)
    assert mean == pytest.approx(values.mean())
    assert lo < mean < hi and hi - lo < 0.2
    assert bootstrap_ci(values, seed=7) == (mean, lo, hi)
    assert bootstrap_ci(values, seed=8) != (mean, lo, hi)
    with pytest.raises(ValueError, match="at least one value"):
        bootstrap_ci([])


def test_macro_average_weighs_groups_equally():
    mean, lo, hi = macro_bootstrap_ci({"big": [1.0] * 90 + [0.0] * 10, "small": [0.0] * 10})
    assert mean == pytest.approx(0.45)
    assert lo <= mean <= hi
    s = summarize(pd.DataFrame({"family": ["a"] * 4 + ["b"] * 2, "em": [1, 1, 1, 1, 0, 0]}))
    assert s.set_index("group").loc["macro", "mean"] == pytest.approx(0.5)


def test_eval_ids_round_trip_and_reject_bad_labels():
    con = store.connect(":memory:")
    eid = make_eval_id(con, "tiny-smoke", "base", "tinyworld", "val")
    assert parse_eval_id(eid) == {"backbone": "tiny-smoke", "method": "base", "dataset": "tinyworld",
                                  "split": "val", "n": 0}
    with pytest.raises(ValueError, match="method"):
        make_eval_id(con, "tiny", "a/b", "tinyworld", "test")


def _store_with_questions(path):
    con = store.connect(path)
    con.execute("INSERT INTO entities VALUES (1, 'Kavimo', 'person', 'entity', 't'), "
                "(2, 'Dagiju', 'city', 'entity', 't'), (3, 'Velor', 'country', 'entity', 't')")
    con.execute("INSERT INTO passages VALUES (1, 1, 0, 'Kavimo was born in Dagiju.'), "
                "(2, 2, 0, 'Dagiju is a city in Velor.'), (3, 3, 0, 'Velor is a country.')")
    con.execute("INSERT INTO edges VALUES (1, 2, 'born in', 't'), (2, 3, 'located in', 't')")
    qs = [(1, "tinyworld", "test", "single_hop", "Where was Kavimo born?", ["Dagiju"], [1, 2], 1, "t"),
          (2, "tinyworld", "test", "two_hop", "In which country was Kavimo born?", ["Velor"], [1, 2, 3], 2, "t"),
          (3, "tinyworld", "test", "two_hop", "Which country holds Dagiju's twin?", ["Velor"], [2, 3], 2, "t"),
          (4, "other", "dev", None, "What is Velor?", ["a country"], [], 0, "t")]
    con.executemany("INSERT INTO questions VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", qs)
    return con


@pytest.fixture(scope="module")
def tiny_model_dir(tmp_path_factory):
    from workbench.config import preset
    from workbench.policy.model import Policy, tiny_model
    from workbench.policy.tokenizer import train_tokenizer

    tok = train_tokenizer(["Kavimo was born in Dagiju. Dagiju is a city in Velor."] * 20, vocab_size=330)
    out = tmp_path_factory.mktemp("model")
    Policy(tiny_model(preset("smoke").backbone, tok, seed=0), tok, device="cpu").save(out)
    (out / "workbench.json").write_text(json.dumps({"backbone": "tiny-smoke", "method": "base"}))
    return out


def test_load_questions_limits_per_family_and_names_unknown_datasets(tmp_path):
    con = _store_with_questions(str(tmp_path / "s.duckdb"))
    q = load_questions(con, "tinyworld", "test", limit=1)
    assert sorted(q.family) == ["single_hop", "two_hop"]
    assert load_questions(con, "other", "dev").family.tolist() == ["other"]
    with pytest.raises(ValueError, match="known dataset/split"):
        load_questions(con, "nq", "test")


def test_evaluate_stores_outcomes_and_table1(tmp_path, tiny_model_dir, capsys):
    db = str(tmp_path / "s.duckdb")
    _store_with_questions(db).close()
    eid = evaluate(db, tiny_model_dir, "tinyworld", "test", preset="smoke")
    assert eid == "tiny-smoke/base/tinyworld/test#0"
    assert "macro" in capsys.readouterr().out
    con = store.connect(db)
    df = outcomes(con, eid)
    assert len(df) == 3 and set(df.columns) >= {"em", "f1", "cover_em", "prediction", "turns"}
    assert df.turns.between(1, 4).all()  # smoke preset: at most 4 turns
    # A second, labelled run: a fake-free way to get two rows is to relabel the same model.
    eid2 = evaluate(con, tiny_model_dir, "tinyworld", "test", preset="smoke", method="coevokg", log=None)
    assert eid2 == "tiny-smoke/coevokg/tinyworld/test#0"
    c = compare(con, eid, eid2)  # greedy decoding: the same model gives the same answers
    assert c.test.a_only == c.test.b_only == 0 and c.test.p == 1.0
    assert (c.gain, c.low, c.high) == (0.0, 0.0, 0.0)
    table, md = table1(con)
    assert list(table.index) == [("tiny-smoke", "base"), ("tiny-smoke", "coevokg")]
    assert list(table.columns) == ["single_hop", "two_hop", "Avg."]
    assert "| tiny-smoke | coevokg |" in md and "(+0.0)" in md
    n = con.execute("SELECT count(*) FROM eval_outcomes").fetchone()[0]
    with pytest.raises(ValueError):
        evaluate(con, tiny_model_dir, "nq", "test", preset="smoke", log=None)
    assert con.execute("SELECT count(*) FROM eval_outcomes").fetchone()[0] == n


def test_cli_eval_compare_report(tmp_path, tiny_model_dir, capsys):
    db = str(tmp_path / "s.duckdb")
    _store_with_questions(db).close()
    assert main(["eval", "--db", db, "--model", str(tiny_model_dir), "--dataset", "tinyworld",
                 "--preset", "smoke", "--limit", "1"]) == 0
    assert main(["eval", "--db", db, "--model", str(tiny_model_dir), "--dataset", "tinyworld",
                 "--preset", "smoke", "--limit", "1", "--method", "search-r1"]) == 0
    capsys.readouterr()
    assert main(["compare", "--db", db, "tiny-smoke/base/tinyworld/test#0",
                 "tiny-smoke/search-r1/tinyworld/test#0"]) == 0
    shown = capsys.readouterr().out
    assert "sign test p = 1" in shown and "B - A macro EM: +0.0 points, 95% paired bootstrap [+0.0, +0.0]" in shown
    assert main(["report", "--db", db]) == 0
    assert "| tiny-smoke | search-r1 |" in capsys.readouterr().out
    assert main(["compare", "--db", db, "nope", "tiny-smoke/base/tinyworld/test#0"]) == 2
    assert "no evaluation 'nope'" in capsys.readouterr().err


def test_compare_gain_is_the_macro_mean_of_per_family_differences(tmp_path):
    con = _store_with_questions(str(tmp_path / "g.duckdb"))
    rows = [("a", 1, 0.0), ("a", 2, 0.0), ("a", 3, 1.0), ("b", 1, 1.0), ("b", 2, 1.0), ("b", 3, 1.0)]
    con.executemany("INSERT INTO eval_outcomes (eval_id, dataset, question_id, em) VALUES (?, 'tinyworld', ?, ?)",
                    rows)
    # single_hop: +1 (q1); two_hop: q2 +1, q3 0 -> +0.5; macro +0.75. Resampling two_hop's pair gives 0.5-1.
    c = compare(con, "a", "b")
    assert c.gain == pytest.approx(0.75) and c.low == pytest.approx(0.5) and c.high == pytest.approx(1.0)
    assert (c.test.a_only, c.test.b_only, c.test.both) == (0, 2, 1)
    with pytest.raises(ValueError, match="no evaluation"):
        compare(con, "a", "missing")


def test_across_seeds_by_hand():
    t = across_seeds({"a": [60.0, 62.0, 61.0], "b": [59.0, 60.0, 58.0], "c": [61.0]}, reference="a")
    # b: mean 59, sd 1; 95% t interval 59 -/+ t(0.975, 2) 4.3027 / sqrt(3) = 2.4841
    assert t.loc["b", "low"] == pytest.approx(59 - 2.4841, abs=1e-3)
    # Welch: t = (59 - 61) / sqrt(1/3 + 1/3) = -2.449, df = 4 -> two-sided p = 0.0704
    assert t.loc["b", "diff"] == -2.0 and t.loc["b", "p"] == pytest.approx(0.0704, abs=1e-3)
    assert np.isnan(t.loc["a", "p"]) and np.isnan(t.loc["c", "p"]) and np.isnan(t.loc["c", "sd"])
    with pytest.raises(ValueError, match="reference 'z'"):
        across_seeds({"a": [1.0]}, reference="z")


# ---------------------------------------------------------------- the preset an evaluation uses (issue 13)

def _relabelled(src, dst, **info):
    """A copy of the model directory ``src`` whose workbench.json holds ``info``."""
    import shutil

    shutil.copytree(src, dst)
    (dst / "workbench.json").write_text(json.dumps(info))
    return dst


def test_evaluate_takes_the_models_preset_and_refuses_another(tmp_path, tiny_model_dir):
    db = str(tmp_path / "s.duckdb")
    _store_with_questions(db).close()
    smoke = _relabelled(tiny_model_dir, tmp_path / "smoke-base", backbone="tiny-smoke", method="base",
                        params={"preset": "smoke"})
    with pytest.raises(ValueError, match="made at preset 'smoke'"):
        evaluate(db, smoke, "tinyworld", "test", limit=1, preset="tiny", log=None)
    con = store.connect(db)
    assert con.execute("SELECT count(*) FROM eval_outcomes").fetchone()[0] == 0  # refused before anything ran
    eid = evaluate(con, smoke, "tinyworld", "test", limit=1, log=None)  # no preset: the model's
    assert eval_preset(eid) == "smoke" and outcomes(con, eid).turns.max() <= 4  # smoke's 4 turns, not tiny's


def test_a_trained_models_preset_comes_from_its_run(tmp_path, tiny_model_dir):
    con = store.connect(tmp_path / "s.duckdb")
    con.execute("INSERT INTO runs (run, method, preset) VALUES ('r1', 'coevokg', 'smoke')")
    best = _relabelled(tiny_model_dir, tmp_path / "best", backbone="tiny-smoke", method="coevokg", run="r1",
                       base="/gone")
    assert model_preset(best, con) == "smoke" and model_preset(best) is None
    base = _relabelled(tiny_model_dir, tmp_path / "base", backbone="tiny-tiny", params={"preset": "tiny"})
    best2 = _relabelled(tiny_model_dir, tmp_path / "best2", backbone="tiny-tiny", run="elsewhere", base=str(base))
    assert model_preset(best2, con) == "tiny"  # through its base


def test_the_eval_label_says_its_preset(tmp_path, tiny_model_dir):
    db = str(tmp_path / "s.duckdb")
    _store_with_questions(db).close()
    plain = _relabelled(tiny_model_dir, tmp_path / "plain", backbone="mymodel", method="base")
    assert evaluate(db, plain, "tinyworld", "test", limit=1, preset="smoke", log=None) == \
        "mymodel-smoke/base/tinyworld/test#0"
    assert evaluate(db, plain, "tinyworld", "test", limit=1, preset="smoke", backbone="tiny", log=None) == \
        "tiny-smoke/base/tinyworld/test#0"  # the notebooks' label and the CLI's agree


def test_compare_refuses_evaluations_of_two_presets(tmp_path, capsys):
    con = _store_with_questions(str(tmp_path / "p.duckdb"))
    for eid in ("tiny-smoke/base/tinyworld/test#0", "tiny-tiny/base/tinyworld/test#0", "x/base/tinyworld/test#0"):
        con.executemany("INSERT INTO eval_outcomes (eval_id, dataset, question_id, em) VALUES (?, 'tinyworld', ?, 1)",
                        [(eid, q) for q in (1, 2, 3)])
    with pytest.raises(ValueError, match="preset 'smoke'.*'tiny'"):
        compare(con, "tiny-smoke/base/tinyworld/test#0", "tiny-tiny/base/tinyworld/test#0")
    assert compare(con, "x/base/tinyworld/test#0", "tiny-tiny/base/tinyworld/test#0").shared == 3  # unknown: allowed
    con.close()
    assert main(["compare", "--db", str(tmp_path / "p.duckdb"), "tiny-smoke/base/tinyworld/test#0",
                 "tiny-tiny/base/tinyworld/test#0"]) == 2
    assert "compare evaluations of one preset" in capsys.readouterr().err


def test_compare_says_when_it_pairs_only_part_of_the_questions(tmp_path, capsys):
    con = _store_with_questions(str(tmp_path / "q.duckdb"))
    con.executemany("INSERT INTO eval_outcomes (eval_id, dataset, question_id, em) VALUES (?, 'tinyworld', ?, 1)",
                    [("a", 1), ("a", 2), ("a", 3), ("b", 1)])
    con.close()
    assert main(["compare", "--db", str(tmp_path / "q.duckdb"), "a", "b"]) == 0
    assert "paired on the 1 questions both answered (A answered 3, B 1)" in capsys.readouterr().out


def test_eval_help_shows_the_preset_default(capsys):
    with pytest.raises(SystemExit):
        main(["eval", "--help"])
    assert "default: the model's own preset" in " ".join(capsys.readouterr().out.split())
