"""What every figure shares: saving (HTML beside a static PNG), showing in a notebook, tables as
markdown, the store read-only (runs, their per-round metrics, evaluations), layout, colours and
legends. The figures of each paper are beside it (``coevokg``, ``eog``, ``drfree``,
``dynasearcher``); ``workbench.figures`` hands them all on."""

from __future__ import annotations

import base64
import html
import json
import os
import re
import textwrap
import warnings
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from workbench import paths, reference
from workbench.kg.benchmarks import SUITE
from workbench.reference import Reference

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

def save_fig(fig: go.Figure, name: str, out_dir: str | Path | None = None, quiet: bool = False) -> list[Path]:
    """Write ``fig`` as ``<name>.html`` (always) and ``<name>.png`` (when a Chromium exists); print the
    paths unless ``quiet`` (``show``: a notebook's figure comes first, its files after it).

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
    if not quiet:
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
        static = (self._tables_html() if self.fig.data and all(isinstance(t, go.Table) for t in self.fig.data)
                  else self._png_html() if self.png is not None else self._plotly_html())
        return {"application/vnd.plotly.v1+json": json.loads(self.fig.to_json()), "text/plain": repr(self),
                "text/html": static}

    def _tables_html(self) -> str:
        """A figure of tables as HTML tables, their cells' text as the figure prints it, each under its
        title and in a box that scrolls sideways: readable at a phone's width, where the PNG scaled
        to the page would print 12 px text at 5 px."""
        def plain(markup) -> str:  # plotly's <b>/<br> markup as plain text
            return " ".join(re.sub(r"<[^>]+>", " ", str(markup or "")).split())

        def text(markup) -> str:  # escaped, its line breaks kept
            return "<br>".join(html.escape(plain(line)) for line in re.split(r"<br\s*/?>", str(markup or "")))

        layout = self.fig.layout
        out = [f"<p><b>{text(layout.title.text)}</b><br><small>{text(layout.title.subtitle.text)}</small></p>"]
        for table, note in zip(self.fig.data, layout.annotations):  # make_subplots' titles come first, in order
            frame = pd.DataFrame({plain(h): [html.unescape(plain(x)) for x in v]
                                  for h, v in zip(table.header.values, table.cells.values)})
            out.append(f'<p style="margin: 1.2em 0 0.4em">{html.escape(plain(note.text))}</p>'
                       '<div style="overflow-x: auto">'
                       f"{frame.to_html(index=False, escape=True, border=0)}</div>")
        saved = ", ".join(html.escape(p.name) for p in self.written)
        return "".join(out) + f'<p style="font-size: smaller">saved: {saved}</p>'

    def _png_html(self) -> str:
        data = base64.b64encode(self.png.read_bytes()).decode("ascii")
        title = html.escape((self.fig.layout.title.text or self.name), quote=True)
        # the file has twice the pixels of PNG_WIDTH: sharp at that width, scaled down on a narrower page
        saved = ", ".join(html.escape(p.name) for p in self.written)
        return (f'<img src="data:image/png;base64,{data}" alt="{title}" width="{PNG_WIDTH}" '
                f'style="max-width: 100%; height: auto"><p style="font-size: smaller">saved: {saved}</p>')

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
    return SavedFigure(fig, name, save_fig(fig, name, out_dir, quiet=True))


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
               decimals: int | None = None, quiet: bool = False) -> list[Path]:
    """Write ``df`` as ``<name>.md`` (caption, then a Markdown table) and ``<name>.csv`` (every digit);
    print the paths unless ``quiet`` (a notebook cell whose figure comes next). With ``decimals`` the
    Markdown cells read as the figures' tables print them (``_cell``: p to four decimals or "<0.001",
    signed deltas), else as ``:g`` (6 significant digits).

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
    if not quiet:
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

def only_runs(db, runs) -> duckdb.DuckDBPyConnection:
    """The store at ``db`` as figure builders read it, holding only ``runs``: an in-memory DuckDB
    with the store attached read-only and one view per table, tables with a ``run`` column filtered
    to those runs (evaluations, keyed by model rather than run, stay whole).

    Example:
        >>> view = only_runs("data/smoke.duckdb", ["sr-s0"])  # doctest: +SKIP
    """
    view = duckdb.connect()
    try:
        view.execute("ATTACH ? AS src (READ_ONLY)", [str(db)])
    except duckdb.IOException as err:
        view.close()
        raise ValueError(f"{db}: cannot open the store read-only ({err}); is a run still writing to it?") from err
    view.execute("CREATE TEMP TABLE chosen (run VARCHAR)")
    view.executemany("INSERT INTO chosen VALUES (?)", [[r] for r in runs])
    tables = view.execute("SELECT table_name, list(column_name) FROM information_schema.columns "
                          "WHERE table_catalog = 'src' AND table_schema = 'main' GROUP BY table_name").fetchall()
    for table, columns in tables:
        where = " WHERE run IN (SELECT run FROM chosen)" if "run" in columns else ""
        view.execute(f'CREATE VIEW main."{table}" AS SELECT * FROM src.main."{table}"{where}')
    return view


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


def paired_counts(con, model_a: str, model_b: str) -> tuple[int, int]:
    """(b right where a is wrong, a right where b is wrong) over the questions both answered."""
    wins, losses = con.execute(f"""
        WITH {_LATEST_TEST_EVALS},
             o AS (SELECT e.* FROM labelled e JOIN latest USING (model, dataset, eval_id))
        SELECT count(*) FILTER (WHERE b.em > a.em), count(*) FILTER (WHERE b.em < a.em)
        FROM o a JOIN o b ON a.dataset = b.dataset AND a.question_id = b.question_id
        WHERE a.model = ? AND b.model = ?""", [model_a, model_b]).fetchone()
    return int(wins), int(losses)


# ------------------------------------------------------------------------------------ the builders

def layout(fig: go.Figure, title: str, runs: pd.DataFrame, height: int, note: str = "",
            ref: Reference | None = None) -> go.Figure:
    subtitle = describe_runs(runs, ref) + (f"<br>{note}" if note else "")
    # The title block is pinned to the top and the panels start below its last line (plus a subplot
    # title's height): plotly would centre it in the margin, over the first panel titles.
    fig.update_layout(title=dict(text=title, subtitle=dict(text=subtitle), yref="container", y=1, yanchor="top",
                                 pad=dict(t=14)),
                      height=height, margin=dict(t=top_margin(subtitle)), template="plotly_white")
    fig.update_annotations(font_size=13)  # subplot titles: one line each at a notebook's width
    return fig


def top_margin(subtitle: str) -> int:
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
    """A table cell as text: p-values to four decimals, as the paper prints them (its 0.0011 is not
    0.0), and "<0.001" below 0.001 (no 1.73e-05 beside 0.5329); counts as integers, other numbers to
    ``decimals`` decimals (one, as the paper prints; two for means over seeds, whose 59.25 one
    decimal would print as 59.2), booleans as a tick or a dash.

    Example:
        >>> [_cell("p", 0.0011), _cell("wins", 5.0), _cell("avg", 52.44), _cell("delta", 1.5), _cell("c1", True)]
        ['0.0011', '5', '52.4', '+1.5', '✓']
        >>> [_cell("p vs base", p) for p in (1.73e-05, 0.001, 0.5329, 1.0)]
        ['<0.001', '0.0010', '0.5329', '1.0000']
        >>> _cell("avg", 59.25, decimals=2), _cell("delta", -0.35000000000000142, decimals=2)
        ('59.25', '-0.35')
    """
    if v is None or (not isinstance(v, str) and pd.isna(v)):
        return ""
    if isinstance(v, (bool, np.bool_)):
        return "✓" if v else "–"
    if column == "p" or column.startswith(("p (", "p vs")):  # "p (F1)", "p vs ...": a second test's p
        return "<0.001" if v < 0.001 else f"{v:.4f}"
    if column in ("delta", "gain (Avg.)"):
        return f"{v:+.{decimals}f}"
    if column in ("wins", "losses", "n", "seeds"):
        return f"{int(v)}"
    return f"{v:.{decimals}f}" if isinstance(v, (float, np.floating)) else str(v)


TABLE_MARGIN = 30  # px left and right of a tables figure (plotly_white's 80 took 160 px from the columns)
CHAR_PX = 6.8  # px a width unit of ``_column_widths`` takes at plotly's 12 px table font (measured on the PNGs)
TABLE_UNITS = int((PNG_WIDTH - 2 * TABLE_MARGIN) / CHAR_PX)  # the width units one table fits at PNG_WIDTH


def _column_widths(df: pd.DataFrame, decimals: int = 1) -> dict[str, float]:
    """Each column's width in characters: its longest cell or its (bold) header, and a margin.

    Example:
        >>> _column_widths(pd.DataFrame({"method": ["CoEvoKG"], "p": [0.5]}))
        {'method': 9, 'p': 8}
    """
    return {str(c): max([1.15 * len(str(c)), *(len(_cell(str(c), v, decimals)) for v in df[c])]) + 2
            for c in df.columns}


def _table_trace(df: pd.DataFrame, decimals: int = 1) -> go.Table:
    """A ``go.Table`` whose column widths follow their longest text, so no name is clipped."""
    cells = [[_cell(str(c), v, decimals) for v in df[c]] for c in df.columns]
    if _has_markup(df, decimals):  # every cell as markup, so all rows stay alike (``_row_px``)
        cells = [[f"<span>{html.escape(t, quote=False)}</span>" for t in column] for column in cells]
    return go.Table(columnwidth=list(_column_widths(df, decimals).values()),
                    header=dict(values=[f"<b>{c}</b>" for c in df.columns], height=28),
                    cells=dict(values=cells, height=24))


def _has_markup(df: pd.DataFrame, decimals: int = 1) -> bool:
    """Whether a cell's text holds one of < & > ("<0.001"), which plotly draws as markup."""
    return any(ch in _cell(str(c), v, decimals) for c in df.columns for v in df[c] for ch in "<&>")


def _row_px(df: pd.DataFrame, decimals: int = 1) -> int:
    """A table row's height: 24 px, or 30 px where plotly draws the cells as markup (its rows then grow
    to 30 px, a cell of plain text beside one of markup sat a line lower; measured on the PNGs).

    Example:
        >>> _row_px(pd.DataFrame({"p": [0.5]})), _row_px(pd.DataFrame({"p": [1e-5]}))
        (24, 30)
    """
    return 30 if _has_markup(df, decimals) else 24


def table_parts(df: pd.DataFrame, decimals: int = 1, units: int = TABLE_UNITS) -> list[pd.DataFrame]:
    """``df`` as one table, or, when its columns need more than ``units`` characters (they would
    overlap at a notebook's width), as column groups side by side in reading order, each repeating
    the leading text columns (backbone, method) and as few groups as fit, their widest as narrow as
    can be.

    Example:
        >>> wide = pd.DataFrame({"method": ["CoEvoKG"], **{f"benchmark {i}": [40.0] for i in range(12)}})
        >>> [list(part.columns)[:3] for part in table_parts(wide)]
        [['method', 'benchmark 0', 'benchmark 1'], ['method', 'benchmark 6', 'benchmark 7']]
    """
    widths = _column_widths(df, decimals)
    keys = []
    for c in df.columns:  # the leading columns that name a row
        if pd.api.types.is_numeric_dtype(df[c]) or len(keys) == len(df.columns) - 1:
            break
        keys.append(c)
    rest = [c for c in df.columns if c not in keys]
    room = units - sum(widths[str(c)] for c in keys)
    if sum(widths[str(c)] for c in df.columns) <= units or room <= 0:
        return [df]
    for k in range(2, len(rest) + 1):
        cuts = _balanced_cuts([widths[str(c)] for c in rest], k)
        groups = [rest[a:b] for a, b in zip([0, *cuts], [*cuts, len(rest)])]
        if max(sum(widths[str(c)] for c in g) for g in groups) <= room or k == len(rest):
            return [df[keys + g] for g in groups]
    return [df]


def _balanced_cuts(widths: list[float], k: int) -> list[int]:
    """The k - 1 cut points that split ``widths`` into k contiguous runs with the smallest largest sum.

    Example:
        >>> _balanced_cuts([1, 1, 1, 1, 4], 2)
        [4]
    """
    import itertools

    best = min(itertools.combinations(range(1, len(widths)), k - 1),
               key=lambda cuts: max(sum(widths[a:b]) for a, b in zip([0, *cuts], [*cuts, len(widths)])))
    return list(best)


def tables_figure(tables: dict[str, pd.DataFrame], title: str, runs: pd.DataFrame, ref: Reference | None = None,
                   titles: dict[str, str] | None = None) -> go.Figure:
    """The tables stacked, each as tall as its rows (header 28 px, a row ``_row_px``, its title 40 px),
    each under its key or its entry in ``titles``; the reference's means with two decimals. A table
    too wide for a notebook's width is shown in column groups (``table_parts``), each after the first
    titled "(continued)"."""
    shown = {k: v for k, v in tables.items() if not v.empty}
    # a title longer than a line at 13 px wraps (~6.5 px a character); a continued table's names the first's
    panels = [(wrap_text(name, TABLE_UNITS) if i == 0 else f"{name.split(':')[0]} (continued)", part,
               table_decimals(side))
              for side, df in shown.items() for name in [(titles or {}).get(side, side)]
              for i, part in enumerate(table_parts(df, table_decimals(side)))]
    px_of = [28 + _row_px(df, decimals) * len(df) + 40 for _, df, decimals in panels]
    fig = make_subplots(rows=len(panels), cols=1, specs=[[{"type": "table"}]] * len(panels),
                        subplot_titles=[name for name, _, _ in panels], row_heights=px_of, vertical_spacing=0.04)
    for i, (_, df, decimals) in enumerate(panels, start=1):
        fig.add_trace(_table_trace(df, decimals=decimals), row=i, col=1)
    top, bottom = top_margin(describe_runs(runs, ref)), 30
    fig = layout(fig, title, runs, height=int(sum(px_of) * (1 + 0.04 * (len(panels) - 1))) + top + bottom, ref=ref)
    return fig.update_layout(margin=dict(b=bottom, l=TABLE_MARGIN, r=TABLE_MARGIN))


def wrap_text(text: str, width: int) -> str:
    """``text`` broken into lines of at most ``width`` characters, joined by ``<br>`` (plotly's line break)."""
    return "<br>".join(textwrap.wrap(text, width))


def band_traces(band: pd.DataFrame, name: str, colour: str, key: str, dash: str = "solid",
                legend: bool = True, spread: str = "seeds") -> list[go.Scatter]:
    """A mean line over seeds and the seeds' range as a faint band behind it (``Reference.band``'s
    columns round, mean, low, high), one legend entry for both; ``spread`` names the band in the
    hover ("95% t interval" where low/high are one, as ``compare.seed_band`` gives).

    Example:
        >>> band = pd.DataFrame(dict(round=[0, 1], mean=[0.5, 0.6], low=[0.4, 0.5], high=[0.6, 0.7]))
        >>> [t.fill for t in band_traces(band, "ref", "#333333", "val_em")]
        ['toself', None]
    """
    band = band.dropna(subset=["mean"])
    fill = go.Scatter(x=[*band["round"], *band["round"][::-1]], y=[*band.high, *band.low[::-1]], fill="toself",
                      fillcolor=_rgba(colour, 0.15), line=dict(width=0), mode="lines", hoverinfo="skip", name=name,
                      legendgroup=name, showlegend=False)
    mean = go.Scatter(x=band["round"], y=band["mean"], mode="lines", name=name, legendgroup=name, showlegend=legend,
                      line=dict(color=colour, width=2.5, dash=dash), customdata=band[["low", "high"]],
                      hovertemplate=f"{key}: %{{y:.4g}} ({spread} %{{customdata[0]:.4g}}-%{{customdata[1]:.4g}})"
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


def over_seeds(ref: Reference, reference: str, metrics: tuple[tuple[str, str], ...], rows: dict[str, str],
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
