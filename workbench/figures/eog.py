"""EoG's figures (seed 004): its Fig. 7 topology curriculum (synthesis success per topology per
round) and its Table 3 ablations beside the paper's."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from workbench import paper, reference
from workbench.figures.base import layout, legend_below, over_seeds, run_metrics, store_runs, tables_figure, whole_ticks
from workbench.reference import Reference

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
    fig = layout(fig, "Topology curriculum: synthesis success per topology (EoG, Fig. 7 analogue)", shown,
                  height=480, note=note, ref=ref)
    return legend_below(fig, panels_px=320, y=-0.2)


# --------------------------------------------- EoG's and DynaSearcher's paper numbers beside the reference

# The reference rows that stand for seed 004's Table 3 variants, in its order (paper.eog_table3's
# workbench_row: the topology warm start for the untrained ReAct start), then the full method and the
# comparison row the paper's table does not have.
EOG_ROWS = {"base_topology": "topology warm start (untrained)", "eog_wo_solver_update": "w/o Solver update",
            "eog_wo_proposer_update": "w/o Proposer update", "eog_random_walk": "w/o query exec. (Random Walk)",
            "eog_adversarial": "Adversarial reward", "eog": "EoG", "coevokg": "CoEvoKG (not in the paper's table)"}


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
        tables["reference"] = over_seeds(ref, "eog", (("test_macro_em", "Hit@1"), ("test_macro_set_f1", "set F1")),
                                          EOG_ROWS, base)
        titles["reference"] = (f"{ref.label}: macro Hit@1 / set F1 % on TinyWorld's answer-set questions; "
                               "95% t interval, Welch p vs EoG")
    return tables, tables_figure(tables, "EoG's ablation (seed 004, Table 3) beside the reference runs", None, ref,
                                  titles)
