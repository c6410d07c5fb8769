"""Runs compared like a tracker (issue 43): run globs, groups, seed bands; a store of real rows."""

from __future__ import annotations

import json

import duckdb
import numpy as np
import pandas as pd
import pytest
from scipy import stats

from workbench import cli, compare, figures, store

# (run, method, seed): two methods x two seeds, and one more run no glob below picks
RUNS = [("sr-s0", "search_r1", 0), ("sr-s1", "search_r1", 1), ("co-s0", "coevokg", 0), ("co-s1", "coevokg", 1),
        ("other", "ssp", 0)]


def _val_em(method: str, seed: int, rnd: int) -> float:
    return (0.5 if method == "coevokg" else 0.3) + 0.05 * rnd + 0.02 * seed


@pytest.fixture()
def db(tmp_path):
    path = tmp_path / "runs.duckdb"
    con = store.connect(path)
    for run, method, seed in RUNS:
        con.execute("INSERT INTO runs (run, method, preset, seed, config, config_hash, steps, status) "
                    "VALUES (?, ?, 'smoke', ?, '{}', 'h', 3, 'done')", [run, method, seed])
        for rnd in range(3):
            m = dict(round=rnd, val_em=_val_em(method, seed, rnd), kl=0.01 * rnd, seed_fallback_rate=0.5)
            con.execute("INSERT INTO run_metrics VALUES (?, ?, ?)", [run, rnd, json.dumps(m)])
    con.close()
    return path


@pytest.fixture()
def no_browser(monkeypatch):
    monkeypatch.setenv("BROWSER_PATH", "/nonexistent/chromium")
    monkeypatch.setattr(figures, "_png_works", None)


def test_globs_pick_runs_and_a_glob_matching_nothing_names_the_runs_there_are():
    runs = pd.DataFrame(dict(run=[r for r, _, _ in RUNS]))
    assert compare.select_runs(runs, ["sr*", "co-s[1]"]).run.tolist() == ["sr-s0", "sr-s1", "co-s1"]
    assert compare.select_runs(runs, ["sr*", "sr-s0"]).run.tolist() == ["sr-s0", "sr-s1"]  # no run twice
    with pytest.raises(ValueError, match=r"--run 'SR\*' matches no run in the store; its runs: sr-s0, sr-s1, co-s0"):
        compare.select_runs(runs, ["SR*"])  # case-sensitive, as run names are


def test_seed_band_is_the_mean_and_95_t_interval_over_runs():
    m = pd.DataFrame(dict(run=["a", "b", "c"], round=[0, 0, 0], val_em=[0.1, 0.2, 0.6]))
    band = compare.seed_band(m, "val_em").iloc[0]
    half = stats.t.ppf(0.975, 2) * np.std([0.1, 0.2, 0.6], ddof=1) / np.sqrt(3)
    assert band["mean"] == pytest.approx(0.3) and band.n == 3
    assert (band.low, band.high) == (pytest.approx(0.3 - half), pytest.approx(0.3 + half))
    one = compare.seed_band(m.iloc[:1], "val_em").iloc[0]
    assert one.low == one.high == one["mean"] == pytest.approx(0.1)  # one run: no band


def test_cli_draws_two_groups_with_seed_bands_and_distinct_colours(db, tmp_path, no_browser, capsys):
    out = tmp_path / "figs"
    code = cli.main(["figures", "--db", str(db), "--out", str(out), "--run", "sr*", "--run", "co*",
                     "--group-by", "method"])
    assert code == 0, capsys.readouterr().err
    html = (out / "compare_runs.html").read_text()
    assert "Search-R1 (2 runs)" in html and "CoEvoKG (2 runs)" in html
    con = figures.open_store(db)
    runs = compare.select_runs(figures.store_runs(con), ["sr*", "co*"])
    fig = compare.compare_figure(runs, figures.run_metrics(con), "method")
    con.close()
    legend = [t for t in fig.data if t.showlegend]
    assert [t.name for t in legend] == ["Search-R1 (2 runs)", "CoEvoKG (2 runs)"]
    assert len({t.line.color for t in legend}) == 2
    bands = [t for t in fig.data if t.fill == "toself" and t.xaxis == "x"]  # the validation EM panel
    assert len(bands) == 2
    mean = [t for t in fig.data if t.name == "CoEvoKG (2 runs)" and t.fill is None and t.xaxis == "x"][0]
    assert list(mean.y) == pytest.approx([np.mean([_val_em("coevokg", s, r) for s in (0, 1)]) for r in range(3)])
    assert "other" not in html and "sr-s0, sr-s1" in html  # the subtitle names each group's runs


def test_the_other_figures_show_the_chosen_runs_alone(db, tmp_path, no_browser):
    view = compare.only_runs(db, ["sr-s0", "co-s1"])
    try:
        assert figures.store_runs(view).run.tolist() == ["sr-s0", "co-s1"]
        assert sorted(set(figures.run_metrics(view).run)) == ["co-s1", "sr-s0"]
        assert "this run: other" not in figures.describe_runs(figures.store_runs(view))
    finally:
        view.close()
    duckdb.connect(str(db)).close()  # the view let go of the store: a writer can open it


def test_cli_run_glob_matching_nothing_is_a_one_line_error(db, tmp_path, capsys):
    assert cli.main(["figures", "--db", str(db), "--out", str(tmp_path), "--run", "zz*"]) == 2
    err = capsys.readouterr().err
    assert "--run 'zz*' matches no run" in err and "sr-s0" in err and "Traceback" not in err


def test_group_by_seed_and_none():
    runs = pd.DataFrame(dict(run=["a", "b"], method=["ssp", "c1"], seed=[0, 0]))
    assert compare.group_runs(runs, "seed").tolist() == ["seed 0", "seed 0"]
    assert compare.group_runs(runs, "none").tolist() == ["a", "b"]
    with pytest.raises(ValueError, match="--group-by 'x'"):
        compare.group_runs(runs, "x")
