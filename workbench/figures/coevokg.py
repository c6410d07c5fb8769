"""CoEvoKG's tables and figures (seed 000): ``table1`` (main results), ``table2`` (build-up ablation
with deltas and sign-test p-values), ``figure3`` (training dynamics), ``figure4`` (hops and p_s,
generated vs seed questions), and ours: ``gate_rejections`` (the gate's verdicts by reason per
round), ``answer_types`` (answer types of generated vs seed questions)."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from workbench import config, paper, reference
from workbench.evaluate import across_seeds, sign_test_p
from workbench.figures.base import (BUILDUP, GATE_COLOURS, PAPER_COLOUR, REFERENCE_COLOURS, layout, paired_counts,
                                    tables_figure, wrap_text, band_traces, eval_scores, legend_below, run_colour,
                                    run_metrics, store_runs, whole_ticks)
from workbench.kg.benchmarks import SUITE
from workbench.reference import NAMES, Reference, chains_added

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
    return tables, tables_figure(tables, "Table 1: accuracy (%) per benchmark and macro average", store_runs(con),
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
            wins, losses = paired_counts(con, previous, run)
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
    return tables, tables_figure(tables, "Table 2: build-up ablation (Δ and sign test vs previous row)",
                                  buildup_runs, ref, titles)


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
    fig = layout(fig, "Figure 3: training dynamics", runs, height=1000, ref=ref,
                  note="left: what the paper's text states (Qwen2.5-7B-Instruct; it publishes no curve data)")
    return legend_below(fig, panels_px=800, y=-0.06)


def _right_title(runs: bool, ref: bool) -> str:
    """What a figure's right-hand panels show: ``this run``, ``reference``, both, or nothing."""
    return {(True, True): "run, reference", (True, False): "this run", (False, True): "reference"}.get((runs, ref), "")


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
        text = "<br>".join(wrap_text(f"{r.metric}: {r.statement}", 36) for r in f3.query(query).itertuples())
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
    fig = layout(fig, "Figure 4: generated vs seed questions", runs[runs.run.isin([r.run for r in shown])],
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
    fig = layout(fig, "Answer types: generated vs seed questions", shown, height=520, ref=ref)
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
    fig = layout(fig, "Gate verdicts per round: admitted, passed, rejected by reason", shown, height=520, ref=ref)
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
