"""Runs compared like a tracker (issue 43): run globs, groups, seed bands; a store of real rows."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pytest
from scipy import stats

from workbench import batch, cli, compare, figures, store

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
    monkeypatch.setattr(figures.base, "_png_works", None)


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
    view = figures.only_runs(db, ["sr-s0", "co-s1"])
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


# ------------------------------------------------------------------------------ batch summaries

METHODS_PROBE = Path(__file__).parent / "fixtures" / "batch_methods_probe.ipynb"  # records <method>_score


def _half(values):
    return stats.t.ppf(0.975, len(values) - 1) * np.std(values, ddof=1) / np.sqrt(len(values))


def test_a_2x2_batch_summary_is_per_method_means_over_seeds_with_intervals(tmp_path, no_browser):
    """Issue 43: 2 seeds x 2 methods gave a sparse wide table (NaN where a point ran no method), no mean."""
    grid = batch.parse_grid({"method": ["a", "b"], "seed": [0, 1]})
    batch.run_batch(METHODS_PROBE, grid, out_dir=tmp_path, progress=False)
    summary = pd.read_csv(tmp_path / "summary.csv")
    assert list(summary.columns) == ["method", "output", "seeds", "mean", "95% low", "95% high", "values"]
    score = summary[summary.output == "score"].set_index("method")
    assert score.seeds.tolist() == [2, 2] and score["mean"].tolist() == [11.0, 21.0]  # a: 10, 12; b: 20, 22
    assert score.loc["a", "95% high"] == pytest.approx(11.0 + _half([10.0, 12.0]))
    assert summary[summary.output == "rounds"]["mean"].tolist() == [3.0, 3.0]
    assert not summary[["mean", "95% low", "95% high"]].isna().any().any()
    assert "| method | output | seeds | mean |" in (tmp_path / "summary.md").read_text()
    points = pd.read_csv(tmp_path / "points.csv")  # every point side by side, as before
    assert len(points) == 4 and {"a_score", "b_score"} <= set(points.columns)


def test_summary_figure_has_no_empty_panel_and_names_each_group():
    long = pd.DataFrame(dict(method=["ssp", "ssp", "c1", "c1"] * 3, seed=[0, 1, 0, 1] * 3,
                             output=["val_em"] * 4 + ["test_em"] * 4 + ["secs"] * 4, value=np.arange(12.0)))
    fig = compare.over_seeds_figure(compare.over_seeds(long), long, "demo")
    used = {t.xaxis for t in fig.data}
    axes = {k.replace("axis", "") for k in fig.layout.to_plotly_json() if k.startswith("xaxis")}
    assert used == axes and len(axes) == 3  # three outputs, three panels: the odd one spans its row
    assert [t.name for t in fig.data if t.showlegend] == ["one seed", "ssp", "c1"]
    means = [t for t in fig.data if t.name != "one seed"]
    assert len(means) == 6 and all(t.error_y.visible for t in means)  # two seeds each: every mean has its interval


def test_points_long_splits_method_prefixed_outputs_of_a_methods_list():
    rs = [batch.PointResult("p", {"methods": ["ssp", "c1"], "seed": s, "preset": "smoke"}, "done", 1.0,
                            {"ssp_test_em": 50.0 + s, "c1_test_em": 60.0 + s, "note": "text"}) for s in (0, 1)]
    rs.append(batch.PointResult("q", {"methods": ["ssp", "c1"], "seed": 2, "preset": "smoke"}, "failed", 1.0, {}))
    table = compare.over_seeds(compare.points_long(rs))
    assert table[["method", "output", "seeds", "mean"]].values.tolist() == [["ssp", "test_em", 2, 50.5],
                                                                            ["c1", "test_em", 2, 60.5]]


def test_force_reruns_finished_points_deleting_only_what_the_batch_made(tmp_path, no_browser, monkeypatch):
    monkeypatch.setenv("WORKBENCH_DATA", str(tmp_path / "data"))
    (tmp_path / "data" / "cache").mkdir(parents=True)
    (tmp_path / "data" / "cache" / "keep.txt").write_text("shared")
    out = tmp_path / "out"
    grid = batch.parse_grid({"method": "a", "seed": [0, 1]})
    first = batch.run_batch(METHODS_PROBE, grid, out_dir=out, progress=False)
    (out / "mine.txt").write_text("not the batch's")
    assert [r.status for r in batch.run_batch(METHODS_PROBE, grid, out_dir=out, progress=False)] == ["skipped"] * 2
    again = batch.run_batch(METHODS_PROBE, grid, out_dir=out, progress=False, force=True, log=lambda *_: None)
    assert [r.status for r in again] == ["done", "done"]
    assert [r.notebook for r in again] == [r.notebook for r in first]
    assert (out / "mine.txt").exists() and (tmp_path / "data" / "cache" / "keep.txt").read_text() == "shared"
    # an executed notebook that is not this point's run is refused, and nothing is deleted
    label = batch.point_label(grid[0])
    (out / f"{label}.ipynb").write_bytes((out / f"{batch.point_label(grid[1])}.ipynb").read_bytes())
    with pytest.raises(ValueError, match=r"--force: .* is not this batch's run of point method=a,seed=0"):
        batch.run_batch(METHODS_PROBE, grid, out_dir=out, progress=False, force=True)
    assert (out / f"{label}.ipynb").exists() and (out / label).is_dir()


# ------------------------------------------------------------- on runs trained for real (slow)

@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A smoke store with Search-R1 and CoEvoKG trained two rounds at seeds 0 and 1, and one SSP run."""
    from workbench.method.train import train

    area = tmp_path_factory.mktemp("trained")
    mp = pytest.MonkeyPatch()
    mp.setenv("WORKBENCH_RUNS", str(area / "runs"))
    db = area / "smoke.duckdb"
    try:
        for run, method, seed in [("sr-s0", "search_r1", 0), ("sr-s1", "search_r1", 1), ("co-s0", "coevokg", 0),
                                  ("co-s1", "coevokg", 1), ("ssp-s0", "ssp", 0)]:
            train(str(db), run=run, method=method, preset="smoke", steps=2, seed=seed, progress=False, log=None)
    finally:
        mp.undo()
    return db


@pytest.mark.slow
def test_figures_on_trained_runs_draw_two_groups_with_seed_bands(trained, tmp_path, no_browser, capsys):
    out = tmp_path / "figs"
    assert cli.main(["figures", "--db", str(trained), "--out", str(out), "--run", "sr*", "--run", "co*",
                     "--group-by", "method"]) == 0
    con = figures.open_store(trained)
    runs = compare.select_runs(figures.store_runs(con), ["sr*", "co*"])
    metrics = figures.run_metrics(con)
    con.close()
    fig = compare.compare_figure(runs, metrics, "method")
    legend = [t for t in fig.data if t.showlegend]
    assert [t.name for t in legend] == ["Search-R1 (2 runs)", "CoEvoKG (2 runs)"]
    assert len({t.line.color for t in legend}) == 2
    val = metrics[metrics.run.isin(["co-s0", "co-s1"])].groupby("round").val_em.mean()
    mean = [t for t in fig.data if t.name == "CoEvoKG (2 runs)" and t.fill is None and t.xaxis == "x"][0]
    assert list(mean.y) == pytest.approx(val.tolist())
    assert [t.fill for t in fig.data if t.xaxis == "x"].count("toself") == 2  # a band per group
    figure3 = (out / "figure3_training_dynamics.html").read_text()
    assert "sr-s0" in figure3 and "ssp-s0" not in figure3  # the paper figures show the chosen runs alone


def test_a_short_band_draws_no_stray_markers_at_its_corners():
    """With fewer than 20 rounds plotly drew the band polygon's corners as markers in another colour."""
    band = pd.DataFrame(dict(round=[0, 1, 2], mean=[0.5, 0.6, 0.7], low=[0.4, 0.5, 0.6], high=[0.6, 0.7, 0.8]))
    fill, mean = figures.band_traces(band, "g", "#ff0000", "val_em", spread="95% t interval")
    assert fill.mode == "lines" and fill.line.width == 0
    assert "95% t interval" in mean.hovertemplate
