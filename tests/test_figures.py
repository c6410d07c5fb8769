"""Paper tables and figures from the transcribed numbers and from a real (temporary) DuckDB store."""

from __future__ import annotations

import json
import re
import sys

import duckdb
import numpy as np
import pandas as pd
import plotly.graph_objects as go
import pytest

from workbench import cli, figures, reference, store
from workbench.evaluate import across_seeds, sign_test_p

RUNS = [("r_ssp", "ssp"), ("r_coevo", "coevokg")]


@pytest.fixture()
def no_browser(monkeypatch):
    """A real kaleido failure (no browser at BROWSER_PATH), so the HTML-only path runs fast."""
    monkeypatch.setenv("BROWSER_PATH", "/nonexistent/chromium")
    monkeypatch.setattr(figures.base, "_png_works", None)


@pytest.fixture()
def db(tmp_path):
    """A store with two runs, three rounds of metrics each, and evaluations of base + both runs."""
    path = tmp_path / "runs.duckdb"
    con = store.connect(path)
    for i, (run, method) in enumerate(RUNS):
        con.execute("INSERT INTO runs (run, method, preset, seed, config, config_hash, steps, status) "
                    "VALUES (?, ?, 'tiny', 7, '{}', ?, 3, 'done')", [run, method, f"hash{i}"])
        for rnd in range(3):
            m = dict(round=rnd, val_em=0.1 * rnd + i, solver_reward=0.5, proposer_reward=0.2, admitted_rate=0.6,
                     seed_fallback_rate=0.4 - 0.05 * rnd, pool_chains=100 + 10 * rnd, pool_evidence=300,
                     kl=0.01 * rnd, entropy=1.0, avg_hops_generated=2.0 + rnd, avg_hops_seed=1.5,
                     p_s_generated=0.4, p_s_seed=0.5, passed_rate=0.75, rejections={"leak": 1, "weak": 3})
            con.execute("INSERT INTO run_metrics VALUES (?, ?, ?)", [run, rnd, json.dumps(m)])
    # 10 questions, two families. base: 2 right; r_ssp: 1-5 right; r_coevo: 0, 5-9 right.
    for q in range(10):
        con.execute("INSERT INTO questions (question_id, dataset, split, family, question, answers) "
                    "VALUES (?, 'tinyworld', 'test', ?, 'q?', ['a'])", [q, "bridge" if q < 5 else "compare"])
    # Eval ids as workbench.evaluate writes them: "<backbone>/<method>/<dataset>/<split>#<n>".
    right = {"base": {0, 1}, "ssp": {1, 2, 3, 4, 5}, "coevokg": {0, 5, 6, 7, 8, 9}}
    for method, ok in right.items():
        for q in range(10):
            con.execute("INSERT INTO eval_outcomes (eval_id, model, dataset, question_id, prediction, em) "
                        "VALUES (?, 'some/path', 'tinyworld', ?, 'x', ?)",
                        [f"tiny/{method}/tinyworld/test#1", q, float(q in ok)])
    # An older evaluation of coevokg (all wrong) must be ignored: only the latest counts.
    con.execute("INSERT INTO eval_outcomes (eval_id, model, dataset, question_id, prediction, em, created_at) "
                "SELECT 'tiny/coevokg/tinyworld/test#0', 'p', 'tinyworld', question_id, 'x', 0.0, "
                "TIMESTAMP '2000-01-01' FROM questions")
    con.close()
    return path


def test_tables_from_the_store_follow_the_paper_layout(db):
    con = figures.open_store(db)
    (t1, _), (t2, _) = figures.table1(con), figures.table2(con)
    run = t1["this run"].set_index(["backbone", "method"])
    # bridge = questions 0-4, compare = 5-9: r_coevo 20% / 100%, macro average 60% (one dataset: the
    # columns are its families).
    coevo = ("tiny", "coevokg")
    assert run.loc[coevo, ["bridge", "compare", "Avg."]].tolist() == [20.0, 100.0, 60.0]
    assert run.loc[coevo, "gain (Avg.)"] == 40.0  # over base's 20.0
    assert t1["paper"]["Avg."].tolist()[3] == 42.1
    rows = t2["this run"].set_index("variant")
    full = rows.loc["+ write back (full)"]
    # Discordant pairs r_ssp -> r_coevo: coevo alone right on 0, 6, 7, 8, 9; ssp alone right on 1-4.
    assert (full.wins, full.losses, full.delta) == (5, 4, 10.0)
    assert full.p == pytest.approx(1.0)
    assert sign_test_p(5, 0) == pytest.approx(0.0625)
    con.close()


def test_figures_carry_each_run_preset_seed_and_config(db):
    con = figures.open_store(db)
    f3, f4 = figures.figure3(con), figures.figure4(con)
    for fig in (f3, f4):
        subtitle = fig.layout.title.subtitle.text
        assert "this run: r_coevo (coevokg) · preset tiny · seed 7 · config hash1" in subtitle
        assert "r_ssp (ssp)" in subtitle
    shown = {(t.name, t.hovertemplate.split(":")[0]) for t in f3.data if t.name}
    assert {("this run: r_coevo (coevokg)", "val_em"), ("this run: r_coevo (coevokg)", "seed_fallback_rate"),
            ("this run: r_ssp (ssp)", "kl")} <= shown
    bars = {t.name: list(t.y) for t in f4.data}
    assert bars["paper (Qwen2.5-7B-Instruct)"] == [0.405, 0.41]  # the last paper trace: p_s
    run_bars = [list(t.y) for t in f4.data if t.name == "this run: r_coevo (coevokg)"]
    assert run_bars == [[3.0, 1.5], pytest.approx([0.4, 0.5])]  # hops mean over rounds (2, 3, 4), then p_s
    con.close()


def test_without_runs_the_paper_side_stands_alone_and_says_so(tmp_path):
    con = store.connect(tmp_path / "empty.duckdb")
    con.close()
    con = figures.open_store(tmp_path / "empty.duckdb")
    fig = figures.figure3(con)
    assert "no runs in the store" in fig.layout.title.subtitle.text
    assert not any("this run" in a.text for a in fig.layout.annotations)  # one column: the paper's
    tables, _ = figures.table1(con)
    assert tables["this run"].empty and len(tables["paper"]) == 12
    assert figures.open_store(tmp_path / "missing.duckdb") is None
    con.close()


def test_build_all_writes_html_and_tables_even_without_a_browser(db, tmp_path, no_browser, capsys):
    out = tmp_path / "figs"
    written = figures.build_all(db=db, out_dir=out)
    names = {p.name for p in written}
    assert {"table1_main_results_paper.md", "table1_main_results_run.csv", "table2_buildup_run.md",
            "figure3_training_dynamics.html", "figure4_generated_vs_seed.html", "table1_main_results_reference.md",
            "table2_buildup_reference.csv", "gate_rejections.html"} <= names
    assert all(p.exists() for p in written) and not any(p.suffix == ".png" for p in written)
    printed = capsys.readouterr().out
    assert printed.count("apt-get install chromium") == 1  # one line, not one per figure
    assert str(out / "figure3_training_dynamics.html") in printed
    md = (out / "table1_main_results_run.md").read_text()
    assert md.startswith("table1_main_results — this run: r_ssp (ssp) · preset tiny · seed 7 · config hash0")
    assert "| tiny | coevokg | 20.0 | 100.0 | 60.0 | +40.0 |" in md  # as the figure's table prints it
    assert pd.read_csv(out / "table2_buildup_paper.csv").p.tolist()[1:] == [0.0011, 0.0141, 0.0314]
    paper_md = (out / "table2_buildup_paper.md").read_text()
    assert "this run" not in paper_md.splitlines()[0] and "the paper's numbers" in paper_md.splitlines()[0]
    ref_md = (out / "table2_buildup_reference.md").read_text()
    assert ref_md.startswith("table2_buildup — reference (tiny, 6 seeds, 56 rounds), mean over seeds")
    assert "commit 7036a99, cdb86a8" in ref_md.splitlines()[0]
    assert pd.read_csv(out / "table2_buildup_reference.csv").avg.round(2).tolist() == [57.97, 60.07, 60.73, 60.57]
    assert "| + KG task generation | 6 | 60.07 | 59.33 | 60.80 | +2.10 | <0.001 |" in ref_md  # two decimals; p < 0.001
    assert pd.read_csv(out / "table2_buildup_reference.csv").p.iloc[1] == pytest.approx(0.000297718, rel=1e-5)  # every digit


def test_save_fig_writes_png_when_a_browser_exists_else_says_how(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("WORKBENCH_FIGURES", str(tmp_path))
    monkeypatch.setattr(figures.base, "_png_works", None)
    written = figures.save_fig(go.Figure(go.Bar(x=["a"], y=[1])), "probe")
    assert written[0] == tmp_path / "probe.html" and written[0].exists()
    if len(written) == 2:  # a Chromium exists here: a real PNG
        assert written[1].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    else:
        assert "apt-get install chromium" in capsys.readouterr().out


def test_save_fig_without_kaleido_writes_the_html_and_names_the_import_error(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "kaleido", None)  # import kaleido raises, as on an image without it
    monkeypatch.setattr(figures.base, "_png_works", None)
    written = figures.save_fig(go.Figure(go.Bar(x=["a"], y=[1])), "probe", out_dir=tmp_path)
    assert written == [tmp_path / "probe.html"] and written[0].exists()
    assert "PNG export off: import of kaleido halted" in capsys.readouterr().out


def test_cli_paper_only(tmp_path, no_browser, capsys):
    assert cli.main(["figures", "--paper-only", "--out", str(tmp_path)]) == 0
    assert (tmp_path / "figure4_generated_vs_seed.html").exists()
    assert not (tmp_path / "table1_main_results_run.csv").exists()
    assert not list(tmp_path.glob("*reference*")) and not (tmp_path / "gate_rejections.html").exists()  # the paper alone
    assert "table2_buildup_paper.md" in capsys.readouterr().out


def test_cli_reference_picks_a_shipped_file_and_names_the_others_when_missing(tmp_path, no_browser, capsys,
                                                                              monkeypatch):
    monkeypatch.setenv("WORKBENCH_DATA", str(tmp_path / "data"))  # no store anywhere: the paper and the reference
    assert cli.main(["figures", "--out", str(tmp_path), "--reference", "tiny_table2_28rounds.json"]) == 0
    assert "6 seeds, 28 rounds" in (tmp_path / "table2_buildup_reference.md").read_text()
    assert cli.main(["figures", "--out", str(tmp_path), "--reference", "tiny_table2_65rounds.json"]) != 0
    err = capsys.readouterr().err
    assert "tiny_table2_65rounds.json: no such reference file" in err and "tiny_table2_28rounds.json" in err


def test_figures_reads_the_store_of_its_preset_and_never_falls_back_silently(db, tmp_path, no_browser, capsys,
                                                                              monkeypatch):
    """Issue 43: after ``make quickstart PRESET=smoke``, ``workbench figures --preset smoke`` draws its
    run; ``workbench figures`` (the tiny store, not there) is an error naming where it looked and the
    stores that are there, not the paper's numbers with the run quietly left out."""
    data = tmp_path / "data"
    data.mkdir()
    monkeypatch.setenv("WORKBENCH_DATA", str(data))
    db.rename(data / "smoke.duckdb")
    assert cli.main(["figures", "--preset", "smoke", "--out", str(tmp_path / "f")]) == 0
    assert "r_coevo" in (tmp_path / "f" / "figure3_training_dynamics.html").read_text()
    assert cli.main(["figures", "--out", str(tmp_path / "g")]) == 2
    said = capsys.readouterr().err
    assert f"no store at {data / 'tiny.duckdb'}" in said and "smoke.duckdb (--preset smoke)" in said
    assert cli.main(["figures", "--db", str(tmp_path / "none.duckdb"), "--out", str(tmp_path / "g")]) == 2
    assert cli.main(["runs", "list", "--preset", "smoke"]) == 0 and "r_coevo" in capsys.readouterr().out


# ---------------------------------------------------------------- what a reader sees (issue 13)

def _untag(text: str) -> str:
    return re.sub(r"<[^>]+>", "", text)


def _cells(fig: go.Figure, title: str) -> dict[str, list[str]]:
    """The text of each column of the table under subplot title ``title`` (``paper``/``this run``)."""
    index = [a.text for a in fig.layout.annotations].index(title)
    table = [t for t in fig.data if isinstance(t, go.Table)][index]
    return {_untag(h): list(v) for h, v in zip(table.header.values, table.cells.values)}


def test_table2_figure_shows_the_papers_p_values_not_zero():
    _, fig = figures.table2()
    assert _cells(fig, "paper")["p"] == ["", "0.0011", "0.0141", "0.0314"]
    assert _cells(fig, "paper")["delta"][1:] == ["+1.5", "+1.1", "+0.6"]


def test_table1_figure_sizes_columns_to_their_longest_name():
    _, fig = figures.table1()
    table = fig.data[0]
    widths = dict(zip([_untag(h) for h in table.header.values], table.columnwidth))
    # relative widths: the backbone column is wide enough for "Llama-3.1-8B-Instruct", not one of ten equal ones
    assert widths["backbone"] >= len("Llama-3.1-8B-Instruct") and widths["backbone"] > 2 * widths["NQ"]
    assert fig.layout.height >= 28 + 24 * 12  # every one of the 12 rows, none cut off


def test_table1_keeps_the_gain_column_with_two_backbones(db):
    con = duckdb.connect(str(db))
    for method, right in (("base", 3), ("coevokg", 6)):  # a second backbone: 30% then 60%
        con.execute("INSERT INTO eval_outcomes (eval_id, model, dataset, question_id, prediction, em) "
                    "SELECT ?, 'p', 'tinyworld', question_id, 'x', (question_id < ?)::DOUBLE FROM questions",
                    [f"Qwen2.5-3B/{method}/tinyworld/test#0", right])
    con.close()
    con = figures.open_store(db)
    run = figures.table1_run(con).set_index(["backbone", "method"])
    con.close()
    assert run.loc[("tiny", "coevokg"), "gain (Avg.)"] == 40.0  # over its own backbone's base
    assert run.loc[("Qwen2.5-3B", "coevokg"), "gain (Avg.)"] == 30.0
    assert run.loc[("Qwen2.5-3B", "base"), "gain (Avg.)"] == 0.0


def test_table2_pairs_build_up_rows_of_one_backbone_only(db):
    """A second backbone's build-up rows (one row: coevokg only) must not be chained with the first's."""
    con = duckdb.connect(str(db))
    con.execute("INSERT INTO eval_outcomes (eval_id, model, dataset, question_id, prediction, em) "
                "SELECT 'zz-7b/coevokg/tinyworld/test#0', 'p', 'tinyworld', question_id, 'x', 1.0 FROM questions")
    con.close()
    con = figures.open_store(db)
    rows = figures.table2_run(con).set_index("variant")
    con.close()
    assert set(rows.run) == {"tiny/ssp", "tiny/coevokg"}  # 'zz-7b' sorts last: it used to be picked for coevokg
    assert (rows.loc["+ write back (full)", ["wins", "losses"]] == (5, 4)).all()


def test_figure3_layout_whole_rounds_short_titles_legend_below(db):
    con = figures.open_store(db)
    fig = figures.figure3(con)
    con.close()
    layout = fig.layout
    rounds = [ax for name, ax in layout.to_plotly_json().items()
              if name.startswith("xaxis") and ax.get("title", {}).get("text") == "round"]
    assert rounds and all(ax["dtick"] >= 1 and ax["tick0"] == 0 for ax in rounds)  # no round 0.5
    secondary = [ax for name, ax in layout.to_plotly_json().items()
                 if name.startswith("yaxis") and ax.get("overlaying")]
    entropy = [ax for ax in secondary if "entropy" in ax.get("title", {}).get("text", "")]
    assert entropy and entropy[0]["tickformat"] == ".4~g"  # 6.53, not 6.53069
    assert max(len(a.text) for a in layout.annotations if a.text.startswith(("a ·", "b ·", "c ·"))) <= 40
    assert layout.legend.orientation == "h" and layout.legend.y < 0  # under the panels, over none
    assert len({t.name for t in fig.data if t.showlegend}) == 2  # one entry per run


def test_figure3_paper_labels_are_annotations_not_clipped_text():
    fig = figures.figure3()
    texts = [a.text for a in fig.layout.annotations]
    assert any(t.startswith("Search-R1: plateau from ~150") for t in texts)
    assert not any(getattr(t, "mode", "") and "text" in t.mode for t in fig.data)  # scatter text is clipped


def test_saved_figure_carries_a_png_or_inline_html(tmp_path, monkeypatch):
    fig = go.Figure(go.Bar(x=["a"], y=[1]), layout=dict(title="A <b>bar</b>"))
    png = tmp_path / "f.png"
    png.write_bytes(b"\x89PNG\r\n\x1a\nfake")
    bundle = figures.SavedFigure(fig, "f", [tmp_path / "f.html", png])._repr_mimebundle_()
    # no image/png: JupyterLab's plotly renderer would show it instead of the interactive figure
    assert set(bundle) == {"application/vnd.plotly.v1+json", "text/html", "text/plain"}
    assert bundle["text/html"].startswith('<img src="data:image/png;base64,iVBORw0KGgpmYWtl" alt="A &lt;b&gt;bar')
    assert "max-width: 100%" in bundle["text/html"]
    assert bundle["application/vnd.plotly.v1+json"]["data"][0]["type"] == "bar"
    monkeypatch.setattr(figures.SavedFigure, "_plotlyjs_sent", False)
    first = figures.SavedFigure(fig, "f", [tmp_path / "f.html"])._repr_mimebundle_()["text/html"]
    second = figures.SavedFigure(fig, "g", [tmp_path / "g.html"])._repr_mimebundle_()["text/html"]
    assert len(first) > 1_000_000 > len(second)  # plotly.js inline once, then reused
    assert "Plotly.newPlot" in second and str(tmp_path / "g.html") in second


def test_show_without_a_browser_falls_back_to_html(tmp_path, no_browser, capsys):
    shown = figures.show(go.Figure(go.Bar(x=["a"], y=[1])), "probe", out_dir=tmp_path)
    assert shown.png is None and "Plotly.newPlot" in shown._repr_mimebundle_()["text/html"]
    assert "apt-get install chromium" in capsys.readouterr().out


# ---------------------------------------------------------------- the reference runs, a third source (issue 15)

@pytest.fixture(scope="module")
def ref():
    return reference.load("tiny_table2_28rounds.json")  # the numbers below are LOG.md session 12's


def _trace(fig: go.Figure, name: str, key: str) -> go.Scatter:
    """The line (not the band) named ``name`` that draws ``key``."""
    found = [t for t in fig.data if t.name == name and t.fill is None and t.hovertemplate.startswith(key + ":")]
    assert len(found) == 1, (name, key, len(found))
    return found[0]


def test_figure3_draws_the_reference_mean_and_band_beside_the_runs(db, ref):
    con = figures.open_store(db)
    fig = figures.figure3(con, ref)
    con.close()
    names = {t.name for t in fig.data if t.showlegend is not False}
    coevokg = "reference (tiny, 6 seeds, 28 rounds): CoEvoKG"
    assert {coevokg, "reference (tiny, 6 seeds, 28 rounds): Search-R1", "reference (tiny, 6 seeds, 28 rounds): SSP",
            "this run: r_coevo (coevokg)", "this run: r_ssp (ssp)"} <= names
    for key in ("val_em", "chains_added", "seed_fallback_rate", "kl", "entropy"):  # CoEvoKG in every panel
        band = ref.band(key)
        line = _trace(fig, coevokg, key)
        assert list(line.x) == band["round"].tolist() and list(line.y) == pytest.approx(band["mean"].tolist())
    # the solid quantities have their seed range as a band; Search-R1 and SSP appear in panel a only
    fills = [t for t in fig.data if t.fill == "toself" and t.name == coevokg]
    assert len(fills) == 3
    band = ref.band("val_em")
    assert list(fills[0].y) == pytest.approx([*band.high, *band.low[::-1]])
    assert {t.hovertemplate.split(":")[0] for t in fig.data if (t.name or "").endswith("SSP") and t.fill is None} == {"val_em"}
    titles = [a.text for a in fig.layout.annotations if a.text.startswith(("a ·", "b ·", "c ·"))]
    assert "a · validation accuracy (run, reference)" in titles and max(map(len, titles)) <= 40
    assert ref.describe() in fig.layout.title.subtitle.text
    assert fig.layout.xaxis2.dtick == 4  # rounds 0-27 of the reference, not the store's 0-2


def test_figure3_of_the_reference_alone_says_there_are_no_runs(ref):
    fig = figures.figure3(None, ref)
    assert "a · validation accuracy (reference)" in [a.text for a in fig.layout.annotations]
    assert fig.layout.title.subtitle.text.startswith("no runs in the store: the paper's numbers and the reference runs")
    assert not any(t.name.startswith("this run") for t in fig.data if t.name)


def test_figure_panels_keep_their_height_however_many_runs_and_legend_rows(db, ref):
    con = figures.open_store(db)
    plain, both = figures.figure3(con), figures.figure3(con, ref)
    con.close()
    for fig in (plain, both):
        assert fig.layout.height - fig.layout.margin.t - fig.layout.margin.b == 800
    assert both.layout.height > plain.layout.height  # a subtitle line and a legend row more


def test_figure4_reference_bars_are_the_mean_over_seeds_of_each_runs_mean(db, ref):
    con = figures.open_store(db)
    fig = figures.figure4(con, ref)
    con.close()
    bars = [t for t in fig.data if t.name == "reference (tiny, 6 seeds, 28 rounds): CoEvoKG"]
    assert len(bars) == 2 and [t.showlegend for t in bars] == [True, False]
    per_seed = ref.of("coevokg").groupby("run")[["avg_hops_generated", "avg_hops_seed", "p_s_generated", "p_s_seed"]].mean()
    assert list(bars[0].y) == pytest.approx(per_seed[["avg_hops_generated", "avg_hops_seed"]].mean().tolist())
    assert list(bars[1].y) == pytest.approx(per_seed[["p_s_generated", "p_s_seed"]].mean().tolist())
    assert list(bars[1].error_y.array) == pytest.approx((per_seed[["p_s_generated", "p_s_seed"]].max()
                                                        - per_seed[["p_s_generated", "p_s_seed"]].mean()).tolist())
    assert bars[0].y[0] > bars[0].y[1] and bars[1].y[0] < bars[1].y[1]  # more hops, harder (LOG.md, session 5)
    order = [t.name for t in fig.data if t.showlegend]
    assert order == ["paper (Qwen2.5-7B-Instruct)", "reference (tiny, 6 seeds, 28 rounds): CoEvoKG",
                     "this run: r_ssp (ssp)", "this run: r_coevo (coevokg)"]


def test_table1_reference_rows_are_the_files_test_em_over_seeds(db, ref):
    con = figures.open_store(db)
    tables, fig = figures.table1(con, ref)
    con.close()
    rows = tables["reference"].set_index("method")
    seeds = across_seeds(ref.scores())
    assert rows.index.tolist() == ["Base", "Search-R1", "SSP", "CoEvoKG"]
    assert rows.loc["CoEvoKG", ["Avg.", "95% low", "95% high"]].tolist() == pytest.approx(
        seeds.loc["coevokg", ["mean", "low", "high"]].tolist())
    assert rows.loc["Search-R1", "gain (Avg.)"] == pytest.approx(np.mean([60.2, 59.6, 60.8, 60.2, 61.0, 60.2]) - 57.8)
    assert rows.loc["Base", "Avg."] == 57.8 and pd.isna(rows.loc["Base", "seeds"])
    title = "reference (tiny, 6 seeds, 28 rounds): test macro EM, mean over seeds, 95% t interval"
    cells = _cells(fig, title)
    assert cells["Avg."] == ["57.80", "60.33", "58.13", "59.57"] and cells["seeds"] == ["", "6", "6", "6"]
    assert _cells(fig, "paper")["Avg."][3] == "42.1"  # the paper's and this run's tables keep one decimal
    assert not tables["this run"].empty


def test_table2_reference_rows_compare_each_row_with_the_previous_over_seeds(ref):
    from scipy import stats

    tables, fig = figures.table2(None, ref=ref)
    rows = tables["reference"].set_index("variant")
    scores = ref.scores()
    assert rows.index.tolist() == list(figures.BUILDUP.values())
    assert rows.avg.tolist() == pytest.approx([np.mean(scores[m]) for m in figures.BUILDUP])
    for (prev, cur), label in zip(zip(list(figures.BUILDUP), list(figures.BUILDUP)[1:]), list(figures.BUILDUP.values())[1:]):
        assert rows.loc[label, "delta"] == pytest.approx(np.mean(scores[cur]) - np.mean(scores[prev]))
        assert rows.loc[label, "p"] == pytest.approx(stats.ttest_ind(scores[cur], scores[prev], equal_var=False).pvalue)
    assert pd.isna(rows.iloc[0].delta) and pd.isna(rows.iloc[0].p)
    cells = _cells(fig, "reference (tiny, 6 seeds, 28 rounds): mean test EM over seeds, 95% t interval; "
                        "Δ and Welch p vs previous row")
    assert cells["avg"] == ["58.13", "59.10", "59.13", "59.57"] and cells["delta"][1:] == ["+0.97", "+0.03", "+0.43"]
    assert tables["this run"].empty  # no store: the paper and the reference


def test_gate_verdicts_are_shares_of_the_candidates_by_reason(ref):
    shares = figures.gate_verdicts(ref.of("coevokg"))
    assert shares.sum(axis=1).tolist() == pytest.approx([1.0] * 28)
    first = [rows.iloc[0] for _, rows in ref.of("coevokg").sort_values("round").groupby("run")]
    leak = np.mean([r.rejections.get("leak", 0) * (1 - r.passed_rate) / sum(r.rejections.values()) for r in first])
    assert shares.loc[0, "leak"] == pytest.approx(leak)
    assert shares.loc[0, "admitted"] == pytest.approx(np.mean([r.admitted_rate for r in first]))
    assert figures.gate_verdicts(ref.of("search_r1")).sum(axis=1).tolist() == [0.0] * 28  # no proposer, no verdicts


def test_gate_rejections_shows_a_run_beside_the_reference_in_one_colour_per_verdict(db, ref):
    con = figures.open_store(db)
    fig = figures.gate_rejections(con, "r_coevo", ref)
    con.close()
    assert [a.text for a in fig.layout.annotations][:2] == ["this run: r_coevo", "reference CoEvoKG, mean of 6 seeds"]
    legend = [t.name for t in fig.data if t.showlegend]
    assert legend[:2] == ["admitted", "passed, beyond top-k"] and {"leak", "weak", "extraction failed"} <= set(legend)
    assert len(legend) == len(set(legend))  # each verdict once, whichever panel has it first
    mine = {t.name: list(t.y) for t in fig.data if t.xaxis == "x"}
    # r_coevo: admitted 0.6, passed 0.75, rejected 0.25 split 1:3 between leak and weak
    assert mine == {"admitted": [0.6] * 3, "passed, beyond top-k": pytest.approx([0.15] * 3),
                    "weak": [0.1875] * 3, "leak": [0.0625] * 3}
    colours = {(t.name, t.marker.color) for t in fig.data}
    assert len({name for name, _ in colours}) == len(colours)  # the same colour in both panels
    assert "this run: r_coevo (coevokg)" in fig.layout.title.subtitle.text and ref.describe() in fig.layout.title.subtitle.text


def test_gate_rejections_without_verdicts_says_so():
    fig = figures.gate_rejections(None)
    assert [a.text for a in fig.layout.annotations] == ["no gate verdicts recorded"] and not fig.data


def test_table1_shows_paper_tier_runs_beside_the_paper_and_the_reference(db, ref, tmp_path, no_browser):
    """Evaluations at preset paper (the backbone label ends in -paper) get their own Table 1 rows:
    EM per benchmark (HotpotQA's families pooled), gain over their base, the paper's row on the same
    benchmarks; the tiny runs stay in "this run"; build_all saves the table."""
    con = duckdb.connect(str(db))
    qid = 100
    # nq: 4 questions; hotpotqa: 2 bridge + 2 comparison (pooled into one benchmark).
    for dataset, families in (("nq", [None] * 4), ("hotpotqa", ["bridge", "bridge", "comparison", "comparison"])):
        for family in families:
            con.execute("INSERT INTO questions (question_id, dataset, split, family, question, answers) "
                        "VALUES (?, ?, 'test', ?, 'q?', ['a'])", [qid, dataset, family])
            qid += 1
    right = {"base": {100, 104}, "coevokg": {100, 101, 104, 105, 106}}  # base nq 1/4, hotpotqa 1/4
    for method, ok in right.items():
        for dataset, ids in (("nq", range(100, 104)), ("hotpotqa", range(104, 108))):
            for q in ids:
                con.execute("INSERT INTO eval_outcomes (eval_id, model, dataset, question_id, prediction, em) "
                            "VALUES (?, 'p', ?, ?, 'x', ?)",
                            [f"Qwen2.5-3B-Instruct-paper/{method}/{dataset}/test#0", dataset, q, float(q in ok)])
    con.close()
    con = figures.open_store(db)
    tables, fig = figures.table1(con, ref)
    tier = tables["paper tier"].set_index("method")
    assert list(tier.columns) == ["backbone", "preset", "NQ", "HotpotQA", "Avg.", "gain (Avg.)", "paper Avg.",
                                  "vs paper"]
    assert tier.loc["Base", ["NQ", "HotpotQA", "Avg."]].tolist() == [25.0, 25.0, 25.0]
    assert tier.loc["CoEvoKG", ["NQ", "HotpotQA", "Avg.", "gain (Avg.)"]].tolist() == [50.0, 75.0, 62.5, 37.5]
    printed = figures.paper.table1().set_index(["backbone", "method", "benchmark"]).accuracy
    theirs = (printed[("Qwen2.5-3B-Instruct", "CoEvoKG", "NQ")] + printed[("Qwen2.5-3B-Instruct", "CoEvoKG", "HotpotQA")]) / 2
    assert tier.loc["CoEvoKG", "paper Avg."] == round(theirs, 1)
    assert tier.loc["CoEvoKG", "vs paper"] == round(62.5 - theirs, 1)
    assert set(tier.backbone) == {"Qwen2.5-3B-Instruct"} and set(tier.preset) == {"paper"}
    assert set(tables["this run"].backbone) == {"tiny"}  # the tiny tier's rows, without the paper tier's
    assert not tables["reference"].empty and len(tables["paper"]) == 12
    assert any("your paper-tier runs" in a.text for a in fig.layout.annotations)
    con.close()
    written = figures.build_all(db=db, out_dir=tmp_path / "out")
    assert (tmp_path / "out" / "table1_main_results_paper_tier.csv") in written


def test_paper_tier_rows_keep_the_evaluated_models_name_and_compare_like_for_like(db):
    """A 7B model evaluated at preset paper is a Qwen2.5-7B row (not the preset's 3B); its gain is
    over its base on the benchmarks both were evaluated on (the base's HotpotQA does not count)."""
    con = duckdb.connect(str(db))
    for q, dataset in enumerate(["nq"] * 4 + ["hotpotqa"] * 4, start=200):
        con.execute("INSERT INTO questions (question_id, dataset, split, family, question, answers) "
                    "VALUES (?, ?, 'test', NULL, 'q?', ['a'])", [q, dataset])
    rows = [("base", "nq", {200}), ("base", "hotpotqa", {204, 205, 206, 207}), ("coevokg", "nq", {200, 201, 202, 203})]
    for method, dataset, ok in rows:
        for q in (range(200, 204) if dataset == "nq" else range(204, 208)):
            con.execute("INSERT INTO eval_outcomes (eval_id, model, dataset, question_id, prediction, em) "
                        "VALUES (?, 'p', ?, ?, 'x', ?)",
                        [f"Qwen2.5-7B-Instruct-paper/{method}/{dataset}/test#0", dataset, q, float(q in ok)])
    con.close()
    con = figures.open_store(db)
    tier = figures.table1_paper_tier(con).set_index("method")
    con.close()
    assert set(tier.backbone) == {"Qwen2.5-7B-Instruct"}
    assert tier.loc["CoEvoKG", ["NQ", "Avg.", "gain (Avg.)"]].tolist() == [100.0, 100.0, 75.0]  # not 100 - 62.5


def test_paper_tier_preset_reads_the_label_evaluate_writes():
    from workbench.evaluate import eval_backbone

    assert [figures.paper_tier_preset(eval_backbone("Llama-3.1-8B-Instruct", p)) for p in ("paper-8b", "paper", "tiny")
            ] == ["paper-8b", "paper", None]


def test_show_prints_no_paths_before_the_figure(tmp_path, capsys):
    """Issue 43: a notebook's figure cell printed the files' paths above the figure; the static copy
    names the files under the image instead."""
    shown = figures.show(go.Figure(go.Bar(x=[1], y=[2])), "probe", out_dir=tmp_path)
    assert capsys.readouterr().out == ""
    if shown.png is not None:
        page = shown._repr_mimebundle_()["text/html"]
        assert page.index("<img") < page.index("saved: probe.html, probe.png")


# ---------------------------------------------------------------- Table 1 on a phone, its p-values (issue 43)

@pytest.fixture(scope="module")
def table1_with_suite():
    """Table 1 as notebook 07 shows it: the paper, the reference runs and Table 1 at the tiny tier (15 columns)."""
    return figures.table1(None, reference.load(reference.DEFAULT), reference.load_table1(None))


def test_every_table_of_table1_fits_its_columns_at_a_notebooks_width(table1_with_suite):
    """The tiny tier's 15 columns overlapped in the PNG ("backbone", "tw-pop", "tw-hotpot" collided); a
    table too wide is now shown in column groups, each repeating backbone and method."""
    _, fig = table1_with_suite
    room = figures.base.PNG_WIDTH - fig.layout.margin.l - fig.layout.margin.r
    for table, title in zip(fig.data, fig.layout.annotations):
        assert sum(table.columnwidth) * figures.base.CHAR_PX <= room, title.text
    suite = [_untag(h) for t, a in zip(fig.data, fig.layout.annotations) if "tiny tier" in a.text
             for h in t.header.values]
    assert suite.count("method") == 2 and {"tw-bamboogle", "p vs base", "p vs Search-R1"} <= set(suite)


def test_p_values_print_to_four_decimals_or_below_0_001(table1_with_suite, tmp_path):
    tables, _ = table1_with_suite
    suite = tables["reference: suite"]
    assert suite["p vs base"].min() < 1e-3 < suite["p vs Search-R1"].max()  # both kinds in the table
    figures.save_table(suite, "suite", out_dir=tmp_path, decimals=2, quiet=True)
    text = (tmp_path / "suite.md").read_text()
    assert "e-0" not in text and "<0.001" in text and "| 0.5329 |" in text
    ps = [cell for line in text.splitlines()[2:] for cell in line.strip("|").split("|")[-2:] if cell.strip()]
    assert all(re.fullmatch(r" (<0\.001|\d\.\d{4}) ", p) for p in ps), ps


def test_a_table_with_markup_draws_every_cell_as_markup(table1_with_suite):
    """plotly draws a cell holding '<' (as in "<0.001") as markup, a row taller and its text a line lower
    than a plain cell's: a table with one draws all its cells so, and is sized for their rows."""
    _, fig = table1_with_suite
    for table in fig.data:
        cells = [v for column in table.cells.values for v in column]
        marked = [v.startswith("<span>") for v in cells]
        assert all(marked) or not any(marked)
        assert not any("<" in v for v, m in zip(cells, marked) if not m)
    assert any(all(v.startswith("<span>") for col in t.cells.values for v in col) for t in fig.data)


def test_a_tables_figure_shows_as_html_tables_where_plotly_does_not_run(table1_with_suite, tmp_path):
    """The static copy (nbconvert, the docs site) of a figure of tables is the tables as text: at a
    phone's 390 px a 900 px PNG printed its 12 px text at 5 px; an HTML table scrolls sideways."""
    _, fig = table1_with_suite
    png = tmp_path / "t.png"
    png.write_bytes(b"\x89PNG\r\n\x1a\nfake")
    page = figures.SavedFigure(fig, "t", [tmp_path / "t.html", png])._repr_mimebundle_()["text/html"]
    assert "<img" not in page and page.count("<table") == len(fig.data) == page.count('overflow-x: auto')
    assert "&lt;0.001" in page and "<span>" not in page and "Llama-3.1-8B-Instruct" in page
    assert page.endswith('saved: t.html, t.png</p>')


def test_save_table_quiet_prints_nothing(tmp_path, capsys):
    written = figures.save_table(pd.DataFrame({"a": [1.5]}), "q", out_dir=tmp_path, quiet=True)
    assert capsys.readouterr().out == "" and all(p.exists() for p in written)
