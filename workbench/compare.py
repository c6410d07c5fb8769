"""Runs compared as a tracker would, offline: pick runs by name, group them, draw each group once.

``select_runs`` keeps the store's runs whose names match shell-style globs (``fnmatch``: ``sr*``,
``co-s[01]``); ``group_runs`` labels each run by its method, its seed or itself (``GROUP_BY``);
``compare_figure`` draws one colour per group per training curve: the mean over the group's runs
(its seeds) with a 95% t interval as a band (``seed_band``), and a legend naming each group and its
runs. ``figures.only_runs`` narrows a store to the chosen runs for every other figure. ``over_seeds`` does
the same for a batch's recorded outputs: one row per (group, output) with the mean over seeds and
its 95% t interval, the table and figure a batch summary shows.

Example:
    >>> runs = pd.DataFrame(dict(run=["sr-s0", "sr-s1", "co-s0"], method=["search_r1", "search_r1", "coevokg"],
    ...                          seed=[0, 1, 0]))
    >>> select_runs(runs, ["sr*"]).run.tolist()
    ['sr-s0', 'sr-s1']
    >>> group_runs(runs, "method").tolist()
    ['Search-R1', 'Search-R1', 'CoEvoKG']
"""

from __future__ import annotations

import fnmatch
import json
import math
from collections.abc import Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from workbench.evaluate import across_seeds
from workbench.reference import NAMES

GROUP_BY = ("method", "seed", "none")  # "none": every run its own group
# The training curves compared, in panel order: (run_metrics key, axis title); absent keys are left out.
CURVES = (("val_em", "validation EM"), ("solver_reward", "solver reward"), ("proposer_reward", "proposer reward"),
          ("seed_fallback_rate", "seed fallback rate"), ("kl", "KL to the reference"))
SHARES = ("val_em", "seed_fallback_rate")  # drawn on 0..1
SYMBOLS = ("circle", "square", "diamond", "triangle-up", "x", "star")  # a group's marks, in order
DASHES = ("solid", "dash", "dot", "dashdot")
SHOWN_NAMES = 12  # runs named in an error before "and N more"


def select_runs(runs: pd.DataFrame, patterns: Sequence[str] | None) -> pd.DataFrame:
    """The rows of ``runs`` (``figures.store_runs``) whose ``run`` matches any of ``patterns``
    (shell-style, case-sensitive ``fnmatch``), in the store's order; every run when none are given.
    A pattern matching no run is an error naming it and the runs there are.

    Example:
        >>> select_runs(pd.DataFrame(dict(run=["a1", "b1"])), ["a*"]).run.tolist()
        ['a1']
    """
    if not patterns:
        return runs
    names = runs.run.astype(str).tolist()
    keep: set[str] = set()
    for pattern in patterns:
        hits = [n for n in names if fnmatch.fnmatchcase(n, pattern)]
        if not hits:
            there = ", ".join(names[:SHOWN_NAMES]) + (f" and {len(names) - SHOWN_NAMES} more"
                                                      if len(names) > SHOWN_NAMES else "")
            raise ValueError(f"--run {pattern!r} matches no run in the store; its runs: {there or '(none)'} "
                             f"(a glob: * any characters, ? one, [ab] one of)")
        keep.update(hits)
    return runs[runs.run.isin(keep)]


def group_runs(runs: pd.DataFrame, by: str) -> pd.Series:
    """Each run's group label: its method's display name (``method``), ``seed N`` (``seed``) or its
    own name (``none``).

    Example:
        >>> group_runs(pd.DataFrame(dict(run=["x"], method=["ssp"], seed=[3])), "seed").tolist()
        ['seed 3']
    """
    if by not in GROUP_BY:
        raise ValueError(f"--group-by {by!r}: expected one of {', '.join(GROUP_BY)}")
    if by == "method":
        return runs.method.map(lambda m: NAMES.get(m, m))
    if by == "seed":
        return runs.seed.map(lambda s: f"seed {s}")
    return runs.run.astype(str)


def t_interval(values: Sequence[float]) -> tuple[float, float, float]:
    """(mean, low, high) of ``values``: the 95% t interval over them (``evaluate.across_seeds``);
    low = high = mean for a single value (no spread to show).

    Example:
        >>> [round(v, 2) for v in t_interval([1.0, 2.0, 3.0])]
        [2.0, -0.48, 4.48]
    """
    row = across_seeds({"x": list(values)}).loc["x"]
    if row.n < 2:
        return float(row["mean"]), float(row["mean"]), float(row["mean"])
    return float(row["mean"]), float(row.low), float(row.high)


def seed_band(metrics: pd.DataFrame, key: str) -> pd.DataFrame:
    """``key`` per round over the runs in ``metrics`` (one row per run and round): ``mean``, the 95%
    t interval over runs (``low``, ``high``) and ``n``; a round counts the runs that logged a value.

    Example:
        >>> m = pd.DataFrame(dict(run=["a", "b", "a", "b"], round=[0, 0, 1, 1], val_em=[0.1, 0.3, 0.2, 0.4]))
        >>> seed_band(m, "val_em")[["round", "mean", "n"]].round(2).values.tolist()
        [[0.0, 0.2, 2.0], [1.0, 0.3, 2.0]]
    """
    values = pd.to_numeric(metrics[key], errors="coerce") if key in metrics else pd.Series(np.nan, metrics.index)
    rows = []
    for rnd, v in values.groupby(metrics["round"]):
        v = v.dropna()
        if len(v):
            mean, low, high = t_interval(v.tolist())
            rows.append(dict(round=rnd, mean=mean, low=low, high=high, n=len(v)))
    return pd.DataFrame(rows, columns=["round", "mean", "low", "high", "n"])


def compare_figure(runs: pd.DataFrame, metrics: pd.DataFrame, by: str = "method") -> go.Figure:
    """The training curves of ``runs`` (``figures.store_runs`` rows), one colour per group (``by``):
    each panel a ``CURVES`` key, each group its mean over runs per round with the 95% t interval as
    a band (no band where a group has one run); the legend names each group and how many runs it has.

    Example:
        >>> runs = pd.DataFrame(dict(run=["a", "b"], method=["ssp", "ssp"], seed=[0, 1], preset="smoke",
        ...                          config_hash="h"))
        >>> m = pd.DataFrame(dict(run=["a", "b"], round=[0, 0], val_em=[0.1, 0.3]))
        >>> [t.name for t in compare_figure(runs, m).data if t.showlegend]
        ['SSP (2 runs)']
    """
    from workbench.figures import base as figures  # the helpers, not the package (whose build.py imports this module)

    groups = group_runs(runs, by)
    metrics = metrics[metrics.run.isin(set(runs.run))]
    keys = [(k, title) for k, title in CURVES if k in metrics and pd.to_numeric(metrics[k], errors="coerce").notna().any()]
    if not keys:
        raise ValueError(f"the runs chosen ({', '.join(runs.run)}) have no logged rounds with "
                         f"{', '.join(k for k, _ in CURVES)}: nothing to compare")
    fig = make_subplots(rows=len(keys), cols=1, subplot_titles=[title for _, title in keys], vertical_spacing=0.12 / len(keys) + 0.04)
    order = list(dict.fromkeys(groups))
    for i, label in enumerate(order):
        members = runs[groups == label]
        m = metrics[metrics.run.isin(set(members.run))]
        name = f"{label} ({len(members)} run{'s' * (len(members) != 1)})"
        for row, (key, _) in enumerate(keys, start=1):
            band = seed_band(m, key)
            if band.empty:
                continue
            traces = figures.band_traces(band, name, figures.run_colour(i), key, legend=row == 1,
                                         spread="95% t interval")
            # a mark and a dash of its own: a group whose line lies on another's (both at 0) still shows
            traces[1].update(mode="lines+markers", marker=dict(symbol=SYMBOLS[i % len(SYMBOLS)], size=8), cliponaxis=False,
                             line=dict(dash=DASHES[i % len(DASHES)]))
            if len(band) == 1 and len(members) > 1:  # one round: a band of no width, so whiskers instead
                traces[1].error_y = dict(type="data", symmetric=False, array=band.high - band["mean"],
                                         arrayminus=band["mean"] - band.low, color=figures.run_colour(i))
            for trace in traces if len(members) > 1 else traces[1:]:
                fig.add_trace(trace, row=row, col=1)
            figures.whole_ticks(fig, int(metrics["round"].max()), title_text="round" if row == len(keys) else None,
                                row=row, col=1)
    for row, (key, _) in enumerate(keys, start=1):
        values = pd.to_numeric(metrics[key], errors="coerce").dropna()
        # the axis follows the values (EM 0.40-0.45 stays readable) but a share stays in 0..1 and a
        # quantity that is never negative (KL) starts at 0 at most: a t band of two seeds reaches far
        if key in SHARES:
            fig.update_yaxes(autorangeoptions=dict(clipmin=-0.02, clipmax=1.02), row=row, col=1)
        elif values.min() >= 0:
            fig.update_yaxes(autorangeoptions=dict(clipmin=0), row=row, col=1)
    fig.update_yaxes(tickformat=".3~g")
    lines = [f"{label}: {', '.join(runs.run[groups == label])}" for label in order]
    presets = ", ".join(sorted(set(runs.preset.astype(str))))
    subtitle = (f"grouped by {by}; a line is the mean over a group's runs, its band the 95% t interval over them "
                f"(preset {presets})<br>" + "<br>".join(_wrap_runs(line) for line in lines))
    fig.update_layout(title=dict(text=f"Runs compared: {len(runs)} runs in {len(order)} groups",
                                 subtitle=dict(text=subtitle), yref="container", y=1, yanchor="top", pad=dict(t=14)),
                      template="plotly_white", margin=dict(t=figures.top_margin(subtitle)))
    fig.update_annotations(font_size=13)
    return figures.legend_below(fig, panels_px=260 * len(keys), y=-0.3 / len(keys))


def _wrap_runs(line: str, width: int = 110) -> str:
    return line if len(line) <= width else line[:width - 1] + "…"


# --------------------------------------------------------------------------- batch points over seeds

SEED_PARAM = "seed"  # the grid axis averaged over; every other varying parameter splits groups


def _point_methods(params: dict) -> list[str]:
    """The methods a point ran: its ``method`` parameter, or each of its ``methods``."""
    found = params.get("method", params.get("methods"))
    if found is None:
        return []
    return [str(m) for m in (found if isinstance(found, list) else [found])]


def points_long(results) -> pd.DataFrame:
    """Every numeric output of every finished point as one row: the point's varying parameters
    (``methods`` becomes ``method``), ``seed``, ``output`` and ``value``. An output named
    ``<method>_<name>`` of a point that ran that method counts as ``name`` of that method, so a
    notebook recording ``ssp_test_em`` and ``c1_test_em`` gives one ``test_em`` per method.

    Example:
        >>> from workbench.batch import PointResult
        >>> rs = [PointResult("a", {"methods": ["ssp"], "seed": 0}, "done", 1.0, {"ssp_test_em": 50.0})]
        >>> points_long(rs)[["method", "seed", "output", "value"]].values.tolist()
        [['ssp', 0, 'test_em', 50.0]]
    """
    names = list(dict.fromkeys(k for r in results for k in r.params))
    varying = [k for k in names if k not in ("method", "methods", SEED_PARAM)
               and len({json.dumps(r.params.get(k), sort_keys=True, default=str) for r in results}) > 1]
    has_method = any(_point_methods(r.params) for r in results)
    rows = []
    for r in results:
        if r.status not in ("done", "skipped"):
            continue
        methods = _point_methods(r.params)
        for key, value in r.outputs.items():
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                continue
            method, output = _split(key, methods)
            rows.append({**{k: _plain(r.params.get(k)) for k in varying},
                         **({"method": method} if has_method else {}),
                         SEED_PARAM: r.params.get(SEED_PARAM), "output": output, "value": float(value)})
    columns = [*varying, *(["method"] if has_method else []), SEED_PARAM, "output", "value"]
    return pd.DataFrame(rows, columns=columns)


def _split(key: str, methods: list[str]) -> tuple[str, str]:
    """(method, output name) of a recorded key: ``ssp_test_em`` of a point that ran ssp -> (ssp, test_em)."""
    for m in sorted(methods, key=len, reverse=True):  # the longest first: c2 before c
        if key.startswith(f"{m}_"):
            return m, key[len(m) + 1:]
    return (methods[0] if len(methods) == 1 else "(all)"), key


def _plain(value):
    return json.dumps(value, sort_keys=True) if isinstance(value, (list, dict)) else value


def over_seeds(long: pd.DataFrame) -> pd.DataFrame:
    """``points_long`` summarised: one row per group (every column but seed/output/value) and
    output, with the seeds it has, their mean and the 95% t interval over them (blank for one seed).

    Example:
        >>> long = pd.DataFrame(dict(method=["a", "a"], seed=[0, 1], output=["em", "em"], value=[1.0, 3.0]))
        >>> over_seeds(long)[["method", "output", "seeds", "mean"]].values.tolist()
        [['a', 'em', 2, 2.0]]
    """
    keys = [c for c in long.columns if c not in (SEED_PARAM, "output", "value")]
    columns = [*keys, "output", "seeds", "mean", "95% low", "95% high", "values"]
    if long.empty:
        return pd.DataFrame(columns=columns)
    rows = []
    for group, part in long.groupby([*keys, "output"], sort=False, dropna=False):
        group = group if isinstance(group, tuple) else (group,)
        stats = across_seeds({"x": part.value.tolist()}).loc["x"]
        rows.append({**dict(zip([*keys, "output"], group)), "seeds": int(stats.n), "mean": stats["mean"],
                     "95% low": stats.low, "95% high": stats.high,
                     "values": " ".join(f"{v:.4g}" for v in part.value)})
    out = pd.DataFrame(rows, columns=columns)
    order = {o: i for i, o in enumerate(dict.fromkeys(long.output))}  # outputs, then groups, as first recorded
    return out.sort_values("output", key=lambda c: c.map(order), kind="stable").reset_index(drop=True)


def _group_labels(df: pd.DataFrame, keys: list[str]) -> pd.Series:
    """A group's name on an axis: its method as is, other parameters as ``name=value``."""
    if not keys:
        return pd.Series("all points", df.index)
    parts = [df[k].astype(str) if k == "method" else k + "=" + df[k].astype(str) for k in keys]
    return pd.concat(parts, axis=1).agg(" · ".join, axis=1)


def over_seeds_figure(table: pd.DataFrame, long: pd.DataFrame, title: str) -> go.Figure:
    """One panel per output: per group a bar mark at its mean over seeds, whiskers for the 95% t
    interval and each seed's value as a circle (the axis follows the values, not zero, so close
    means stay apart); groups keep one colour across panels, the legend names them.

    Example:
        >>> long = pd.DataFrame(dict(method=["a", "a"], seed=[0, 1], output=["em", "em"], value=[1.0, 3.0]))
        >>> [t.name for t in over_seeds_figure(over_seeds(long), long, "demo").data]
        ['one seed', 'a']
    """
    from workbench.figures import base as figures  # the helpers, not the package (whose build.py imports this module)

    keys = [c for c in table.columns if c not in ("output", "seeds", "mean", "95% low", "95% high", "values")]
    label = _group_labels(table, keys)
    outputs = list(dict.fromkeys(table.output))
    cols = 1 if len(outputs) == 1 else 2
    rows = math.ceil(len(outputs) / cols)
    # an odd panel count leaves no empty cell: the last panel spans the row
    specs = [[{}, {}] if cols == 2 else [{}] for _ in range(rows)]
    if cols == 2 and len(outputs) % 2:
        specs[-1] = [{"colspan": 2}, None]
    fig = make_subplots(rows=rows, cols=cols, specs=specs, subplot_titles=outputs,
                        vertical_spacing=min(0.2, 0.3 / rows), horizontal_spacing=0.12)
    colours = {g: figures.run_colour(i) for i, g in enumerate(dict.fromkeys(label))}
    long_label = _group_labels(long, keys)
    for i, output in enumerate(outputs):
        where = dict(row=i // cols + 1, col=i % cols + 1)
        part = table[table.output == output]
        dots = long[long.output == output]
        # seeds first, so the mean's mark lies on top; a little to the right of it, not hidden under it
        fig.add_trace(go.Scatter(x=long_label[dots.index], y=dots.value, mode="markers", name="one seed",
                                 legendgroup="seeds", showlegend=i == 0, cliponaxis=False,
                                 marker=dict(color="rgba(40, 40, 40, 0.55)", size=7, symbol="circle-open"),
                                 customdata=dots[SEED_PARAM], hovertemplate="seed %{customdata}: %{y:.4g}<extra></extra>"),
                      **where)
        for idx, r in part.iterrows():
            g = label[idx]
            spread = r["95% high"] - r["mean"] if pd.notna(r["95% high"]) else None
            fig.add_trace(go.Scatter(x=[g], y=[r["mean"]], mode="markers+text", name=g, legendgroup=g, showlegend=i == 0,
                                     cliponaxis=False,  # a mark at 0 on a share's axis, and its n, are not cut
                                     text=[f" n={r.seeds}"], textposition="middle right", textfont=dict(size=11),
                                     marker=dict(color=colours[g], size=26, symbol="line-ew", line=dict(width=4,
                                                                                                      color=colours[g])),
                                     error_y=dict(type="data", array=[spread], visible=spread is not None,
                                                  color=colours[g], thickness=2.5, width=10),
                                     hovertemplate=f"{g}<br>{output}: mean %{{y:.4g}} over {r.seeds} seed(s)"
                                                   f"<br>95% t interval {r['95% low']:.4g} to {r['95% high']:.4g}"
                                                   "<extra></extra>"), **where)
        # half a category of room each side: plotly puts the first and last group on the panel's edges
        shown = len(set(label[part.index]) | set(long_label[dots.index]))
        fig.update_xaxes(range=[-0.6, shown - 0.4], **where)
        if min(dots.value.min(), part["95% low"].min(skipna=True) if part["95% low"].notna().any() else 0) >= 0:
            fig.update_yaxes(rangemode="nonnegative", **where)  # shares, EM, counts: no axis below zero
    fig.update_xaxes(automargin=True, tickangle=0, type="category")
    fig.update_yaxes(automargin=True)
    n_seeds = int(table.seeds.max()) if len(table) else 0
    subtitle = (f"thick mark: the mean over n seeds ({n_seeds} at most), whiskers: its 95% t interval, circles: each seed"
                + (f"; groups: {' · '.join(keys)}" if keys else ""))
    fig.update_layout(title=dict(text=title, subtitle=dict(text=subtitle), yref="container", y=1, yanchor="top",
                                 pad=dict(t=14)),
                      template="plotly_white", height=320 * rows + 150, margin=dict(t=110, b=40),
                      legend=dict(orientation="h", yanchor="top", y=-0.12 / rows, xanchor="left", x=0))
    fig.update_annotations(font_size=13, yshift=6)
    return fig
