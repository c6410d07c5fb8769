"""``workbench eval --suite table1`` at smoke size, its comparison with the base worked by hand, the
Table 1 reference file (scripts/reference_file.py's suite section, ``Reference.table1``) and the
figures' tiny-tier tables (issue 42)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from workbench import figures, reference, store
from workbench.cli import main
from workbench.evaluate import sign_test_p
from workbench.kg.benchmarks import SUITE, ensure_suite, size_of
from workbench.kg.tinyworld import build_world
from workbench.table1_suite import pooled_sign_test, report

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def smoke_model(tmp_path_factory):
    """A random-weight smoke model (it answers nothing right: every EM is 0)."""
    from workbench.config import preset
    from workbench.policy.model import Policy, tiny_model
    from workbench.policy.tokenizer import train_tokenizer

    tok = train_tokenizer(["Kavimo was born in Dagiju. Dagiju is a city in Velor."] * 20, vocab_size=330)
    out = tmp_path_factory.mktemp("model")
    Policy(tiny_model(preset("smoke").backbone, tok, seed=0), tok, device="cpu").save(out)
    (out / "workbench.json").write_text(json.dumps({"backbone": "tiny-smoke", "method": "base"}))
    return out


def test_cli_suite_at_smoke_size(tmp_path, smoke_model, capsys):
    db = str(tmp_path / "s.duckdb")
    con = store.connect(db)
    build_world(con, preset="smoke", seed=0)
    con.close()
    out = tmp_path / "base.json"
    assert main(["eval", "--db", db, "--model", str(smoke_model), "--suite", "table1", "--preset", "smoke",
                 "--limit", "1", "--json", str(out)]) == 0
    shown = capsys.readouterr().out
    header = next(line for line in shown.splitlines() if "tw-nq" in line and "Avg." in line)
    assert header.split() == [*SUITE, "Avg."]  # the paper's column order
    assert "tw-pop by popularity" in shown and "  macro        n=13 " in shown  # 1 + 1 + 4 + 2 + 4 + 1
    res = json.loads(out.read_text())
    assert set(res["outcomes"]) == set(SUITE) and res["vs_base"] is None
    assert sum(len(o["em"]) for o in res["outcomes"].values()) == 13
    con = store.connect(db, read_only=True)
    sizes = dict(con.execute("SELECT dataset, count(*) FROM questions WHERE dataset LIKE 'tw-%' GROUP BY 1").fetchall())
    con.close()
    assert sizes == {name: size_of(name, 40) for name in SUITE}  # the smoke preset's suite_questions


def test_a_models_row_against_the_stores_base_by_hand(tmp_path):
    """Base all wrong; the trained model right on three questions (two of tw-nq, one of tw-pop): the
    gains, the macro gain and the pooled sign test follow by hand."""
    con = store.connect(str(tmp_path / "s.duckdb"))
    build_world(con, preset="smoke", seed=0)
    ensure_suite(con, n=8)
    ids = {name: [q for (q,) in con.execute("SELECT question_id FROM questions WHERE dataset = ? ORDER BY 1",
                                            [name]).fetchall()] for name in SUITE}
    right = set(ids["tw-nq"][:2] + ids["tw-pop"][:1])
    for method in ("base", "trained"):
        for name in SUITE:
            con.executemany("INSERT INTO eval_outcomes (eval_id, model, dataset, question_id, em) VALUES (?, 'm', ?, ?, ?)",
                            [(f"tiny-smoke/{method}/{name}/test#0", name, q, float(method == "trained" and q in right))
                             for q in ids[name]])
    eval_ids = {name: f"tiny-smoke/trained/{name}/test#0" for name in SUITE}
    res, text, base = report(con, eval_ids, "m", "tiny-smoke", "trained")
    assert base["macro"]["em"] == 0.0
    assert res["benchmarks"]["tw-nq"]["em"] == 25.0 and res["benchmarks"]["tw-pop"]["em"] == 12.5  # 2/8, 1/8
    assert res["macro"]["em"] == pytest.approx((25.0 + 12.5) / 6)
    v = res["vs_base"]
    assert v["gains"]["tw-nq"] == 25.0 and v["gains"]["tw-2wiki"] == 0.0
    assert v["macro_gain"] == pytest.approx((25.0 + 12.5) / 6)
    assert (v["base_only"], v["model_only"], v["pairs"]) == (0, 3, 5 * 8 + 2)
    assert v["p"] == sign_test_p(0, 3) == 0.25
    assert res["buckets"]["inlinks 0-1"]["em"] == 50.0  # tw-pop's first question is in the tail bucket
    trained_row = next(line for line in text.splitlines() if line.startswith("trained"))
    assert "25.0 (+25.0)" in trained_row and "(+6.2)" in trained_row
    assert "pooled sign test over 42 questions: base only 0, model only 3, p = 0.25" in text


def test_suite_flags_are_checked(tmp_path, capsys):
    db = tmp_path / "s.duckdb"
    store.connect(str(db)).close()
    assert main(["eval", "--db", str(db), "--model", "m", "--dataset", "tinyworld", "--json", "x.json"]) == 2
    assert "--json and --reference go with --suite" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["eval", "--db", str(db), "--model", "m", "--dataset", "tinyworld", "--suite", "table1"])
    assert main(["eval", "--db", str(db), "--model", "m", "--suite", "table1", "--split", "val"]) == 2
    assert "test split only" in capsys.readouterr().err


def test_pooled_sign_test_counts_each_question_and_seed_once():
    assert pooled_sign_test([("1100", "1111"), ("10", "01")]) == (1, 3, sign_test_p(1, 3))
    with pytest.raises(ValueError, match="different lengths"):
        pooled_sign_test([("1", "10")])


# ------------------------------------------------------------------------------- the reference file

def suite_json(ids: dict[str, list[int]], em: dict[str, str]) -> dict:
    """What ``workbench eval --suite table1 --json`` writes, for given outcome strings."""
    bench = {b: {"n": len(s), "em": 100 * s.count("1") / len(s), "low": 0.0, "high": 100.0} for b, s in em.items()}
    macro = sum(v["em"] for v in bench.values()) / len(bench)
    return {"benchmarks": bench, "macro": {"n": 0, "em": macro, "low": 0.0, "high": 100.0},
            "buckets": {"inlinks 0-1": {"n": 1, "em": 100.0 * int(em["tw-pop"][0]), "low": 0, "high": 100}},
            "outcomes": {b: {"question_ids": ids[b], "em": s} for b, s in em.items()}}


def out_folder(folder: Path, runs: dict[str, dict[str, str]], base: dict[str, str]) -> Path:
    """An rl_compare.sh OUT folder of a DATASET=table1 call (two questions a benchmark)."""
    folder.mkdir()
    ids = {b: [10 * i, 10 * i + 1] for i, b in enumerate(SUITE)}
    macro = {name: suite_json(ids, em)["macro"]["em"] for name, em in {**runs, "base": base}.items()}
    (folder / "eval_base.txt").write_text(f"suite table1\n  macro        n=12    EM {macro['base']:5.1f}  [ 0.0, 100.0]\n")
    (folder / "summary.txt").write_text("".join(
        f"== {n} x:\n  macro        n=12    EM {macro[n]:5.1f}  [ 0.0, 100.0]\n" for n in runs) + "".join(
        f"{n} (B) vs base (A): B - A macro EM {macro[n] - macro['base']:+.1f} points [-1.0, +1.0]; "
        f"sign test: A only 0, B only 1, p = 1\n" for n in runs))
    (folder / "metrics.json").write_text(json.dumps({n: [{"round": 0, "val_em": 0.5}] for n in runs}))
    for name, em in {**runs, "base": base}.items():
        (folder / f"suite_{name}.json").write_text(json.dumps(suite_json(ids, em)))
    return folder


def _all(value: str) -> dict[str, str]:
    return {b: value for b in SUITE}


def test_reference_file_records_the_suite_and_table1_reads_it(tmp_path):
    base = _all("00")
    runs = {"co0": {**_all("10"), "tw-bamboogle": "11"}, "co1": _all("10"), "sr0": _all("00"), "sr1": _all("01")}
    folder = out_folder(tmp_path / "a", runs, base)
    out = tmp_path / "tiny_table1_1rounds.json"
    done = subprocess.run([sys.executable, "scripts/reference_file.py", str(out), str(folder), "--rename",
                           "co=coevokg", "sr=search_r1", "--provenance", "commit=abc1234", "date=2026-12-04"],
                          cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    raw = json.loads(out.read_text())
    assert raw["suite"]["benchmarks"] == list(SUITE)
    assert raw["suite"]["runs"]["coevokg_s0"]["outcomes"]["tw-bamboogle"] == "11"
    ref = reference.load(str(out))
    table = ref.table1().set_index("method")
    assert table.loc["Base", "Avg."] == 0.0
    assert table.loc["CoEvoKG", "tw-nq"] == 50.0 and table.loc["CoEvoKG", "tw-bamboogle"] == 75.0
    assert table.loc["CoEvoKG", "Avg."] == pytest.approx((50 * 5 + 100) / 6 / 2 + 50 / 2)
    # CoEvoKG vs base: 7 + 6 questions right that the base got wrong, none the other way
    assert table.loc["CoEvoKG", "p vs base"] == sign_test_p(0, 13)
    # CoEvoKG vs Search-R1 paired seed by seed: seed 0 7-0, seed 1 (10 vs 01) 6-6
    assert table.loc["CoEvoKG", "p vs Search-R1"] == sign_test_p(6, 13)
    assert table.loc["Search-R1", "gain (Avg.)"] == pytest.approx(25.0)
    shown = figures.table1_suite_reference(ref)
    assert shown.backbone.unique().tolist() == ["tiny"] and list(shown.columns[:3]) == ["backbone", "method", "seeds"]
    _, fig = figures.table1(None, None, ref)
    assert any("Table 1 at the tiny tier" in (a.text or "") for a in fig.layout.annotations)


def test_reference_file_refuses_suite_evaluations_that_do_not_pair(tmp_path):
    a = out_folder(tmp_path / "a", {"co0": _all("10")}, _all("00"))
    b = out_folder(tmp_path / "b", {"co1": _all("10")}, _all("01"))  # another base outcome
    done = subprocess.run([sys.executable, "scripts/reference_file.py", str(tmp_path / "x.json"), str(a), str(b),
                           "--rename", "co=coevokg"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode != 0 and "differs from the other folders" in done.stderr
    (a / "suite_co0.json").unlink()
    done = subprocess.run([sys.executable, "scripts/reference_file.py", str(tmp_path / "x.json"), str(a),
                           "--rename", "co=coevokg"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode != 0 and "has no suite_co0.json" in done.stderr


def test_a_reference_without_the_suite_is_refused_where_table1_needs_it():
    with pytest.raises(ValueError, match="not a Table 1 reference file"):
        reference.load_table1(reference.DEFAULT)
    with pytest.raises(ValueError, match="no Table 1 suite"):
        reference.load().table1()


def test_figures_show_the_stores_suite_evaluations_apart(tmp_path):
    con = store.connect(str(tmp_path / "s.duckdb"))
    build_world(con, preset="smoke", seed=0)
    ensure_suite(con, n=8)
    for method, value in (("base", 0.0), ("trained", 1.0)):
        for name in SUITE:
            con.execute("INSERT INTO eval_outcomes (eval_id, dataset, question_id, em) SELECT ?, ?, question_id, ? "
                        "FROM questions WHERE dataset = ?", [f"tiny-smoke/{method}/{name}/test#0", name, value, name])
    run = figures.table1_suite_run(con).set_index("method")
    assert list(run.columns) == ["backbone", *SUITE, "Avg.", "gain (Avg.)"]
    assert run.loc["trained", "gain (Avg.)"] == 100.0
    assert figures.table1_run(con).empty  # the suite's benchmarks are not split into families elsewhere
    scores = figures.eval_scores(con)
    assert set(scores.benchmark) == set(SUITE) and isinstance(scores, pd.DataFrame)


@pytest.mark.slow
def test_the_reference_recipe_end_to_end_at_smoke_size(tmp_path):
    """rl_compare.sh with DATASET=table1 (two methods x two seeds, one round, the first question of each
    family), then scripts/reference_file.py, then the file read back: the lead's GPU recipe, small."""
    import os

    env = {k: v for k, v in os.environ.items() if k not in ("OUT", "GPUS", "CUDA_VISIBLE_DEVICES", "RESUME")}
    env.update(SCRATCH=str(tmp_path / "s"), OUT=str(tmp_path / "out"), PY=sys.executable, DATASET="table1",
               EVAL_BATCH="16", OMP_NUM_THREADS="1")
    specs = [f"{m}_s{s}:{m}:method.seed={s}" for s in (0, 1) for m in ("coevokg", "search_r1")]
    done = subprocess.run(["bash", "scripts/rl_compare.sh", "smoke", "1", "1", "900", *specs], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stderr[-2000:]
    out = tmp_path / "out"
    assert sorted(p.name for p in out.glob("suite_*.json")) == sorted(
        ["suite_base.json", *[f"suite_{s.split(':')[0]}.json" for s in specs]])
    ref_file = tmp_path / "smoke_table1_1rounds.json"
    made = subprocess.run([sys.executable, "scripts/reference_file.py", str(ref_file), str(out), "--rename",
                           "coevokg_s=coevokg", "search_r1_s=search_r1", "--provenance", "commit=abc1234"],
                          cwd=ROOT, capture_output=True, text=True)
    assert made.returncode == 0, made.stderr
    table = reference.load(str(ref_file)).table1().set_index("method")
    assert list(table.index) == ["Base", "Search-R1", "CoEvoKG"] and table.loc["CoEvoKG", "seeds"] == 2
    assert "eval_batch=16" in (tmp_path / "s" / "logs" / "call.txt").read_text()
