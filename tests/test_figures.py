"""Paper tables and figures from the transcribed numbers and from a real (temporary) DuckDB store."""

from __future__ import annotations

import json
import re

import duckdb
import pandas as pd
import plotly.graph_objects as go
import pytest

from workbench import cli, figures, store
from workbench.evaluate import sign_test_p

RUNS = [("r_ssp", "ssp"), ("r_coevo", "coevokg")]


@pytest.fixture()
def no_browser(monkeypatch):
    """A real kaleido failure (no browser at BROWSER_PATH), so the HTML-only path runs fast."""
    monkeypatch.setenv("BROWSER_PATH", "/nonexistent/chromium")
    monkeypatch.setattr(figures, "_png_works", None)


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
                     p_s_generated=0.4, p_s_seed=0.5)
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
    assert {("r_coevo (coevokg)", "val_em"), ("r_coevo (coevokg)", "seed_fallback_rate"), ("r_ssp (ssp)", "kl")} <= shown
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
            "figure3_training_dynamics.html", "figure4_generated_vs_seed.html"} <= names
    assert all(p.exists() for p in written) and not any(p.suffix == ".png" for p in written)
    printed = capsys.readouterr().out
    assert printed.count("apt-get install chromium") == 1  # one line, not one per figure
    assert str(out / "figure3_training_dynamics.html") in printed
    md = (out / "table1_main_results_run.md").read_text()
    assert md.startswith("table1_main_results — this run: r_ssp (ssp) · preset tiny · seed 7 · config hash0")
    assert "| tiny | coevokg | 20 | 100 | 60 | 40 |" in md
    assert pd.read_csv(out / "table2_buildup_paper.csv").p.tolist()[1:] == [0.0011, 0.0141, 0.0314]
    paper_md = (out / "table2_buildup_paper.md").read_text()
    assert "this run" not in paper_md.splitlines()[0] and "the paper's numbers" in paper_md.splitlines()[0]


def test_save_fig_writes_png_when_a_browser_exists_else_says_how(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("WORKBENCH_FIGURES", str(tmp_path))
    monkeypatch.setattr(figures, "_png_works", None)
    written = figures.save_fig(go.Figure(go.Bar(x=["a"], y=[1])), "probe")
    assert written[0] == tmp_path / "probe.html" and written[0].exists()
    if len(written) == 2:  # a Chromium exists here: a real PNG
        assert written[1].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    else:
        assert "apt-get install chromium" in capsys.readouterr().out


def test_cli_paper_only(tmp_path, no_browser, capsys):
    assert cli.main(["figures", "--paper-only", "--out", str(tmp_path)]) == 0
    assert (tmp_path / "figure4_generated_vs_seed.html").exists()
    assert not (tmp_path / "table1_main_results_run.csv").exists()
    assert "table2_buildup_paper.md" in capsys.readouterr().out


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
