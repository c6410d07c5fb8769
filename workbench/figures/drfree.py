"""Dr. Free's tables (seed 002): Tables 2, 3, 9 beside the reference runs, and its Table 5
shortcut audit."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from workbench import paper, reference
from workbench.figures.base import PNG_WIDTH, tables_figure, wrap_text, run_colour, store_runs
from workbench.reference import Reference

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
    return tables, tables_figure(tables, f"Dr. Free, Table {number}", store_runs(None), ref, titles)


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
    fig = make_subplots(rows=1, cols=max(1, len(sources)), subplot_titles=[wrap_text(t, 50) for t, _ in sources],
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
