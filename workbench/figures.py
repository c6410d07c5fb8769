"""The paper's tables and figures, from its reported numbers, the workbench's reference runs and a
user's runs, side by side.

One builder per paper table or figure (seed 000): ``table1`` (main results), ``table2`` (build-up
ablation with deltas and sign-test p-values), ``figure3`` (training dynamics: a validation
accuracy, b chain pool growth and seed fallback rate, c KL and entropy) and ``figure4`` (average
hops and p_s, generated vs seed questions); and ``gate_rejections`` (ours: the quality gate's
verdicts by reason per round) and ``answer_types`` (ours: the answer types of generated vs seed
questions); ``topology_curriculum`` is EoG's Fig. 7 (seed 004: synthesis success
per topology per round). Each reads the paper side from ``workbench.paper``, the "this run"
side from the store, read-only (``runs``, ``run_metrics``: one JSON object per round,
``eval_outcomes``), and, given ``ref`` (``workbench.reference.load()``), the shipped reference runs
as a third source, named by ``Reference.label`` ("reference (tiny, 6 seeds, 56 rounds)"): their
mean over seeds with the seeds' range as a band (figures) or a 95% t interval (tables). Every
figure names the preset, seed and config hash of each run it shows and the reference's provenance.
With no runs in the store, a builder shows the paper side (and the reference) alone and says so.

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
from collections import Counter
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from workbench import config, paper, paths, reference
from workbench.evaluate import across_seeds, sign_test_p
from workbench.kg.benchmarks import SUITE
from workbench.reference import NAMES, Reference, chains_added

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
# The reference runs: dark, muted colours, apart from the paper's blue and the runs' bright ones.
REFERENCE_COLOURS = {"coevokg": "#3a3a3a", "search_r1": "#8c6d31", "ssp": "#7b4173", "c1": "#637939", "c2": "#5254a3"}
# The gate's verdicts: passing ones green, each rejection reason its own colour in every panel.
GATE_COLOURS = {"admitted": "#2ca02c", "passed, beyond top-k": "#98df8a", "leak": "#d62728", "weak": "#ff7f0e",
                "extraction failed": "#7f7f7f", "not one wh-question": "#9467bd", "empty": "#8c564b"}
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
    html = out / f"{paths.plain_name(name, 'figure name')}.html"
    with paths.atomic_output(html) as tmp:  # a full disk leaves the previous figure, not half of one
        fig.write_html(tmp, include_plotlyjs="directory")
    written = [html]
    if _png_ready():
        png = out / f"{name}.png"
        try:
            with warnings.catch_warnings():  # plotly passes kopts a running server does not need
                warnings.filterwarnings("ignore", message="The kopts argument is ignored")
                # a notebook's width, drawn at twice the pixels: readable where a notebook or a page shows it
                with paths.atomic_output(png) as tmp:
                    fig.write_image(tmp, format="png", width=PNG_WIDTH, height=max(500, fig.layout.height or 500),
                                    scale=2)
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


def _markdown(df: pd.DataFrame, decimals: int | None = None) -> str:
    cols = [str(c) for c in df.columns]
    if decimals is None:
        cell = lambda c, v: "" if pd.isna(v) else (f"{v:g}" if isinstance(v, float) else str(v))  # noqa: E731
    else:
        cell = lambda c, v: _cell(c, v, decimals)  # noqa: E731
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(cell(c, v) for c, v in zip(cols, row)) + " |" for row in df.itertuples(index=False)]
    return "\n".join(lines) + "\n"


def table_decimals(side: str) -> int:
    """Decimals a table of ``side`` prints: two for the reference's means over seeds (59.25 is not
    59.2), one for the paper's and a run's, as the paper prints.

    Example:
        >>> table_decimals("reference"), table_decimals("paper")
        (2, 1)
    """
    return 2 if side.startswith("reference") else 1


def save_table(df: pd.DataFrame, name: str, caption: str = "", out_dir: str | Path | None = None,
               decimals: int | None = None) -> list[Path]:
    """Write ``df`` as ``<name>.md`` (caption, then a Markdown table) and ``<name>.csv`` (every digit);
    print the paths. With ``decimals`` the Markdown cells read as the figures' tables print them
    (``_cell``: p to 4 significant digits, signed deltas), else as ``:g`` (6 significant digits).

    Example:
        >>> save_table(pd.DataFrame({"a": [1.5]}), "demo", "A caption", out_dir=tmp)  # doctest: +SKIP
    """
    out = Path(out_dir) if out_dir else paths.figures_dir()
    out.mkdir(parents=True, exist_ok=True)
    md, csv = out / f"{paths.plain_name(name, 'table name')}.md", out / f"{name}.csv"
    with paths.atomic_output(md) as tmp:
        tmp.write_text((f"{caption}\n\n" if caption else "") + _markdown(df, decimals))
    with paths.atomic_output(csv) as tmp:
        df.to_csv(tmp, index=False)
    for path in (md, csv):
        print(path)
    return [md, csv]


def _png_ready() -> bool:
    """Whether PNG export works; on the first call, start one kaleido browser for the whole process."""
    global _png_works
    if _png_works is None:
        import atexit

        try:
            import kaleido
            from choreographer.browsers.chromium import Chromium
        except ImportError as err:  # a partial install (a GPU image): the HTML is still written
            print(f"PNG export off: {err}; wrote HTML only")
            _png_works = False
            return False
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


def describe_runs(runs: pd.DataFrame | None, ref: Reference | None = None) -> str:
    """The provenance lines every figure carries: each run's method, preset, seed and config hash,
    then the reference's file, seeds, machine, commit and date when ``ref`` is shown (``runs``
    None: a figure of the reference alone).

    Example:
        >>> describe_runs(pd.DataFrame([dict(run="r1", method="coevokg", preset="tiny", seed=0, config_hash="ab12")]))
        'this run: r1 (coevokg) · preset tiny · seed 0 · config ab12'
    """
    if runs is None:
        lines = []
    elif runs.empty:
        lines = ["no runs in the store: the paper's numbers" + (" and the reference runs" if ref else " alone")]
    else:
        lines = [f"this run: {r.run} ({r.method}) · preset {r.preset} · seed {r.seed} · config {r.config_hash}"
                 for r in runs.itertuples()]
    return "<br>".join(lines + ([ref.describe()] if ref is not None else []))


# The newest test-split evaluation of each (model, dataset); model = "backbone/method" of the eval id.
_LATEST_TEST_EVALS = """
    labelled AS (SELECT * REPLACE (regexp_extract(eval_id, '^([^/]+/[^/]+)/', 1) AS model)
                 FROM eval_outcomes WHERE eval_id LIKE '%/test#%'),
    latest AS (SELECT model, dataset, arg_max(eval_id, created_at) AS eval_id
               FROM labelled GROUP BY model, dataset)"""


def eval_scores(con) -> pd.DataFrame:
    """Accuracy (%) per evaluated model and benchmark, latest evaluation of each (model, dataset); a
    dataset is split by question family, but the Table 1 suite's benchmarks (``tw-*``) are whole."""
    cols = ["model", "benchmark", "accuracy", "n"]
    if con is None or not _has(con, "eval_outcomes"):
        return pd.DataFrame(columns=cols)
    family = ("CASE WHEN q.family IS NULL OR q.family = '' OR e.dataset IN (SELECT unnest($suite)) THEN e.dataset "
              "ELSE e.dataset || ':' || q.family END" if _has(con, "questions") else "e.dataset")
    join = "LEFT JOIN questions q USING (question_id)" if _has(con, "questions") else ""
    return con.execute(f"""
        WITH {_LATEST_TEST_EVALS}
        SELECT e.model, {family} AS benchmark, 100 * avg(e.em) AS accuracy, count(*) AS n
        FROM labelled e JOIN latest USING (model, dataset, eval_id) {join}
        GROUP BY ALL ORDER BY model, benchmark""", {"suite": list(SUITE)} if "$suite" in family else {}).df()[cols]


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

def _layout(fig: go.Figure, title: str, runs: pd.DataFrame, height: int, note: str = "",
            ref: Reference | None = None) -> go.Figure:
    subtitle = describe_runs(runs, ref) + (f"<br>{note}" if note else "")
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


def legend_below(fig: go.Figure, panels_px: int, y: float) -> go.Figure:
    """Put the legend under the panels (``y``: its top, as a share of the panels' height below them)
    and size the figure so the panels keep ``panels_px`` pixels however many subtitle lines (runs,
    the reference) and legend rows there are: a fixed height squeezed six runs' panels until the
    paper's annotations overlapped.

    Example:
        >>> fig = go.Figure(go.Scatter(x=[0], y=[0], name="a")).update_layout(margin=dict(t=100))
        >>> fig = legend_below(fig, 300, -0.1)
        >>> fig.layout.height, fig.layout.margin.b
        (471, 71)
    """
    names = list(dict.fromkeys(t.name for t in fig.data if t.name and t.showlegend is not False))
    bottom = int(-y * panels_px) + 29 * _legend_rows(names) + 12  # a legend row is ~29 px at 13 px text
    top = fig.layout.margin.t if fig.layout.margin.t is not None else 100
    return fig.update_layout(height=panels_px + top + bottom, margin=dict(b=bottom),
                             legend=dict(orientation="h", x=0, xanchor="left", y=y, yanchor="top"))


def _legend_rows(names: list[str], width: int = PNG_WIDTH - 80) -> int:
    """Rows a horizontal legend of ``names`` takes at a notebook's width (~6 px a character, 40 px
    for an entry's symbol and gap; measured on the PNGs).

    Example:
        >>> _legend_rows(["paper (Qwen2.5-7B-Instruct)", "reference (tiny, 6 seeds, 56 rounds): CoEvoKG"])
        1
        >>> _legend_rows(["this run: a-long-run-name (coevokg)"] * 4)
        2
    """
    rows, used = (1, 0) if names else (0, 0)
    for name in names:
        w = 6 * len(name) + 40
        if used and used + w > width:
            rows, used = rows + 1, 0
        used += w
    return rows


def _cell(column: str, v, decimals: int = 1) -> str:
    """A table cell as text: p-values to 4 significant digits (the paper's 0.0011 is not 0.0),
    counts as integers, other numbers to ``decimals`` decimals (one, as the paper prints; two for
    means over seeds, whose 59.25 one decimal would print as 59.2), booleans as a tick or a dash.

    Example:
        >>> [_cell("p", 0.0011), _cell("wins", 5.0), _cell("avg", 52.44), _cell("delta", 1.5), _cell("c1", True)]
        ['0.0011', '5', '52.4', '+1.5', '✓']
        >>> _cell("avg", 59.25, decimals=2), _cell("delta", -0.35000000000000142, decimals=2)
        ('59.25', '-0.35')
    """
    if v is None or (not isinstance(v, str) and pd.isna(v)):
        return ""
    if isinstance(v, (bool, np.bool_)):
        return "✓" if v else "–"
    if column == "p" or column.startswith(("p (", "p vs")):  # "p (F1)", "p vs ...": a second test's p
        return f"{v:.4g}"
    if column in ("delta", "gain (Avg.)"):
        return f"{v:+.{decimals}f}"
    if column in ("wins", "losses", "n", "seeds"):
        return f"{int(v)}"
    return f"{v:.{decimals}f}" if isinstance(v, (float, np.floating)) else str(v)


def _table_trace(df: pd.DataFrame, decimals: int = 1) -> go.Table:
    """A ``go.Table`` whose column widths follow their longest text, so no name is clipped."""
    cells = {c: [_cell(str(c), v, decimals) for v in df[c]] for c in df.columns}
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
    the ``base`` row of the same backbone (as the paper's subscripts). Paper-tier evaluations have
    their own table (``table1_paper_tier``).

    Example:
        >>> table1_run(None).empty
        True
    """
    scores = eval_scores(con)
    scores = scores[[paper_tier_preset(m.split("/", 1)[0]) is None for m in scores.model]]
    if not scores.empty:
        scores = scores[~scores.benchmark.isin(SUITE)]  # the suite's evaluations have their own table
    if scores.empty:
        return pd.DataFrame()
    prefixes = {b.partition(":")[0] + ":" for b in scores.benchmark}
    if len(prefixes) == 1 and scores.benchmark.str.contains(":").all():  # tinyworld:bridge -> bridge
        scores = scores.assign(benchmark=scores.benchmark.str.removeprefix(prefixes.pop()))
    return _with_avg_and_gain(scores.pivot(index="model", columns="benchmark", values="accuracy"))


def _with_avg_and_gain(wide: pd.DataFrame) -> pd.DataFrame:
    """A model x benchmark table with ``Avg.`` (the macro average, as the paper's) and ``gain (Avg.)``
    over the same backbone's ``base`` row, indexed by backbone and method, rounded as the paper prints."""
    wide["Avg."] = wide.mean(axis=1)
    wide.index = pd.MultiIndex.from_tuples([tuple(m.split("/", 1)) for m in wide.index], names=["backbone", "method"])
    base_avg = {b: avg for (b, meth), avg in wide["Avg."].items() if meth == "base"}
    if base_avg:
        wide["gain (Avg.)"] = [avg - base_avg[b] if b in base_avg else np.nan for (b, _), avg in wide["Avg."].items()]
    wide.columns.name = None
    return wide.reset_index().round(1)


def table1_suite_run(con) -> pd.DataFrame:
    """Table 1 at the tiny tier from the store: a row per backbone and method evaluated on all six
    TinyWorld benchmarks (``workbench eval --suite table1``), their EM (%) in the paper's column
    order, ``Avg.`` (the macro over the six) and ``gain (Avg.)`` over the same backbone's base.

    Example:
        >>> table1_suite_run(None).empty
        True
    """
    scores = eval_scores(con)
    scores = scores[scores.benchmark.isin(SUITE)]
    if scores.empty:
        return pd.DataFrame()
    wide = scores.pivot(index="model", columns="benchmark", values="accuracy").dropna()  # all six evaluated
    if wide.empty:
        return pd.DataFrame()
    return _with_avg_and_gain(wide[[b for b in SUITE if b in wide]].copy())


def table1_suite_reference(suite_ref: Reference | None) -> pd.DataFrame:
    """Table 1 at the tiny tier from a reference file with a suite section
    (``Reference.table1``): EM per benchmark as means over seeds, Avg. with its 95% t interval,
    the gain over the base and the pooled sign tests.

    Example:
        >>> table1_suite_reference(None).empty
        True
    """
    if suite_ref is None:
        return pd.DataFrame()
    return suite_ref.table1().assign(backbone=suite_ref.preset).pipe(
        lambda t: t[["backbone", *[c for c in t.columns if c != "backbone"]]])


def paper_tier_preset(backbone: str) -> str | None:
    """The paper-tier preset an eval's backbone label ends in (``Qwen2.5-3B-Instruct-paper`` ->
    ``paper``; ``evaluate.eval_backbone`` appends it), or None for any other tier.

    Example:
        >>> paper_tier_preset("Qwen2.5-7B-Instruct-paper-7b"), paper_tier_preset("tiny-tiny")
        ('paper-7b', None)
    """
    for name in sorted(config.PAPER_MODELS, key=len, reverse=True):  # paper-7b before paper
        if backbone.endswith(f"-{name}"):
            return name
    return None


# Table 1's benchmark of each QA set name `workbench import qa --name` takes (README: nq triviaqa ...).
PAPER_BENCHMARKS = {b.lower(): b for b in paper.BENCHMARKS}


def table1_paper_tier(con) -> pd.DataFrame:
    """Table 1's rows from the store's paper-tier evaluations (preset ``paper*``): a row per
    backbone (the evaluated model's name) and method, the six benchmarks' EM (%) where evaluated (a
    dataset's families pooled), ``Avg.`` over the benchmarks evaluated, ``gain (Avg.)`` over the same
    backbone's base on the benchmarks both were evaluated on, and the paper's row on the same benchmarks (``paper Avg.``) with
    the difference, so a partial evaluation is compared like for like.

    Example:
        >>> table1_paper_tier(None).empty
        True
    """
    scores = eval_scores(con)
    if scores.empty:
        return pd.DataFrame()
    scores = scores.assign(preset=[paper_tier_preset(m.split("/", 1)[0]) for m in scores.model],
                           dataset=scores.benchmark.str.partition(":")[0])
    scores = scores[scores.preset.notna() & scores.dataset.isin(list(PAPER_BENCHMARKS))]
    if scores.empty:
        return pd.DataFrame()
    scores = scores.assign(right=scores.accuracy * scores.n)
    per = scores.groupby(["model", "preset", "dataset"], as_index=False)[["right", "n"]].sum()
    per = per.assign(accuracy=per.right / per.n, benchmark=per.dataset.map(PAPER_BENCHMARKS))
    printed = paper.table1().set_index(["backbone", "method", "benchmark"]).accuracy
    rows = []
    for (model, preset), part in per.groupby(["model", "preset"], sort=False):
        label, method = model.split("/", 1)
        method = NAMES.get(method, method)
        backbone = label.removesuffix(f"-{preset}")  # the evaluated model's own name, as eval_backbone wrote it
        row = {"backbone": backbone, "method": method, "preset": preset, **dict(zip(part.benchmark, part.accuracy))}
        row["Avg."] = part.accuracy.mean()
        theirs = [printed.get((backbone, method, b)) for b in part.benchmark]
        row["paper Avg."] = float(np.mean(theirs)) if all(t is not None for t in theirs) else np.nan
        row["vs paper"] = row["Avg."] - row["paper Avg."]
        rows.append(row)
    wide = pd.DataFrame(rows)
    base = {r["backbone"]: r for r in rows if r["method"] == NAMES["base"]}

    def gain(row) -> float:  # over the benchmarks both the row and its backbone's base were evaluated on
        common = [b for b in paper.BENCHMARKS if b in row and b in base.get(row["backbone"], {})]
        return float(np.mean([row[b] - base[row["backbone"]][b] for b in common])) if common else np.nan

    wide.insert(len(wide.columns) - 2, "gain (Avg.)", [gain(r) for r in rows])
    columns = ["backbone", "method", "preset", *[b for b in paper.BENCHMARKS if b in wide], "Avg.", "gain (Avg.)",
               "paper Avg.", "vs paper"]
    return wide[columns].round(1)


def table1_reference(ref: Reference | None) -> pd.DataFrame:
    """Table 1's rows from the reference runs: the base and each of Table 1's methods the file has,
    test macro EM (%) as the mean over seeds with its 95% t interval, and the gain over the base.
    The file keeps each run's macro average only, so there are no per-family columns.

    Example:
        >>> rows = table1_reference(reference.load()).set_index("method")
        >>> rows.loc["CoEvoKG", ["Avg.", "gain (Avg.)"]].round(2).tolist()
        [60.57, 2.77]
    """
    if ref is None:
        return pd.DataFrame()
    seeds, base = ref.test_em(), ref.base_test_em
    rows = [] if base is None else [{"backbone": ref.preset, "method": NAMES["base"], "Avg.": base}]
    for method in ("search_r1", "ssp", "coevokg"):  # Table 1's rows after the base
        if method in seeds.index:
            r = seeds.loc[method]
            gain = None if base is None else r["mean"] - base
            rows.append({"backbone": ref.preset, "method": NAMES[method], "seeds": r.n, "Avg.": r["mean"],
                         "95% low": r.low, "95% high": r.high, "gain (Avg.)": gain})
    return pd.DataFrame(rows, columns=["backbone", "method", "seeds", "Avg.", "95% low", "95% high", "gain (Avg.)"])


def table1(con=None, ref: Reference | None = None,
           suite_ref: Reference | None = None) -> tuple[dict[str, pd.DataFrame], go.Figure]:
    """Table 1 (main results): ``({"paper": df, "this run": df, "reference": df, ...}, figure)``,
    stacked; the tiny tier's Table 1 on the six TinyWorld benchmarks beside them where the store
    has suite evaluations ("this run: suite") or ``suite_ref`` (a ``tiny_table1_*`` reference
    file) is given ("reference: suite").

    Example:
        >>> tables, fig = table1()
        >>> tables["paper"].loc[3, "Avg."]  # Qwen2.5-3B-Instruct + CoEvoKG
        np.float64(42.1)
    """
    tables = {"paper": table1_paper(), "paper tier": table1_paper_tier(con), "this run": table1_run(con),
              "this run: suite": table1_suite_run(con), "reference": table1_reference(ref),
              "reference: suite": table1_suite_reference(suite_ref)}
    titles = {"paper tier": "your paper-tier runs (presets paper*): EM per benchmark evaluated, the paper's "
                            "row on the same benchmarks",
              "this run: suite": "your evaluations on the six TinyWorld benchmarks (workbench eval --suite table1)"}
    if ref:
        titles["reference"] = f"{ref.label}: test macro EM, mean over seeds, 95% t interval"
    if suite_ref:
        titles["reference: suite"] = (f"Table 1 at the tiny tier, {suite_ref.label}: EM on the six TinyWorld "
                                      "benchmarks, mean over seeds; Avg. 95% t interval; pooled sign tests")
    return tables, _tables_figure(tables, "Table 1: accuracy (%) per benchmark and macro average", store_runs(con),
                                  ref, titles)


def table2_run(con, buildup: dict[str, str] | None = None) -> pd.DataFrame:
    """Table 2's layout from the store: the build-up runs' macro averages, deltas and sign tests,
    all of one backbone (the one with the most build-up rows evaluated; a store holding several
    backbones or tiers never pairs evaluations across them)."""
    buildup = buildup or BUILDUP
    scores = eval_scores(con)
    if scores.empty:
        return pd.DataFrame()
    avg = scores.groupby("model").accuracy.mean()
    rows_of: dict[str, list[str]] = {}
    for model in avg.index:
        backbone, method = model.split("/", 1)
        if method in buildup:
            rows_of.setdefault(backbone, []).append(method)
    if not rows_of:
        return pd.DataFrame()
    backbone = max(sorted(rows_of), key=lambda b: len(rows_of[b]))
    rows, previous = [], None
    for method, label in buildup.items():
        if method not in rows_of[backbone]:
            continue
        run = f"{backbone}/{method}"  # the evaluated backbone/method of this variant
        row = {"variant": label, "run": run, "avg": avg[run], "delta": None, "p": None, "wins": None, "losses": None}
        if previous is not None:
            wins, losses = _paired(con, previous, run)
            row.update(delta=avg[run] - avg[previous], p=sign_test_p(wins, losses), wins=wins, losses=losses)
        rows.append(row)
        previous = run
    return pd.DataFrame(rows).round({"avg": 1, "delta": 1, "p": 4}) if rows else pd.DataFrame()


def table2_reference(ref: Reference | None, buildup: dict[str, str] | None = None) -> pd.DataFrame:
    """Table 2's layout from the reference runs: each build-up row's test macro EM (%) over seeds
    (mean, 95% t interval), its difference to the previous row and the Welch test between the two
    rows' seeds (``evaluate.across_seeds``; seeds, not questions, are the unit here).

    Example:
        >>> t = table2_reference(reference.load())
        >>> t.avg.round(2).tolist(), t.delta.round(2).tolist()[1:]
        ([57.97, 60.07, 60.73, 60.57], [2.1, 0.67, -0.17])
    """
    if ref is None:
        return pd.DataFrame()
    scores, rows, previous = ref.scores(), [], None
    for method, label in (buildup or BUILDUP).items():
        if method not in scores:
            continue
        pair = {m: scores[m] for m in (previous, method) if m is not None}
        r = across_seeds(pair, reference=previous).loc[method]
        rows.append({"variant": label, "seeds": r.n, "avg": r["mean"], "95% low": r.low, "95% high": r.high,
                     "delta": r.get("diff"), "p": r.get("p")})
        previous = method
    return pd.DataFrame(rows)


def table2(con=None, buildup: dict[str, str] | None = None,
           ref: Reference | None = None) -> tuple[dict[str, pd.DataFrame], go.Figure]:
    """Table 2 (build-up ablation with deltas and p-values vs the previous row): the paper's (paired
    sign test), this store's (paired sign test) and the reference's (Welch over seeds), stacked.

    Example:
        >>> tables, _ = table2()
        >>> tables["paper"].delta.tolist()[1:]
        [1.5, 1.1, 0.6]
    """
    buildup = buildup or BUILDUP
    tables = {"paper": paper.table2().drop(columns="provenance"), "this run": table2_run(con, buildup),
              "reference": table2_reference(ref, buildup)}
    titles = {"reference": f"{ref.label}: mean test EM over seeds, 95% t interval; Δ and Welch p vs previous row"
              } if ref else {}
    runs = store_runs(con)
    buildup_runs = runs[runs.method.isin(list(buildup))]  # the build-up runs, not every run
    return tables, _tables_figure(tables, "Table 2: build-up ablation (Δ and sign test vs previous row)",
                                  buildup_runs, ref, titles)


def _tables_figure(tables: dict[str, pd.DataFrame], title: str, runs: pd.DataFrame, ref: Reference | None = None,
                   titles: dict[str, str] | None = None) -> go.Figure:
    """The tables stacked, each as tall as its rows (header 28 px, a row 24 px, its title 40 px),
    each under its key or its entry in ``titles``; the reference's means with two decimals."""
    shown = {k: v for k, v in tables.items() if not v.empty}
    px_of = [28 + 24 * len(df) + 40 for df in shown.values()]
    fig = make_subplots(rows=len(shown), cols=1, specs=[[{"type": "table"}]] * len(shown),
                        subplot_titles=[(titles or {}).get(k, k) for k in shown], row_heights=px_of,
                        vertical_spacing=0.04)
    for i, (side, df) in enumerate(shown.items(), start=1):
        fig.add_trace(_table_trace(df, decimals=table_decimals(side)), row=i, col=1)
    top, bottom = _top_margin(describe_runs(runs, ref)), 30
    fig = _layout(fig, title, runs, height=int(sum(px_of) * (1 + 0.04 * (len(shown) - 1))) + top + bottom, ref=ref)
    return fig.update_layout(margin=dict(b=bottom))


def figure3(con=None, ref: Reference | None = None) -> go.Figure:
    """Figure 3 (training dynamics): left what the paper's text states, right this store's runs and,
    given ``ref``, the reference runs, per round.

    Rows: a validation accuracy; b chains write-back added to the pool since G_0 and the seed
    fallback rate; c KL and entropy. On the right each run has one colour; the second quantity of a
    panel is dashed, on the right axis. The reference is its mean over seeds (a line without markers)
    and the seeds' range (a faint band behind the solid quantity; the dashed one's is in its hover):
    CoEvoKG in every panel and, in panel a, Search-R1 and SSP too (the paper's Figure 3a compares
    the three). The legend sits under the panels, covering none.

    Example:
        >>> fig = figure3(ref=reference.load())
        >>> sorted({t.name for t in fig.data if t.showlegend})[0]
        'reference (tiny, 6 seeds, 56 rounds): CoEvoKG'
    """
    runs, metrics = store_runs(con), run_metrics(con)
    runs = runs[runs.run.isin(set(metrics.run))] if not metrics.empty else runs.iloc[0:0]
    right = _right_title(not runs.empty, ref is not None)
    cols = 2 if right else 1
    specs = [[{"secondary_y": True}] * cols for _ in range(3)]
    titles = []
    for panel in ("a · validation accuracy", "b · pool, seed fallback", "c · KL and entropy"):
        titles += [f"{panel} (paper)"] + ([f"{panel} ({right})"] if right else [])
    fig = make_subplots(rows=3, cols=cols, specs=specs, subplot_titles=titles,
                        horizontal_spacing=0.16, vertical_spacing=0.12)
    _figure3_paper(fig)
    if right:
        last = _figure3_reference(fig, ref) if ref is not None else 1
        if not runs.empty:  # drawn after the reference: a run's markers lie on top of the bands
            _figure3_run(fig, runs, metrics.assign(chains_added=chains_added(metrics)))
            last = max(last, int(metrics["round"].max()))
        _figure3_axes(fig, last)
    fig = _layout(fig, "Figure 3: training dynamics", runs, height=1000, ref=ref,
                  note="left: what the paper's text states (Qwen2.5-7B-Instruct; it publishes no curve data)")
    return legend_below(fig, panels_px=800, y=-0.06)


def _right_title(runs: bool, ref: bool) -> str:
    """What a figure's right-hand panels show: ``this run``, ``reference``, both, or nothing."""
    return {(True, True): "run, reference", (True, False): "this run", (False, True): "reference"}.get((runs, ref), "")


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
_F3_PANELS = [(1, "val_em", False), (2, "chains_added", False), (2, "seed_fallback_rate", True),
              (3, "kl", False), (3, "entropy", True)]
_F3_AXES = [("val EM", None), ("chains added (solid)", "seed fallback (dashed)"), ("KL (solid)", "entropy (dashed)")]
# The reference rows drawn in each of Figure 3's rows: Figure 3a compares Search-R1, SSP and CoEvoKG;
# pool growth and seed fallback exist for CoEvoKG alone, and KL and entropy are shown for it.
_F3_REFERENCE = {1: ("coevokg", "search_r1", "ssp"), 2: ("coevokg",), 3: ("coevokg",)}


def _figure3_run(fig: go.Figure, runs: pd.DataFrame, metrics: pd.DataFrame) -> None:
    for r in runs.itertuples():  # r.Index: the run's place in the store, its colour everywhere
        m, first = metrics[metrics.run == r.run], True
        for row, key, secondary in _F3_PANELS:
            if key in m and m[key].notna().any():
                fig.add_trace(go.Scatter(x=m["round"], y=m[key], mode="lines+markers",
                                         name=f"this run: {r.run} ({r.method})",
                                         line=dict(color=run_colour(r.Index), dash="dash" if secondary else "solid"),
                                         legendgroup=r.run, showlegend=first, hovertemplate=f"{key}: %{{y:.4g}}<br>round %{{x}}"),
                              row=row, col=2, secondary_y=secondary)
                first = False


def _figure3_reference(fig: go.Figure, ref: Reference) -> int:
    """The reference's mean and seed band in Figure 3's right column; returns its last round."""
    shown = set()
    for row, key, secondary in _F3_PANELS:
        for method in (m for m in _F3_REFERENCE[row] if m in ref.methods):
            traces = band_traces(ref.band(key, method), f"{ref.label}: {NAMES.get(method, method)}",
                                 REFERENCE_COLOURS.get(method, "#555555"), key,
                                 dash="dash" if secondary else "solid", legend=method not in shown)
            # the dashed quantity's band would cover the solid one's: its seed range is in its hover
            for trace in traces[1:] if secondary else traces:
                fig.add_trace(trace, row=row, col=2, secondary_y=secondary)
            shown.add(method)
    return ref.rounds - 1


def band_traces(band: pd.DataFrame, name: str, colour: str, key: str, dash: str = "solid",
                legend: bool = True) -> list[go.Scatter]:
    """A mean line over seeds and the seeds' range as a faint band behind it (``Reference.band``'s
    columns round, mean, low, high), one legend entry for both.

    Example:
        >>> band = pd.DataFrame(dict(round=[0, 1], mean=[0.5, 0.6], low=[0.4, 0.5], high=[0.6, 0.7]))
        >>> [t.fill for t in band_traces(band, "ref", "#333333", "val_em")]
        ['toself', None]
    """
    band = band.dropna(subset=["mean"])
    fill = go.Scatter(x=[*band["round"], *band["round"][::-1]], y=[*band.high, *band.low[::-1]], fill="toself",
                      fillcolor=_rgba(colour, 0.15), line=dict(width=0), hoverinfo="skip", name=name,
                      legendgroup=name, showlegend=False)
    mean = go.Scatter(x=band["round"], y=band["mean"], mode="lines", name=name, legendgroup=name, showlegend=legend,
                      line=dict(color=colour, width=2.5, dash=dash), customdata=band[["low", "high"]],
                      hovertemplate=f"{key}: %{{y:.4g}} (seeds %{{customdata[0]:.4g}}-%{{customdata[1]:.4g}})"
                                    "<br>round %{x}")
    return [fill, mean]


def _rgba(colour: str, alpha: float) -> str:
    """``#rrggbb`` as ``rgba(r, g, b, alpha)``.

    Example:
        >>> _rgba("#ff8000", 0.5)
        'rgba(255, 128, 0, 0.5)'
    """
    r, g, b = (int(colour[i:i + 2], 16) for i in (1, 3, 5))
    return f"rgba({r}, {g}, {b}, {alpha})"


def _figure3_axes(fig: go.Figure, last: int) -> None:
    """Figure 3's right column: whole rounds up to ``last``, each axis titled, shares from 0 to 1."""
    for row, (left, right) in enumerate(_F3_AXES, start=1):
        whole_ticks(fig, last, title_text="round", row=row, col=2)
        fig.update_yaxes(title_text=left, rangemode="tozero", row=row, col=2, secondary_y=False)
        if right:
            fig.update_yaxes(title_text=right, tickformat=".4~g", nticks=5, tickmode="auto", showgrid=False,
                             row=row, col=2, secondary_y=True)
    # validation EM from its data, not from 0: the rows of the reference differ by ~3 points of ~55
    fig.update_yaxes(rangemode="normal", tickformat=".3~g", row=1, col=2, secondary_y=False)
    fig.update_yaxes(range=[0, 1.02], row=2, col=2, secondary_y=True)  # the seed fallback rate is a share


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


def figure4(con=None, ref: Reference | None = None) -> go.Figure:
    """Figure 4: average hops and p_s of generated vs seed questions, the paper's bars beside the
    reference CoEvoKG runs' (given ``ref``) and this store's runs'.

    A run's values are the means over its rounds of ``avg_hops_generated``, ``avg_hops_seed``,
    ``p_s_generated`` and ``p_s_seed``; the reference's bar is the mean of its seeds' values, its
    whisker their range (its value mid-bar, clear of the whisker).

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
    if ref is not None and "coevokg" in ref.methods:
        _figure4_reference(fig, ref)
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
    fig.update_traces(textposition="outside", textangle=0, cliponaxis=False, selector=lambda t: t.error_y.array is None)
    fig.update_layout(barmode="group", uniformtext=dict(minsize=9, mode="hide"))
    fig = _layout(fig, "Figure 4: generated vs seed questions", runs[runs.run.isin([r.run for r in shown])],
                  height=520, ref=ref)
    return legend_below(fig, panels_px=340, y=-0.12)


def _figure4_reference(fig: go.Figure, ref: Reference, method: str = "coevokg") -> None:
    """The reference ``method``'s Figure 4 bars: per seed the mean over rounds (as a run's bars),
    then the mean over seeds, with the seeds' range as a whisker and the value in the middle of the
    bar (above it, or at its top inside, the whisker would cross it)."""
    m = ref.of(method)
    keys = [f"{metric}_{g}" for metric in ("avg_hops", "p_s") for g in ("generated", "seed")]
    per_seed = m[keys].apply(pd.to_numeric, errors="coerce").groupby(m.run).mean()
    name = f"{ref.label}: {NAMES.get(method, method)}"
    for col, metric in enumerate(("avg_hops", "p_s"), start=1):
        cols = [f"{metric}_{g}" for g in ("generated", "seed")]
        mean, low, high = per_seed[cols].mean(), per_seed[cols].min(), per_seed[cols].max()
        fig.add_trace(go.Bar(x=["generated", "seed"], y=mean.tolist(), name=name, legendgroup=name,
                             showlegend=col == 1, marker_color=REFERENCE_COLOURS.get(method, "#555555"),
                             error_y=dict(type="data", array=(high - mean).tolist(), arrayminus=(mean - low).tolist(),
                                          color="#999999"),
                             text=[f"{v:#.3g}" for v in mean], textposition="inside", insidetextanchor="middle",
                             textangle=0,
                             customdata=list(zip(low, high)),
                             hovertemplate="%{y:.4g} (seeds %{customdata[0]:.3g}-%{customdata[1]:.3g})"),
                      row=1, col=col)


ANSWER_GROUPS = ("generated", "seed")
# Answers that name no typed entity, in grey in every panel (loop.LITERAL_ANSWER / UNTYPED_ANSWER)
ANSWER_TYPE_GREYS = {"literal": "#7f7f7f", "untyped": "#c7c7c7"}


def answer_type_shares(metrics: pd.DataFrame) -> pd.DataFrame:
    """The share of each answer type among the generated and the seed questions' solver slots:
    ``run_metrics``' ``answer_types_generated`` / ``answer_types_seed`` counts summed over the rows
    of ``metrics`` (rounds, runs), one row per group (all shares 0 for a group without slots, as
    generated questions in a round where every slot fell back), a ``slots`` column, then the types
    by their overall count. Rows without the counts (runs from before they were logged, the shipped
    reference files) are left out: empty when none has them.

    Example:
        >>> m = pd.DataFrame([dict(run="a", round=0, answer_types_generated={"city": 1},
        ...                        answer_types_seed={"city": 1, "year": 3})])
        >>> answer_type_shares(m).to_dict("index")
        {'generated': {'slots': 1, 'year': 0.0, 'city': 1.0}, 'seed': {'slots': 4, 'year': 0.75, 'city': 0.25}}
    """
    counts = {}
    for group in ANSWER_GROUPS:
        key = f"answer_types_{group}"
        total = Counter()
        for c in metrics[key] if key in metrics else []:
            total.update(c if isinstance(c, dict) else {})
        counts[group] = total
    if not any(sum(c.values()) for c in counts.values()):
        return pd.DataFrame()
    table = pd.DataFrame(counts).T.reindex(list(ANSWER_GROUPS)).fillna(0)
    order = table.sum().sort_values(ascending=False, kind="stable").index
    slots = table.sum(axis=1).astype(int)
    return pd.concat([slots.rename("slots"), table[order].div(slots.where(slots > 0, 1), axis=0)], axis=1)


def _type_colour(i: int) -> str:
    """The ``i``-th answer type's colour: TinyWorld has 12 types, more than the runs' palette holds."""
    import plotly.express as px

    return px.colors.qualitative.Dark24[i % len(px.colors.qualitative.Dark24)]


def answer_types(con=None, run: str | None = None, ref: Reference | None = None,
                 method: str = "coevokg") -> go.Figure:
    """Answer types of generated vs seed questions (issue 15, beside Figure 4's hops and p_s; the
    paper reports none): stacked shares of each group's solver slots by the type of the entity
    their answer names (``answer_type_shares``), for ``run`` (default: the store's latest run that
    logged them) beside the reference ``method``'s runs where the reference file has the counts,
    one colour per type in both panels.

    Example:
        >>> [a.text for a in answer_types().layout.annotations]
        ['no answer types recorded']
    """
    runs, metrics = store_runs(con), run_metrics(con)
    if run is None:
        logged = [r for r in runs.run if not answer_type_shares(metrics[metrics.run == r]).empty]
        run = logged[-1] if logged else None
    panels = []
    if run is not None and not (mine := answer_type_shares(metrics[metrics.run == run])).empty:
        panels.append((f"this run: {run}", mine))
    else:
        run = None
    if ref is not None and method in ref.methods and not (theirs := answer_type_shares(ref.of(method))).empty:
        panels.append((f"reference {NAMES.get(method, method)}, {len(ref.seeds)} seeds pooled", theirs))
    else:
        ref = None  # the subtitle names a reference only where its panel is drawn
    fig = make_subplots(rows=1, cols=max(1, len(panels)), shared_yaxes=True, horizontal_spacing=0.06,
                        subplot_titles=[title for title, _ in panels] or ["no answer types recorded"])
    types = list(dict.fromkeys(t for _, shares in panels for t in shares.columns[1:]))
    for col, (_, shares) in enumerate(panels, start=1):
        x = [f"{group} ({n} slots)" for group, n in shares.slots.items()]
        for i, kind in enumerate(types):
            if kind in shares:
                fig.add_trace(go.Bar(x=x, y=shares[kind], name=kind, legendgroup=kind,
                                     showlegend=col == _first_panel(panels, kind),
                                     marker_color=ANSWER_TYPE_GREYS.get(kind, _type_colour(i)),
                                     hovertemplate=f"{kind}: %{{y:.1%}}<extra></extra>"), row=1, col=col)
    fig.update_yaxes(title_text="share of slots", range=[0, 1], tickformat=".0%", row=1, col=1)
    fig.update_layout(barmode="stack", bargap=0.3)
    shown = runs[runs.run == run] if run is not None else runs.iloc[0:0]
    fig = _layout(fig, "Answer types: generated vs seed questions", shown, height=520, ref=ref)
    return legend_below(fig, panels_px=330, y=-0.15)


def gate_verdicts(metrics: pd.DataFrame) -> pd.DataFrame:
    """Per round, the share of the proposer's candidates the gate admitted, passed beyond its top-k
    and rejected for each reason (``run_metrics``' ``admitted_rate``, ``passed_rate`` and
    ``rejections`` counts), averaged over the runs in ``metrics``; rounds without ``passed_rate``
    (runs from before it was logged) are left out. Each row sums to 1, or 0 in a round without
    candidates (Search-R1).

    Example:
        >>> m = pd.DataFrame([dict(run="a", round=0, admitted_rate=0.25, passed_rate=0.5,
        ...                        rejections={"leak": 1, "weak": 3})])
        >>> gate_verdicts(m).round(3).to_dict("records")
        [{'admitted': 0.25, 'passed, beyond top-k': 0.25, 'weak': 0.375, 'leak': 0.125}]
    """
    if metrics.empty or "passed_rate" not in metrics:
        return pd.DataFrame()
    rows = []
    for r in metrics[metrics.passed_rate.notna()].to_dict("records"):
        rejected = r.get("rejections") if isinstance(r.get("rejections"), dict) else {}
        # a share of all candidates: the rejected ones are (1 - passed_rate) of them, split by count
        per = (1 - r["passed_rate"]) / sum(rejected.values()) if rejected and sum(rejected.values()) else 0.0
        rows.append({"run": r["run"], "round": r["round"], "admitted": r.get("admitted_rate") or 0.0,
                     "passed, beyond top-k": r["passed_rate"] - (r.get("admitted_rate") or 0.0),
                     **{reason: n * per for reason, n in rejected.items()}})
    if not rows:
        return pd.DataFrame()
    shares = pd.DataFrame(rows).fillna(0.0).drop(columns="run").groupby("round").mean()
    reasons = shares.columns[2:]
    return shares[[*shares.columns[:2], *shares[reasons].sum().sort_values(ascending=False).index]]


def gate_rejections(con=None, run: str | None = None, ref: Reference | None = None,
                    method: str = "coevokg") -> go.Figure:
    """The quality gate's verdicts per round (ours; the paper reports none): stacked shares of the
    proposer's candidates admitted, passed beyond the gate's top-k, and rejected by each reason
    (``gate_verdicts``), for ``run`` (default: the store's latest run with candidates) beside the
    reference ``method``'s runs (mean over seeds), one colour per verdict in both panels.

    Example:
        >>> fig = gate_rejections(ref=reference.load())
        >>> [t.name for t in fig.data if t.showlegend][:3]
        ['admitted', 'passed, beyond top-k', 'weak']
    """
    runs, metrics = store_runs(con), run_metrics(con)
    run = run if run is not None else _latest_with_candidates(runs, metrics)
    panels = []
    if run is not None and not (mine := gate_verdicts(metrics[metrics.run == run])).empty:
        panels.append((f"this run: {run}", mine))
    else:
        run = None
    if ref is not None and method in ref.methods:
        panels.append((f"reference {NAMES.get(method, method)}, mean of {len(ref.seeds)} seeds",
                       gate_verdicts(ref.of(method))))
    fig = make_subplots(rows=1, cols=max(1, len(panels)), shared_yaxes=True, horizontal_spacing=0.06,
                        subplot_titles=[title for title, _ in panels] or ["no gate verdicts recorded"])
    verdicts = list(dict.fromkeys(v for _, shares in panels for v in shares.columns))
    for col, (_, shares) in enumerate(panels, start=1):
        for i, verdict in enumerate(verdicts):
            if verdict in shares:
                fig.add_trace(go.Bar(x=shares.index, y=shares[verdict], name=verdict, legendgroup=verdict,
                                     showlegend=col == _first_panel(panels, verdict),
                                     marker_color=GATE_COLOURS.get(verdict, run_colour(i)),
                                     hovertemplate=f"{verdict}: %{{y:.1%}}<br>round %{{x}}<extra></extra>"),
                              row=1, col=col)
        whole_ticks(fig, int(shares.index.max()) if len(shares) else 1, title_text="round", row=1, col=col)
    fig.update_yaxes(title_text="share of candidates", range=[0, 1], tickformat=".0%", row=1, col=1)
    fig.update_layout(barmode="stack", bargap=0.15)
    shown = runs[runs.run == run] if run is not None else runs.iloc[0:0]
    fig = _layout(fig, "Gate verdicts per round: admitted, passed, rejected by reason", shown, height=520, ref=ref)
    return legend_below(fig, panels_px=330, y=-0.2)


def _first_panel(panels: list, verdict: str) -> int:
    """The first panel (1-based) that has ``verdict``: its legend entry is drawn there, once."""
    return next(i for i, (_, shares) in enumerate(panels, start=1) if verdict in shares)


def _latest_with_candidates(runs: pd.DataFrame, metrics: pd.DataFrame) -> str | None:
    """The store's newest run whose rounds logged gate verdicts with at least one candidate."""
    if metrics.empty or "passed_rate" not in metrics:
        return None
    has = metrics[metrics.passed_rate.notna()]
    rejected = has.rejections.map(lambda r: isinstance(r, dict) and bool(r)) if "rejections" in has else False
    has = has[(has.passed_rate > 0) | rejected]
    candidates = [r for r in runs.run if r in set(has.run)]
    return candidates[-1] if candidates else None


def table_caption(name: str, side: str, con=None, ref: Reference | None = None) -> str:
    """The first line of a saved table: the paper's numbers and where they are transcribed from,
    the reference runs' provenance (``side`` "reference"), or the store's runs (preset, seed,
    config of each).

    Example:
        >>> table_caption("table2_buildup", "paper")
        "table2_buildup — the paper's numbers (seed 000, transcribed in data/paper/ with provenance)"
    """
    if side == "paper":
        return f"{name} — the paper's numbers (seed 000, transcribed in data/paper/ with provenance)"
    if side.startswith("reference") and ref is not None:
        return f"{name} — {ref.label}, mean over seeds with a 95% t interval; {ref.describe()}"
    return f"{name} — {describe_runs(store_runs(con)).replace('<br>', '; ')}"


# build_all's file suffix of each table side
_SUFFIX = {"paper": "paper", "paper tier": "paper_tier", "this run": "run", "reference": "reference",
           "this run: suite": "run_suite", "reference: suite": "reference_suite"}


def build_all(db: str | Path | None = None, paper_only: bool = False, out_dir: str | Path | None = None,
              with_reference: bool = True, reference_file: str = reference.DEFAULT,
              table1_file: str | None = None) -> list[Path]:
    """Build every paper table and figure and the gate's verdicts: the paper vs the runs in ``db``
    vs the shipped reference runs (``reference.load(reference_file)``); save them and return the paths.

    ``db`` defaults to ``paths.default_db()``; ``paper_only`` shows the paper's numbers alone (no
    store, no reference); ``with_reference=False`` leaves the reference out.

    Example:
        >>> written = build_all(paper_only=True, out_dir=tmp)  # doctest: +SKIP
    """
    db = db if db is not None else paths.default_db()
    ref = reference.load(reference_file) if with_reference and not paper_only else None  # a bad name: before the store
    suite_ref = reference.load_table1(table1_file) if with_reference and not paper_only else None
    con = None if paper_only else open_store(db)
    if not paper_only:
        print(f"store: {db}" if con is not None else f"no store at {db}: the paper's numbers"
              + (" and the reference runs" if ref else " alone"))
    written: list[Path] = []
    try:
        for name, builder in (("table1_main_results", table1), ("table2_buildup", table2)):
            tables, fig = builder(con, ref=ref) if builder is table2 else builder(con, ref=ref, suite_ref=suite_ref)
            for side, df in tables.items():
                if not df.empty:
                    shown = suite_ref if side == "reference: suite" else ref
                    written += save_table(df, f"{name}_{_SUFFIX[side]}", table_caption(name, side, con, shown),
                                          out_dir, table_decimals(side))
            written += save_fig(fig, name, out_dir)
        written += save_fig(figure3(con, ref), "figure3_training_dynamics", out_dir)
        written += save_fig(figure4(con, ref), "figure4_generated_vs_seed", out_dir)
        if con is not None or ref is not None:  # ours, not the paper's: nothing to show from the paper alone
            written += save_fig(gate_rejections(con, ref=ref), "gate_rejections", out_dir)
        if (types := answer_types(con, ref=ref)).data:  # ours: where a run or the reference logged answer types
            written += save_fig(types, "answer_types", out_dir)
        if con is not None and not topology_success(run_metrics(con)).empty:  # EoG runs (seed 004, Fig. 7)
            written += save_fig(topology_curriculum(con), "topology_curriculum", out_dir)
    finally:
        if con is not None:
            con.close()
    return written


# ------------------------------------------------------------------ EoG's topology curriculum (seed 004)

TOPOLOGY_PATTERNS = ("1p", "2p", "3p", "2i", "ip", "pi")  # kg.topology.PATTERNS (figures sits above kg)
SIMPLE_TOPOLOGIES = ("1p", "2p", "2i")  # ours: EoG's Fig. 7b splits simple from complex without naming them
TOPOLOGY_COLOURS = dict(zip(TOPOLOGY_PATTERNS, ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b")))


def topology_success(metrics: pd.DataFrame, runs: list[str] | None = None) -> pd.DataFrame:
    """Per round and topology, EoG's synthesis success rate (seed 004, Fig. 7): the queries with an
    admitted question over the queries the proposer wrote for (``run_metrics``' ``topology_admitted``
    and ``topology_tasks``), pooled over ``runs`` (default: every run that logged them); plus
    ``simple`` (1p 2p 2i pooled, ours) and ``complex`` (3p ip pi). Columns: round, topology,
    admitted, tasks, success.

    Example:
        >>> m = pd.DataFrame([dict(run="a", round=0, topology_tasks={"1p": 2, "3p": 2}, topology_admitted={"1p": 1, "3p": 0}),
        ...                   dict(run="b", round=0, topology_tasks={"1p": 2}, topology_admitted={"1p": 2})])
        >>> topology_success(m).set_index("topology").success.to_dict()
        {'1p': 0.75, '3p': 0.0, 'simple': 0.75, 'complex': 0.0}
    """
    if metrics.empty or "topology_tasks" not in metrics:
        return pd.DataFrame(columns=["round", "topology", "admitted", "tasks", "success"])
    has = metrics[metrics.topology_tasks.map(lambda v: isinstance(v, dict))]
    if runs is not None:
        has = has[has.run.isin(runs)]
    rows = [{"round": int(r["round"]), "topology": p, "tasks": n, "admitted": (r.get("topology_admitted") or {}).get(p, 0)}
            for r in has.to_dict("records") for p, n in r["topology_tasks"].items()]
    if not rows:
        return pd.DataFrame(columns=["round", "topology", "admitted", "tasks", "success"])
    df = pd.DataFrame(rows)
    df = pd.concat([df, df.assign(topology=df.topology.map(lambda p: "simple" if p in SIMPLE_TOPOLOGIES else "complex"))])
    order = {p: i for i, p in enumerate((*TOPOLOGY_PATTERNS, "simple", "complex"))}
    out = df.groupby(["round", "topology"], as_index=False)[["admitted", "tasks"]].sum()
    out["success"] = out.admitted / out.tasks
    return out.sort_values(["round", "topology"], key=lambda c: c.map(order) if c.name == "topology" else c,
                           ignore_index=True)[["round", "topology", "admitted", "tasks", "success"]]


def topology_curriculum(con=None, runs: list[str] | None = None, ref: Reference | None = None) -> go.Figure:
    """EoG's Fig. 7 analogue: the proposer's synthesis success rate per round, (a) simple vs
    complex topologies and (b) per topology (``topology_success``), pooled over ``runs`` (default:
    every run in the store that logged topology tasks: ``--method eog`` and its ablations). Given
    ``ref`` (a shipped reference file), its runs instead of the store's, e.g. its four ``eog`` seeds.

    Example:
        >>> topology_curriculum().layout.annotations[0].text
        'no topology tasks recorded'
        >>> eog = reference.load("tiny_eog_900s.json")
        >>> topology_curriculum(runs=["eog_s0", "eog_s1"], ref=eog).layout.annotations[0].text
        '(a) simple vs complex'
    """
    all_runs, metrics = (None, ref.metrics) if ref is not None else (store_runs(con), run_metrics(con))
    success = topology_success(metrics, runs)
    shown_runs = sorted(set(metrics.run[metrics.get("topology_tasks", pd.Series(dtype=object)).map(
        lambda v: isinstance(v, dict))])) if not success.empty else []
    shown_runs = [r for r in shown_runs if runs is None or r in runs]
    titles = (["(a) simple vs complex", "(b) per topology"] if not success.empty else ["no topology tasks recorded"])
    fig = make_subplots(rows=1, cols=len(titles), shared_yaxes=True, horizontal_spacing=0.06, subplot_titles=titles)
    for col, names in ((1, ("simple", "complex")), (2, TOPOLOGY_PATTERNS)):
        for name in names:
            part = success[success.topology == name]
            if part.empty:
                continue
            fig.add_trace(go.Scatter(x=part["round"], y=part.success, mode="lines+markers", name=name,
                                     line=dict(color=TOPOLOGY_COLOURS.get(name, "#333" if name == "simple" else "#999"),
                                               dash="solid" if name != "complex" else "dash"),
                                     customdata=np.stack([part.admitted, part.tasks], axis=1),
                                     hovertemplate=f"{name}: %{{y:.0%}} (%{{customdata[0]}} of %{{customdata[1]}})"
                                                   "<br>round %{x}<extra></extra>"), row=1, col=col)
            whole_ticks(fig, int(success["round"].max()), title_text="round", row=1, col=col)
    fig.update_yaxes(title_text="synthesis success (admitted / queries)", range=[0, 1.05], tickformat=".0%", row=1, col=1)
    shown = None if all_runs is None else all_runs[all_runs.run.isin(shown_runs)]
    note = "" if ref is None else f"{ref.label}: " + (", ".join(shown_runs) if len(shown_runs) <= 4
                                                      else f"{len(shown_runs)} runs")
    fig = _layout(fig, "Topology curriculum: synthesis success per topology (EoG, Fig. 7 analogue)", shown,
                  height=480, note=note, ref=ref)
    return legend_below(fig, panels_px=320, y=-0.2)


# Seed 002's tables: which workbench row (a reference file's method, or the base) stands beside
# which printed row. Table 7's ratios and Table 15's Dr. Zero have none; Tables 9 and 15 are built
# from the Dr. Free runs themselves (its iterations, its seeds).
DRFREE_ROWS = {
    1: {"SFT": "base", "R1-Instruct": "search_r1"},
    2: {"Dr. Free": "drfree", "Difficulty Only": "drfree_difficulty", "IG + Difficulty": "drfree_ig_difficulty",
        "w/o KG": "drfree_wo_kg", "w/o Proposer Training": "drfree_no_proposer_training"},
    3: {"Dr. Free (full B)": "drfree", "w/o one-shot": "drfree_wo_one_shot", "w/o closed-book": "drfree_wo_closed_book",
        "w/o per-hop": "drfree_wo_per_hop", "w/o source-only": "drfree_wo_source_only"},
}


def drfree_table_reference(number: int, ref: Reference | None) -> pd.DataFrame:
    """The reference runs' rows beside seed 002's Table ``number``: test macro EM (%) over seeds
    with a 95% t interval and the Welch test against Dr. Free (Tables 1-3, :data:`DRFREE_ROWS`;
    the base is one evaluation); Table 9: per iteration the validation EM (%) of the run's kept
    checkpoint (its best so far, ``iterations/iter-K``) over seeds; Table 15: each seed's Dr. Free
    run, then their mean and sample sd. Empty where the file holds no such runs.

    Example:
        >>> drfree_table_reference(7, reference.load("tiny_drfree_20rounds.json")).empty
        True
    """
    if ref is None:
        return pd.DataFrame()
    scores = ref.scores()
    if number == 15:
        if "drfree" not in scores:
            return pd.DataFrame()
        ev = ref.evaluations[ref.evaluations.method == "drfree"].sort_values("seed")
        rows = [{"row": f"Dr. Free (seed {s})", "test EM": em} for s, em in zip(ev.seed, ev.test_macro_em)]
        rows.append({"row": "Dr. Free (mean ± sd)", "test EM": ev.test_macro_em.mean(),
                     "sd": ev.test_macro_em.std(ddof=1)})
        return pd.DataFrame(rows)
    if number == 9:
        if "drfree" not in scores or "iteration" not in ref.metrics:
            return pd.DataFrame()
        m = ref.of("drfree").dropna(subset=["iteration"])
        rows = []
        for k in sorted(m.iteration.unique()):
            best = 100 * m[m.iteration <= k].groupby("seed").val_em.max()
            rows.append({"row": f"Dr. Free Iter {int(k)}", "seeds": len(best), "val EM (kept checkpoint)": best.mean(),
                         "seeds' low": best.min(), "seeds' high": best.max()})
        return pd.DataFrame(rows)
    table = ref.test_em(reference="drfree" if "drfree" in scores else None)
    rows = []
    for label, method in DRFREE_ROWS.get(number, {}).items():
        if method == "base" and ref.base_test_em is not None:
            rows.append({"paper row": label, "workbench row": "base (the warm start, SFT)", "seeds": 1,
                         "test EM": ref.base_test_em})
        elif method in table.index:
            r = table.loc[method]
            rows.append({"paper row": label, "workbench row": method, "seeds": int(r.n), "test EM": r["mean"],
                         "95% low": r.low, "95% high": r.high,
                         **({"Δ vs Dr. Free": r.get("diff"), "Welch p": r.get("p")} if method != "drfree" else {})})
    return pd.DataFrame(rows)


def drfree_table(number: int, ref: Reference | None = None) -> tuple[dict[str, pd.DataFrame], go.Figure]:
    """Seed 002's Table ``number`` (1, 2, 3, 7, 9 or 15) as printed (EM in %, ``paper.drfree_table_wide``)
    above the reference runs' matching rows (:func:`drfree_table_reference`), as notebook 07 shows
    CoEvoKG's tables.

    Example:
        >>> tables, _ = drfree_table(3)
        >>> tables["paper"]["Avg."].tolist()[:2]
        [37.5, 36.0]
    """
    wide = (100 * paper.drfree_table_wide(number)).round(2).reset_index()
    tables = {"paper": wide, "reference": drfree_table_reference(number, ref)}
    what = {9: "validation EM (%) of each iteration's kept checkpoint, over seeds",
            15: "test macro EM (%) per seed, mean and sample sd"}.get(number, "mean test macro EM (%) over seeds, "
                                                                      "95% t interval; Welch p vs Dr. Free")
    titles = {"paper": f"the paper (seed 002, Table {number}; EM %, Qwen2.5 backbones, seven benchmarks)",
              **({"reference": f"{ref.label}: {what}"} if ref is not None else {})}
    return tables, _tables_figure(tables, f"Dr. Free, Table {number}", store_runs(None), ref, titles)


# --------------------------------------------- EoG's and DynaSearcher's paper numbers beside the reference

# The reference rows that stand for seed 004's Table 3 variants, in its order (paper.eog_table3's
# workbench_row: the topology warm start for the untrained ReAct start), then the full method and the
# comparison row the paper's table does not have.
EOG_ROWS = {"base_topology": "topology warm start (untrained)", "eog_wo_solver_update": "w/o Solver update",
            "eog_wo_proposer_update": "w/o Proposer update", "eog_random_walk": "w/o query exec. (Random Walk)",
            "eog_adversarial": "Adversarial reward", "eog": "EoG", "coevokg": "CoEvoKG (not in the paper's table)"}
DYNASEARCHER_ROWS = {"dynasearcher": "DynaSearcher", "dynasearcher_wo_kg": "w/o KG", "dynasearcher_wo_mr": "w/o MR",
                     "search_r1": "Search-R1", "coevokg": "CoEvoKG"}


def eog_table3_paper() -> pd.DataFrame:
    """Seed 004's Table 3 as printed: one row per variant, Hit@1 and F1 per benchmark (%).

    Example:
        >>> eog_table3_paper().set_index("variant").loc["ReAct (untrained)"].tolist()[:2]
        [34.82, 28.42]
    """
    t = paper.eog_table3()
    wide = t.pivot(index="variant", columns="benchmark", values=["hit1", "f1"])
    order = list(dict.fromkeys(t.variant))
    columns = {f"{b} {name}": wide[(m, b)] for b in dict.fromkeys(t.benchmark)
               for m, name in (("hit1", "Hit@1"), ("f1", "F1"))}
    return pd.DataFrame(columns).reindex(order).rename_axis("variant").reset_index()


def _over_seeds(ref: Reference, reference: str, metrics: tuple[tuple[str, str], ...], rows: dict[str, str],
                base: dict[str, tuple] | None = None) -> pd.DataFrame:
    """The reference's rows in ``rows``' order: seeds, then per (metric, name) the mean over seeds with
    its 95% t interval and the Welch p against ``reference`` (``Reference.test_em``); ``base`` adds
    single evaluations (a warm start: no seeds, no test) by row key -> one value per metric."""
    stats = {m: ref.test_em(reference=reference, metric=m) for m, _ in metrics}
    out = []
    for key, label in rows.items():
        if base and key in base:
            out.append({"row": label, "seeds": None,
                        **{k: v for (m, name), value in zip(metrics, base[key])
                           for k, v in ((name, value), (f"{name} 95% low", None), (f"{name} 95% high", None),
                                        (f"p ({name})", None))}})
        elif key in stats[metrics[0][0]].index:
            row = {"row": label, "seeds": int(stats[metrics[0][0]].loc[key, "n"])}
            for m, name in metrics:
                r = stats[m].loc[key]
                row.update({name: r["mean"], f"{name} 95% low": r.low, f"{name} 95% high": r.high,
                            f"p ({name})": None if key == reference else r.get("p")})
            out.append(row)
    return pd.DataFrame(out)


def eog_table3(ref: Reference | None = None) -> tuple[dict[str, pd.DataFrame], go.Figure]:
    """Seed 004's Table 3 beside a reference file's EoG rows: the paper's ablation (Hit@1 and F1 on
    WebQSP, CWQ and GrailQA, Qwen-2.5-7B-Instruct on Freebase; its full EoG row is not in the seed
    text), and the reference's (macro Hit@1 and set F1 on TinyWorld's held-out answer-set questions,
    mean over seeds with a 95% t interval and the Welch p against EoG; EoG's topology warm start, one
    evaluation, in the row of the paper's untrained ReAct start). The two are not on one scale: a
    7B model on Freebase benchmarks against a 5M one on TinyWorld; read the rows' order, not the values.

    Example:
        >>> tables, _ = eog_table3(reference.load("tiny_eog_900s.json"))
        >>> tables["reference"].row.tolist()[:2], round(float(tables["reference"].loc[5, "Hit@1"]), 2)
        (['topology warm start (untrained)', 'w/o Solver update'], 45.33)
    """
    tables = {"paper": eog_table3_paper()}
    titles = {"paper": "the paper (seed 004, Table 3): Hit@1 / F1 %, Qwen-2.5-7B-Instruct on Freebase; "
                       "no full-EoG row in the text"}
    if ref is not None:
        base = {"base_topology": (ref.provenance.get("base_topology_test_macro_em"),
                                  ref.provenance.get("base_topology_test_macro_set_f1"))}
        tables["reference"] = _over_seeds(ref, "eog", (("test_macro_em", "Hit@1"), ("test_macro_set_f1", "set F1")),
                                          EOG_ROWS, base)
        titles["reference"] = (f"{ref.label}: macro Hit@1 / set F1 % on TinyWorld's answer-set questions; "
                               "95% t interval, Welch p vs EoG")
    return tables, _tables_figure(tables, "EoG's ablation (seed 004, Table 3) beside the reference runs", None, ref,
                                  titles)


def dynasearcher_table(ref: Reference | None = None) -> tuple[dict[str, pd.DataFrame], go.Figure]:
    """Seed 003's reported numbers beside a reference file's DynaSearcher rows: the summary's key
    results (HotpotQA and 2WikiMultiHopQA F1 against baselines it mostly leaves unnamed, and its two
    ablation rows, which do not say which is w/o KG and which w/o MR; ``paper.dynasearcher_results``),
    and the reference's test macro EM and token F1 (mean over seeds, 95% t interval, Welch p against
    DynaSearcher) with searches per test question by tool.

    Example:
        >>> tables, _ = dynasearcher_table(reference.load("tiny_dynasearcher_20rounds.json"))
        >>> tables["reference"].row.tolist()
        ['DynaSearcher', 'w/o KG', 'w/o MR', 'Search-R1', 'CoEvoKG']
    """
    tables = {"paper": paper.dynasearcher_results().drop(columns="provenance")}
    titles = {"paper": "the paper (seed 003's summary): F1 %, Qwen2.5-7B; a baseline named only where the summary names it"}
    if ref is not None:
        table = _over_seeds(ref, "dynasearcher", (("test_macro_em", "EM"), ("test_macro_f1", "F1")), DYNASEARCHER_ROWS)
        if {"searches_doc", "searches_kg"} <= set(ref.evaluations):
            searches = ref.evaluations.groupby("method")[["searches_doc", "searches_kg"]].mean()
            keys = [k for k in DYNASEARCHER_ROWS if k in searches.index]
            table["doc searches / q"] = searches.loc[keys, "searches_doc"].to_numpy()
            table["KG searches / q"] = searches.loc[keys, "searches_kg"].to_numpy()
        tables["reference"] = table
        titles["reference"] = f"{ref.label}: macro EM / token F1 % on TinyWorld; 95% t interval, Welch p vs DynaSearcher"
    return tables, _tables_figure(tables, "DynaSearcher (seed 003) beside the reference runs", None, ref, titles)


def shortcut_audit(shares: pd.DataFrame | None = None, paper_rows: bool = True, source: str = "your runs") -> go.Figure:
    """Seed 002's Table 5 as bars: per shortcut (closed-book, source-only, one-shot, single
    component) the share of generated questions answerable from it alone, with Wilson 95% intervals;
    the paper's methods (``paper.drfree_table5``) left, your runs (``shortcut_audit.summarize``'s
    ``shares``: run, shortcut, share, lo, hi, n) right, titled by ``source`` (e.g. a reference's
    ``label`` for ``Reference.audit_shares()``).

    Example:
        >>> len(shortcut_audit(None).data)  # the paper's three methods
        3
    """
    sources = [("the paper (seed 002, Table 5, 100 questions each)", paper.drfree_table5().rename(
        columns={"method": "run"}))] if paper_rows else []
    if shares is not None and len(shares):
        sources.append((f"{source} ({int(shares['n'].max())} questions each at most)", shares))
    fig = make_subplots(rows=1, cols=max(1, len(sources)), subplot_titles=[_wrap(t, 50) for t, _ in sources],
                        shared_yaxes=True)
    order = ["closed_book", "source_only", "one_shot", "single_component"]
    for col, (_, df) in enumerate(sources, start=1):
        for i, (run, rows) in enumerate(df.groupby("run", sort=False)):
            rows = rows.set_index("shortcut").reindex(order)
            fig.add_trace(go.Bar(x=[s.replace("_", " ") for s in order], y=100 * rows["share"], name=str(run),
                                 marker_color=run_colour(i + 3 * (col - 1)),
                                 error_y=dict(type="data", symmetric=False, array=100 * (rows["hi"] - rows["share"]),
                                              arrayminus=100 * (rows["share"] - rows["lo"]))), row=1, col=col)
    fig.update_yaxes(title_text="answerable from the shortcut alone (%)", range=[0, 100], row=1, col=1)
    fig.update_layout(barmode="group", height=440, width=PNG_WIDTH, margin=dict(t=110),
                      title="Gold-blind shortcut audit (lower is better): Wilson 95% intervals")
    return fig
