"""The paper's tables and figures, from its reported numbers and from a user's runs, side by side.

One builder per paper table or figure (seed 000): ``table1`` (main results), ``table2`` (build-up
ablation with deltas and sign-test p-values), ``figure3`` (training dynamics: a validation
accuracy, b verified chain pool and seed fallback rate, c KL and entropy) and ``figure4`` (average
hops and p_s, generated vs seed questions). Each reads the paper side from ``workbench.paper`` and
the "this run" side from the store, read-only: ``runs``, ``run_metrics`` (one JSON object per
round) and ``eval_outcomes``. Every figure names the preset, seed and config hash of each run it
shows. With no runs in the store, a builder shows the paper side alone and says so.

Store conventions read here (written by the training loop and ``workbench eval``):
- a Table 1 / Table 2 row of "this run" is an evaluated ``backbone/method`` (the label part of
  ``workbench.evaluate``'s eval id, ``"<backbone>/<method>/<dataset>/<split>#<n>"``); the base is the
  row whose method is ``base`` (gains are shown against it when there is exactly one);
- a benchmark column is the eval dataset, split by question family where the questions have one
  (``tinyworld:bridge``); for each (label, dataset) only the latest test evaluation counts;
- Table 2's rows are the runs whose ``runs.method`` appears in ``BUILDUP`` (latest run per method).

Example:
    >>> from workbench import figures
    >>> paths = figures.build_all(paper_only=True, out_dir=tmp)  # doctest: +SKIP
"""

from __future__ import annotations

import base64
import html
import json
import os
import textwrap
import warnings
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from workbench import paper, paths
from workbench.evaluate import sign_test_p

# Table 2's build-up order: runs.method of each variant -> the paper's row label.
BUILDUP: dict[str, str] = {
    "ssp": "SSP (baseline)",
    "c1": "+ KG task generation",
    "c2": "+ path/difficulty rewards",
    "coevokg": "+ write back (full)",
}
PNG_HELP = ("PNG export off: kaleido needs a Chrome/Chromium (`apt-get install chromium` on Debian, "
            "or `plotly_get_chrome`); wrote HTML only")
PNG_WIDTH = 900  # CSS pixels of a saved PNG (a notebook's output width); its file has twice as many
PAPER_COLOUR = "#636efa"  # the paper's bars (plotly's first qualitative colour); runs take the others
_png_works: bool | None = None  # learnt on the first PNG; a missing browser is not looked for again


# ---------------------------------------------------------------------------------------- saving

def save_fig(fig: go.Figure, name: str, out_dir: str | Path | None = None) -> list[Path]:
    """Write ``fig`` as ``<name>.html`` (always) and ``<name>.png`` (when a Chromium exists); print the paths.

    ``out_dir`` defaults to ``paths.figures_dir()`` (env ``WORKBENCH_FIGURES``). The HTML loads
    plotly.js from a ``plotly.min.js`` beside it, so it opens offline.

    Example:
        >>> save_fig(go.Figure(go.Bar(x=[1], y=[2])), "demo", out_dir=tmp)  # doctest: +SKIP
        [PosixPath('.../demo.html'), PosixPath('.../demo.png')]
    """
    out = Path(out_dir) if out_dir else paths.figures_dir()
    out.mkdir(parents=True, exist_ok=True)
    html = out / f"{name}.html"
    fig.write_html(html, include_plotlyjs="directory")
    written = [html]
    if _png_ready():
        png = out / f"{name}.png"
        try:
            with warnings.catch_warnings():  # plotly passes kopts a running server does not need
                warnings.filterwarnings("ignore", message="The kopts argument is ignored")
                # a notebook's width, drawn at twice the pixels: readable where a notebook or a page shows it
                fig.write_image(png, width=PNG_WIDTH, height=max(500, fig.layout.height or 500), scale=2)
            written.append(png)
        except Exception as err:  # a browser that crashes must not cost the HTML
            print(f"PNG export failed for {name} ({type(err).__name__}: {err}); wrote HTML only")
    for path in written:
        print(path)
    return written


class SavedFigure:
    """A saved figure as a notebook displays it: plotly's own JSON, which JupyterLab and VS Code draw
    interactively, and a static copy as HTML for every reader that does not run plotly's JavaScript
    (``jupyter nbconvert``, nbviewer, a saved notebook opened elsewhere): the PNG that ``save_fig``
    wrote, as an image that fits the page's width, or, without a Chromium to write one, the figure
    with plotly.js inline (the first figure of a process carries plotly.js, ~4.8 MB; later ones use
    it) and a line naming the saved file.

    The PNG goes in as HTML, not as ``image/png``: JupyterLab's plotly renderer shows a bundle's
    ``image/png`` instead of the interactive figure, at the file's pixel size.

    Example:
        >>> shown = SavedFigure(go.Figure(), "demo", [Path("demo.html")])
        >>> sorted(shown._repr_mimebundle_())
        ['application/vnd.plotly.v1+json', 'text/html', 'text/plain']
    """

    _plotlyjs_sent = False  # whether this process has put plotly.js into a notebook output yet

    def __init__(self, fig: go.Figure, name: str, written: list[Path]):
        self.fig, self.name, self.written = fig, name, list(written)
        self.png = next((p for p in self.written if p.suffix == ".png"), None)

    def __repr__(self) -> str:
        return f"figure {self.name}: " + ", ".join(str(p) for p in self.written)

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict:
        return {"application/vnd.plotly.v1+json": json.loads(self.fig.to_json()), "text/plain": repr(self),
                "text/html": self._png_html() if self.png is not None else self._plotly_html()}

    def _png_html(self) -> str:
        data = base64.b64encode(self.png.read_bytes()).decode("ascii")
        title = html.escape((self.fig.layout.title.text or self.name), quote=True)
        # the file has twice the pixels of PNG_WIDTH: sharp at that width, scaled down on a narrower page
        return (f'<img src="data:image/png;base64,{data}" alt="{title}" width="{PNG_WIDTH}" '
                'style="max-width: 100%; height: auto">')

    def _plotly_html(self) -> str:
        first = not SavedFigure._plotlyjs_sent
        SavedFigure._plotlyjs_sent = True
        note = (f"<p>Figure {self.name}: saved as {self.written[0]}; it draws here where JavaScript runs "
                "(a PNG copy needs a Chromium: `apt-get install chromium`).</p>")
        return note + self.fig.to_html(full_html=False, include_plotlyjs=first, default_width="100%")


def show(fig: go.Figure, name: str, out_dir: str | Path | None = None) -> SavedFigure:
    """``save_fig`` and return the figure for a notebook cell to display, with its static copy
    (``SavedFigure``), so ``nbconvert --to html`` and viewers without JavaScript show it too.

    Example:
        >>> show(go.Figure(go.Bar(x=[1], y=[2])), "demo", out_dir=tmp)  # doctest: +SKIP
        figure demo: .../demo.html, .../demo.png
    """
    return SavedFigure(fig, name, save_fig(fig, name, out_dir))


def _markdown(df: pd.DataFrame) -> str:
    cols = [str(c) for c in df.columns]
    cell = lambda v: "" if pd.isna(v) else (f"{v:g}" if isinstance(v, float) else str(v))  # noqa: E731
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in df.itertuples(index=False)]
    return "\n".join(lines) + "\n"


def save_table(df: pd.DataFrame, name: str, caption: str = "", out_dir: str | Path | None = None) -> list[Path]:
    """Write ``df`` as ``<name>.md`` (caption, then a Markdown table) and ``<name>.csv``; print the paths.

    Example:
        >>> save_table(pd.DataFrame({"a": [1.5]}), "demo", "A caption", out_dir=tmp)  # doctest: +SKIP
    """
    out = Path(out_dir) if out_dir else paths.figures_dir()
    out.mkdir(parents=True, exist_ok=True)
    md, csv = out / f"{name}.md", out / f"{name}.csv"
    md.write_text((f"{caption}\n\n" if caption else "") + _markdown(df))
    df.to_csv(csv, index=False)
    for path in (md, csv):
        print(path)
    return [md, csv]


def _png_ready() -> bool:
    """Whether PNG export works; on the first call, start one kaleido browser for the whole process."""
    global _png_works
    if _png_works is None:
        import atexit

        import kaleido
        from choreographer.browsers.chromium import Chromium

        # Without a browser kaleido's server thread dies and later calls wait forever: look first.
        browser = Chromium.find_browser(skip_local=False)
        _png_works = bool(browser) and os.access(browser, os.X_OK)
        if _png_works:
            kaleido.start_sync_server(silence_warnings=True)  # else every PNG starts its own browser
            atexit.register(kaleido.stop_sync_server, silence_warnings=True)
        else:
            print(PNG_HELP)
    return _png_works


# ------------------------------------------------------------------------------- reading the store

def open_store(db: str | Path | None) -> duckdb.DuckDBPyConnection | None:
    """The store at ``db`` opened read-only, or None when there is no such file (paper side only).

    Example:
        >>> open_store("/nonexistent.duckdb") is None
        True
    """
    if db is None or not Path(db).exists():
        return None
    try:
        return duckdb.connect(str(db), read_only=True)
    except duckdb.IOException as err:
        raise ValueError(f"{db}: cannot open the store read-only ({err}); is a run still writing to it?") from err


def _has(con, table: str) -> bool:
    return bool(con.execute("SELECT count(*) FROM information_schema.tables WHERE table_name = ?",
                            [table]).fetchone()[0])


def store_runs(con) -> pd.DataFrame:
    """The ``runs`` table (run, method, preset, seed, config_hash, steps, status), oldest first."""
    cols = ["run", "method", "preset", "seed", "config_hash", "steps", "status"]
    if con is None or not _has(con, "runs"):
        return pd.DataFrame(columns=cols)
    return con.execute(f"SELECT {', '.join(cols)} FROM runs ORDER BY created_at, run").df()


def run_metrics(con) -> pd.DataFrame:
    """One row per (run, round) with every key of the round's metrics JSON as a column."""
    if con is None or not _has(con, "run_metrics"):
        return pd.DataFrame(columns=["run", "round"])
    rows = con.execute("SELECT run, round, metrics FROM run_metrics ORDER BY run, round").fetchall()
    records = [{**json.loads(m), "run": run, "round": rnd} for run, rnd, m in rows]
    return pd.DataFrame(records, columns=None if records else ["run", "round"])


def describe_runs(runs: pd.DataFrame) -> str:
    """The provenance line every figure carries: each run's method, preset, seed and config hash.

    Example:
        >>> describe_runs(pd.DataFrame([dict(run="r1", method="coevokg", preset="tiny", seed=0, config_hash="ab12")]))
        'this run: r1 (coevokg) · preset tiny · seed 0 · config ab12'
    """
    if runs.empty:
        return "no runs in the store: the paper's numbers alone"
    return "<br>".join(f"this run: {r.run} ({r.method}) · preset {r.preset} · seed {r.seed} · config {r.config_hash}"
                       for r in runs.itertuples())


# The newest test-split evaluation of each (model, dataset); model = "backbone/method" of the eval id.
_LATEST_TEST_EVALS = """
    labelled AS (SELECT * REPLACE (regexp_extract(eval_id, '^([^/]+/[^/]+)/', 1) AS model)
                 FROM eval_outcomes WHERE eval_id LIKE '%/test#%'),
    latest AS (SELECT model, dataset, arg_max(eval_id, created_at) AS eval_id
               FROM labelled GROUP BY model, dataset)"""


def eval_scores(con) -> pd.DataFrame:
    """Accuracy (%) per evaluated model and benchmark, latest evaluation of each (model, dataset)."""
    cols = ["model", "benchmark", "accuracy", "n"]
    if con is None or not _has(con, "eval_outcomes"):
        return pd.DataFrame(columns=cols)
    family = ("CASE WHEN q.family IS NULL OR q.family = '' THEN e.dataset ELSE e.dataset || ':' || q.family END"
              if _has(con, "questions") else "e.dataset")
    join = "LEFT JOIN questions q USING (question_id)" if _has(con, "questions") else ""
    return con.execute(f"""
        WITH {_LATEST_TEST_EVALS}
        SELECT e.model, {family} AS benchmark, 100 * avg(e.em) AS accuracy, count(*) AS n
        FROM labelled e JOIN latest USING (model, dataset, eval_id) {join}
        GROUP BY ALL ORDER BY model, benchmark""").df()[cols]


def _paired(con, model_a: str, model_b: str) -> tuple[int, int]:
    """(b right where a is wrong, a right where b is wrong) over the questions both answered."""
    wins, losses = con.execute(f"""
        WITH {_LATEST_TEST_EVALS},
             o AS (SELECT e.* FROM labelled e JOIN latest USING (model, dataset, eval_id))
        SELECT count(*) FILTER (WHERE b.em > a.em), count(*) FILTER (WHERE b.em < a.em)
        FROM o a JOIN o b ON a.dataset = b.dataset AND a.question_id = b.question_id
        WHERE a.model = ? AND b.model = ?""", [model_a, model_b]).fetchone()
    return int(wins), int(losses)


# ------------------------------------------------------------------------------------ the builders

def _layout(fig: go.Figure, title: str, runs: pd.DataFrame, height: int, note: str = "") -> go.Figure:
    subtitle = describe_runs(runs) + (f"<br>{note}" if note else "")
    # The title block is pinned to the top and the panels start below its last line (plus a subplot
    # title's height): plotly would centre it in the margin, over the first panel titles.
    fig.update_layout(title=dict(text=title, subtitle=dict(text=subtitle), yref="container", y=1, yanchor="top",
                                 pad=dict(t=14)),
                      height=height, margin=dict(t=_top_margin(subtitle)), template="plotly_white")
    fig.update_annotations(font_size=13)  # subplot titles: one line each at a notebook's width
    return fig


def _top_margin(subtitle: str) -> int:
    """Pixels above the panels: the title, each subtitle line (16 px) and a subplot title."""
    return 70 + 16 * (subtitle.count("<br>") + 1)


def _cell(column: str, v) -> str:
    """A table cell as text: p-values to 4 significant digits (the paper's 0.0011 is not 0.0),
    counts as integers, other numbers to one decimal, booleans as a tick or a dash.

    Example:
        >>> [_cell("p", 0.0011), _cell("wins", 5.0), _cell("avg", 52.44), _cell("delta", 1.5), _cell("c1", True)]
        ['0.0011', '5', '52.4', '+1.5', '✓']
    """
    if v is None or (not isinstance(v, str) and pd.isna(v)):
        return ""
    if isinstance(v, (bool, np.bool_)):
        return "✓" if v else "–"
    if column == "p":
        return f"{v:.4g}"
    if column in ("delta", "gain (Avg.)"):
        return f"{v:+.1f}"
    if column in ("wins", "losses", "n"):
        return f"{int(v)}"
    return f"{v:.1f}" if isinstance(v, (float, np.floating)) else str(v)


def _table_trace(df: pd.DataFrame) -> go.Table:
    """A ``go.Table`` whose column widths follow their longest text, so no name is clipped."""
    cells = {c: [_cell(str(c), v) for v in df[c]] for c in df.columns}
    widths = [max([1.15 * len(str(c)), *map(len, cells[c])]) + 2 for c in df.columns]  # headers are bold
    return go.Table(columnwidth=widths, header=dict(values=[f"<b>{c}</b>" for c in df.columns], height=28),
                    cells=dict(values=list(cells.values()), height=24))


def table1_paper() -> pd.DataFrame:
    """Table 1 as printed, each cell "accuracy" with the gain over the backbone in its own column."""
    wide = paper.table1_wide().reset_index()
    gains = paper.table1().pivot(index=["backbone", "method"], columns="benchmark", values="gain")
    wide["gain (Avg.)"] = [gains.loc[(b, m), "Avg."] for b, m in zip(wide.backbone, wide.method)]
    return wide


def table1_run(con) -> pd.DataFrame:
    """Table 1's layout from the store: a row per evaluated backbone and method, a column per
    benchmark (a question family when one dataset has them all), ``Avg.``, and ``gain (Avg.)`` over
    the ``base`` row of the same backbone (as the paper's subscripts).

    Example:
        >>> table1_run(None).empty
        True
    """
    scores = eval_scores(con)
    if scores.empty:
        return pd.DataFrame()
    prefixes = {b.partition(":")[0] + ":" for b in scores.benchmark}
    if len(prefixes) == 1 and scores.benchmark.str.contains(":").all():  # tinyworld:bridge -> bridge
        scores = scores.assign(benchmark=scores.benchmark.str.removeprefix(prefixes.pop()))
    wide = scores.pivot(index="model", columns="benchmark", values="accuracy")
    wide["Avg."] = wide.mean(axis=1)  # the macro average, as the paper's Avg.
    wide.index = pd.MultiIndex.from_tuples([tuple(m.split("/", 1)) for m in wide.index], names=["backbone", "method"])
    base_avg = {b: avg for (b, meth), avg in wide["Avg."].items() if meth == "base"}
    if base_avg:
        wide["gain (Avg.)"] = [avg - base_avg[b] if b in base_avg else np.nan for (b, _), avg in wide["Avg."].items()]
    wide.columns.name = None
    return wide.reset_index().round(1)


def table1(con=None) -> tuple[dict[str, pd.DataFrame], go.Figure]:
    """Table 1 (main results): ``({"paper": df, "this run": df}, figure)``, the two side by side.

    Example:
        >>> tables, fig = table1()
        >>> tables["paper"].loc[3, "Avg."]  # Qwen2.5-3B-Instruct + CoEvoKG
        np.float64(42.1)
    """
    tables = {"paper": table1_paper(), "this run": table1_run(con)}
    runs = store_runs(con)
    return tables, _tables_figure(tables, "Table 1: accuracy (%) per benchmark and macro average", runs)


def table2_run(con, buildup: dict[str, str] | None = None) -> pd.DataFrame:
    """Table 2's layout from the store: the build-up runs' macro averages, deltas and sign tests."""
    buildup = buildup or BUILDUP
    scores = eval_scores(con)
    if scores.empty:
        return pd.DataFrame()
    avg = scores.groupby("model").accuracy.mean()
    rows, previous = [], None
    for method, label in buildup.items():
        chosen = [m for m in avg.index if m.split("/", 1)[1] == method]
        if not chosen:
            continue
        run = chosen[-1]  # the evaluated backbone/method of this variant
        row = {"variant": label, "run": run, "avg": avg[run], "delta": None, "p": None, "wins": None, "losses": None}
        if previous is not None:
            wins, losses = _paired(con, previous, run)
            row.update(delta=avg[run] - avg[previous], p=sign_test_p(wins, losses), wins=wins, losses=losses)
        rows.append(row)
        previous = run
    return pd.DataFrame(rows).round({"avg": 1, "delta": 1, "p": 4}) if rows else pd.DataFrame()


def table2(con=None, buildup: dict[str, str] | None = None) -> tuple[dict[str, pd.DataFrame], go.Figure]:
    """Table 2 (build-up ablation with deltas and paired sign-test p-values), paper and this run.

    Example:
        >>> tables, _ = table2()
        >>> tables["paper"].delta.tolist()[1:]
        [1.5, 1.1, 0.6]
    """
    buildup = buildup or BUILDUP
    tables = {"paper": paper.table2().drop(columns="provenance"), "this run": table2_run(con, buildup)}
    runs = store_runs(con)
    return tables, _tables_figure(tables, "Table 2: build-up ablation (Δ and sign test vs previous row)",
                                  runs[runs.method.isin(list(buildup))])  # the build-up runs, not every run


def _tables_figure(tables: dict[str, pd.DataFrame], title: str, runs: pd.DataFrame) -> go.Figure:
    """The tables stacked, each as tall as its rows (header 28 px, a row 24 px, its title 40 px)."""
    shown = {k: v for k, v in tables.items() if not v.empty}
    px_of = [28 + 24 * len(df) + 40 for df in shown.values()]
    fig = make_subplots(rows=len(shown), cols=1, specs=[[{"type": "table"}]] * len(shown),
                        subplot_titles=list(shown), row_heights=px_of, vertical_spacing=0.04)
    for i, df in enumerate(shown.values(), start=1):
        fig.add_trace(_table_trace(df), row=i, col=1)
    top, bottom = _top_margin(describe_runs(runs)), 30
    fig = _layout(fig, title, runs, height=int(sum(px_of) * (1 + 0.04 * (len(shown) - 1))) + top + bottom)
    return fig.update_layout(margin=dict(b=bottom))


def figure3(con=None) -> go.Figure:
    """Figure 3 (training dynamics): left what the paper's text states, right this store's runs per round.

    Rows: a validation accuracy; b verified chain pool size and seed fallback rate; c KL and entropy.
    On the right each run has one colour; the second quantity of a panel is dashed, on the right axis.
    The legend (the runs) sits under the panels, so it covers none of them.

    Example:
        >>> len(figure3().data) >= 1
        True
    """
    runs, metrics = store_runs(con), run_metrics(con)
    runs = runs[runs.run.isin(set(metrics.run))] if not metrics.empty else runs.iloc[0:0]
    cols = 2 if not runs.empty else 1
    specs = [[{"secondary_y": True}] * cols for _ in range(3)]
    titles = []
    for panel in ("a · validation accuracy", "b · chain pool, seed fallback", "c · KL and entropy"):
        titles += [f"{panel} (paper)"] + ([f"{panel} (this run)"] if cols == 2 else [])
    fig = make_subplots(rows=3, cols=cols, specs=specs, subplot_titles=titles,
                        horizontal_spacing=0.16, vertical_spacing=0.12)
    _figure3_paper(fig)
    if cols == 2:
        _figure3_run(fig, runs, metrics)
    fig = _layout(fig, "Figure 3: training dynamics", runs, height=1000,
                  note="left: what the paper's text states (Qwen2.5-7B-Instruct; it publishes no curve data)")
    return fig.update_layout(legend=dict(orientation="h", x=0, xanchor="left", y=-0.06, yanchor="top"),
                             margin=dict(b=90))


def _wrap(text: str, width: int) -> str:
    """``text`` broken into lines of at most ``width`` characters, joined by ``<br>`` (plotly's line break)."""
    return "<br>".join(textwrap.wrap(text, width))


def _figure3_paper(fig: go.Figure) -> None:
    f3 = paper.figure3()
    budget = float(f3.query("kind == 'budget'").step.iloc[0])
    for row in (1, 2, 3):
        fig.update_xaxes(range=[0, budget], title_text="optimization step", row=row, col=1)
    # Panel a: only the step marks the text gives, each labelled above its mark; no curve is invented.
    marks = f3.query("panel == 'a'").reset_index(drop=True)
    ys = [0.85 - 0.22 * i for i in range(len(marks))]
    fig.add_trace(go.Scatter(x=marks.step, y=ys, mode="markers", showlegend=False,
                             hovertext=marks.statement, hoverinfo="text"), row=1, col=1)
    for r, y in zip(marks.itertuples(), ys):
        fig.add_annotation(x=0, y=y + 0.05, xanchor="left", yanchor="bottom", showarrow=False, font_size=11,
                           text=f"{r.method}: {r.kind.replace('_', ' ')} ~{r.step:g}", row=1, col=1)
    fig.update_yaxes(title_text="validation accuracy", showticklabels=False, range=[0, 1], row=1, col=1)
    # Panel b: the two stated seed fallback levels.
    fig.add_trace(go.Scatter(x=[0, budget], y=[None, None], showlegend=False), row=2, col=1)
    for r in f3.query("panel == 'b' and metric == 'seed_fallback_rate'").itertuples():
        fig.add_hline(y=r.value, line_dash="dash", row=2, col=1, annotation_position="top left",
                      annotation_text=f"seed fallback {r.kind.replace('_approx', '')} ≈{r.value:.2f}")
    fig.update_yaxes(title_text="seed fallback rate", range=[0, 0.5], row=2, col=1)
    # Panels b (pool) and c: statements without numbers, as text inside the panel.
    for row, query in ((2, "panel == 'b' and kind == 'qualitative'"), (3, "panel == 'c'")):
        text = "<br>".join(_wrap(f"{r.metric}: {r.statement}", 36) for r in f3.query(query).itertuples())
        # panel b: under the 0.25 line; panel c: the middle of an empty panel
        fig.add_annotation(x=budget / 2, y=0.01 if row == 2 else 0.5, yanchor="bottom" if row == 2 else "middle",
                           text=text, showarrow=False, font_size=10, row=row, col=1)
    fig.update_yaxes(showticklabels=False, range=[0, 1], row=3, col=1)


# Figure 3's right column: (row, key, on the secondary axis); the secondary quantity is dashed.
_F3_PANELS = [(1, "val_em", False), (2, "pool_chains", False), (2, "seed_fallback_rate", True),
              (3, "kl", False), (3, "entropy", True)]
_F3_AXES = [("val EM", None), ("pool chains (solid)", "seed fallback (dashed)"), ("KL (solid)", "entropy (dashed)")]


def _figure3_run(fig: go.Figure, runs: pd.DataFrame, metrics: pd.DataFrame) -> None:
    for r in runs.itertuples():  # r.Index: the run's place in the store, its colour everywhere
        m, first = metrics[metrics.run == r.run], True
        for row, key, secondary in _F3_PANELS:
            if key in m and m[key].notna().any():
                fig.add_trace(go.Scatter(x=m["round"], y=m[key], mode="lines+markers", name=f"{r.run} ({r.method})",
                                         line=dict(color=run_colour(r.Index), dash="dash" if secondary else "solid"),
                                         legendgroup=r.run, showlegend=first, hovertemplate=f"{key}: %{{y:.4g}}<br>round %{{x}}"),
                              row=row, col=2, secondary_y=secondary)
                first = False
    last = int(metrics["round"].max()) if len(metrics) else 1
    for row, (left, right) in enumerate(_F3_AXES, start=1):
        whole_ticks(fig, last, title_text="round", row=row, col=2)
        fig.update_yaxes(title_text=left, rangemode="tozero", row=row, col=2, secondary_y=False)
        if right:
            fig.update_yaxes(title_text=right, tickformat=".4~g", nticks=5, tickmode="auto", showgrid=False,
                             row=row, col=2, secondary_y=True)
    fig.update_yaxes(range=[0, 1.02], row=1, col=2, secondary_y=False)  # validation EM is a share
    fig.update_yaxes(range=[0, 1.02], row=2, col=2, secondary_y=True)   # so is the seed fallback rate


def whole_ticks(fig: go.Figure, last: int, **where) -> go.Figure:
    """Whole-number ticks on the x axes ``where`` selects (rounds, hops): one per value up to 8, then
    about eight; plotly would otherwise tick 0, 0.5, 1 on a run of two rounds.

    Example:
        >>> whole_ticks(go.Figure(go.Scatter(x=[0, 1], y=[1, 2])), 1).layout.xaxis.dtick
        1
    """
    return fig.update_xaxes(tick0=0, dtick=max(1, -(-int(last) // 8)), **where)


def run_colour(i: int) -> str:
    """The colour of the ``i``-th run of a store in every figure (the paper's bars keep the first).

    Example:
        >>> run_colour(0) != PAPER_COLOUR
        True
    """
    import plotly.express as px

    colours = px.colors.qualitative.Plotly
    return colours[1 + i % (len(colours) - 1)]


def figure4(con=None) -> go.Figure:
    """Figure 4: average hops and p_s of generated vs seed questions, paper bars beside this run's.

    This run's values are the means over its rounds of ``avg_hops_generated``, ``avg_hops_seed``,
    ``p_s_generated`` and ``p_s_seed``.

    Example:
        >>> [t.name for t in figure4().data]
        ['paper (Qwen2.5-7B-Instruct)', 'paper (Qwen2.5-7B-Instruct)']
    """
    f4 = paper.figure4()
    runs, metrics = store_runs(con), run_metrics(con)
    fig = make_subplots(rows=1, cols=2, subplot_titles=["average hops", "p_s (solver success rate)"])
    for col, metric in enumerate(("avg_hops", "p_s"), start=1):
        rows = f4[f4.metric == metric]
        text = [("≈" if a else "") + f"{v:g}" for v, a in zip(rows.value, rows.approx)]
        fig.add_trace(go.Bar(x=rows.group, y=rows.value, text=text, name="paper (Qwen2.5-7B-Instruct)",
                             marker_color=PAPER_COLOUR, showlegend=col == 1), row=1, col=col)
    keys = [f"{metric}_{group}" for metric in ("avg_hops", "p_s") for group in ("generated", "seed")]
    shown = [r for r in runs.itertuples() if not metrics.empty and any(k in metrics for k in keys)
             and (metrics.run == r.run).any()]
    for r in shown:
        m = metrics[metrics.run == r.run]
        for col, metric in enumerate(("avg_hops", "p_s"), start=1):
            y = [m[f"{metric}_{g}"].mean() if f"{metric}_{g}" in m else None for g in ("generated", "seed")]
            # values on the bars up to two runs; more side by side would print over each other (hover has them)
            text = [None if v is None or pd.isna(v) or len(shown) > 2 else f"{v:.3g}" for v in y]
            fig.add_trace(go.Bar(x=["generated", "seed"], y=y, name=f"this run: {r.run} ({r.method})", text=text,
                                 marker_color=run_colour(r.Index), legendgroup=r.run, showlegend=col == 1), row=1, col=col)
    # values above the bars, level; one too wide for a narrow (notebook-width) bar is left out, not turned
    fig.update_traces(textposition="outside", textangle=0, cliponaxis=False)
    fig.update_layout(barmode="group", legend=dict(orientation="h", x=0, xanchor="left", y=-0.12, yanchor="top"),
                      margin=dict(b=90), uniformtext=dict(minsize=9, mode="hide"))
    return _layout(fig, "Figure 4: generated vs seed questions", runs[runs.run.isin([r.run for r in shown])],
                   height=520)


def table_caption(name: str, side: str, con=None) -> str:
    """The first line of a saved table: the paper's numbers and where they are transcribed from, or
    the store's runs (preset, seed, config of each).

    Example:
        >>> table_caption("table2_buildup", "paper")
        "table2_buildup — the paper's numbers (seed 000, transcribed in data/paper/ with provenance)"
    """
    if side == "paper":
        return f"{name} — the paper's numbers (seed 000, transcribed in data/paper/ with provenance)"
    return f"{name} — {describe_runs(store_runs(con)).replace('<br>', '; ')}"


def build_all(db: str | Path | None = None, paper_only: bool = False, out_dir: str | Path | None = None) -> list[Path]:
    """Build every paper table and figure (paper vs the runs in ``db``) and save them; return the paths.

    ``db`` defaults to ``paths.default_db()``; ``paper_only`` ignores the store.

    Example:
        >>> written = build_all(paper_only=True, out_dir=tmp)  # doctest: +SKIP
    """
    db = db if db is not None else paths.default_db()
    con = None if paper_only else open_store(db)
    if not paper_only:
        print(f"store: {db}" if con is not None else f"no store at {db}: the paper's numbers alone")
    written: list[Path] = []
    try:
        for name, builder in (("table1_main_results", table1), ("table2_buildup", table2)):
            tables, fig = builder(con)
            for side, df in tables.items():
                if not df.empty:
                    suffix = "paper" if side == "paper" else "run"
                    written += save_table(df, f"{name}_{suffix}", table_caption(name, side, con), out_dir)
            written += save_fig(fig, name, out_dir)
        written += save_fig(figure3(con), "figure3_training_dynamics", out_dir)
        written += save_fig(figure4(con), "figure4_generated_vs_seed", out_dir)
    finally:
        if con is not None:
            con.close()
    return written
