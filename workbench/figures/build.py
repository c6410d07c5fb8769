"""Every figure and table at once (``workbench figures``), with their captions."""

from __future__ import annotations

from pathlib import Path

from workbench import paths, reference
from workbench.figures.base import (describe_runs, only_runs, open_store, run_metrics, save_fig, save_table, store_runs,
                                    table_decimals)
from workbench.figures.coevokg import answer_types, figure3, figure4, gate_rejections, table1, table2
from workbench.figures.eog import topology_curriculum, topology_success
from workbench.reference import Reference

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
              table1_file: str | None = None, runs: list[str] | None = None) -> list[Path]:
    """Build every paper table and figure and the gate's verdicts: the paper vs the runs in ``db``
    vs the shipped reference runs (``reference.load(reference_file)``); save them and return the paths.

    ``db`` defaults to ``paths.default_db()``; ``paper_only`` shows the paper's numbers alone (no
    store, no reference); ``with_reference=False`` leaves the reference out; ``runs`` given, the
    figures show those runs of the store alone (``only_runs``).

    Example:
        >>> written = build_all(paper_only=True, out_dir=tmp)  # doctest: +SKIP
    """
    db = db if db is not None else paths.default_db()
    ref = reference.load(reference_file) if with_reference and not paper_only else None  # a bad name: before the store
    suite_ref = reference.load_table1(table1_file) if with_reference and not paper_only else None
    con = None if paper_only else open_store(db)
    if con is not None and runs is not None:
        con.close()
        con = only_runs(db, runs)
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
