"""DynaSearcher's table (seed 003): its rows and ablations from the reference runs."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from workbench import paper, reference
from workbench.figures.base import over_seeds, tables_figure
from workbench.reference import Reference

DYNASEARCHER_ROWS = {"dynasearcher": "DynaSearcher", "dynasearcher_wo_kg": "w/o KG", "dynasearcher_wo_mr": "w/o MR",
                     "search_r1": "Search-R1", "coevokg": "CoEvoKG"}


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
        table = over_seeds(ref, "dynasearcher", (("test_macro_em", "EM"), ("test_macro_f1", "F1")), DYNASEARCHER_ROWS)
        if {"searches_doc", "searches_kg"} <= set(ref.evaluations):
            searches = ref.evaluations.groupby("method")[["searches_doc", "searches_kg"]].mean()
            keys = [k for k in DYNASEARCHER_ROWS if k in searches.index]
            table["doc searches / q"] = searches.loc[keys, "searches_doc"].to_numpy()
            table["KG searches / q"] = searches.loc[keys, "searches_kg"].to_numpy()
        tables["reference"] = table
        titles["reference"] = f"{ref.label}: macro EM / token F1 % on TinyWorld; 95% t interval, Welch p vs DynaSearcher"
    return tables, tables_figure(tables, "DynaSearcher (seed 003) beside the reference runs", None, ref, titles)
