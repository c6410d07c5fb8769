"""``workbench batch NOTEBOOK --grid FILE.yaml``: a notebook over a grid of parameters, with papermill.

``workbench batch --list`` shows the batches kept under ``runs/batch/``; with a NOTEBOOK (or
``--name`` / ``--out``) it shows that batch's points.
"""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "batch", help="run a notebook over a grid of parameter sets (papermill; parallel, resumable)",
        description="Runs NOTEBOOK once per grid point, --jobs at a time, each point in its own folder "
                    "OUT/<point>/ (its own store, a copy of data/<preset>.duckdb; runs; figures; the warm-start "
                    "cache shared). Finished points are skipped. Kept in OUT (default runs/batch/<name>/): "
                    "the executed notebooks, named by their parameters (seed=1,method=c2-<id>.ipynb), the "
                    "record batch.duckdb (batch_results), summary.md/.csv/.html/.png (each recorded output per "
                    "method, mean over seeds with a 95%% t interval) and points.md/.csv (every point side by "
                    "side). Exit status 1 when any point failed.")
    parser.add_argument("notebook", nargs="?", help="the notebook to run (its first code cell is tagged `parameters`)")
    parser.add_argument("--grid", default=None,
                        help="YAML: a mapping name -> list of values (cartesian product) or a list of mappings")
    parser.add_argument("-p", "--param", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"),
                        help="a parameter (YAML scalar); repeating a name makes it a grid axis")
    parser.add_argument("--out", default=None, help="the batch's folder (default: runs/batch/<name>/)")
    parser.add_argument("--name", default=None, help="batch name (default: the notebook's file name)")
    parser.add_argument("--jobs", type=int, default=2, help="grid points run at once (default 2)")
    parser.add_argument("--kernel", default=None, help="Jupyter kernel (default: the notebook's own)")
    parser.add_argument("--db", default=None,
                        help="where the batch's record (batch_results) goes (default: OUT/batch.duckdb); "
                             "the points' own stores are set with -p db")
    parser.add_argument("--force", action="store_true",
                        help="run finished points again (without it they are skipped): deletes each point's "
                             "executed notebook, outputs file and folder first, and only those")
    parser.add_argument("--list", action="store_true",
                        help="show the batches under runs/batch/, or with NOTEBOOK / --name / --out one batch's "
                             "points: status, recorded outputs, executed notebook")
    parser.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    if args.list:
        return _list(args)
    if not args.notebook:
        raise SystemExit("workbench batch: NOTEBOOK is required (or --list to show the batches)")
    from pathlib import Path

    from workbench import batch, compare

    grid = batch.load_grid(args.grid) if args.grid else [{}]
    grid = batch.combine(grid, batch.cli_axes(args.param))
    results = batch.run_batch(args.notebook, grid, name=args.name, out_dir=args.out, jobs=args.jobs,
                              db=args.db, kernel_name=args.kernel, force=args.force)
    table = batch.summary_table(results)  # the points' status; the outputs summarised below are left out here
    long = compare.points_long(results)
    summarised = [c for c in table.attrs["outputs"] if _numeric(table[c])]
    print(table.drop(columns=summarised if len(long) else []).to_string(index=False))
    grouped = compare.over_seeds(long)
    if len(grouped):
        print("\nmean over seeds, 95% t interval (summary.md; every point's outputs: points.md):")
        print(grouped.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    out = args.out or batch.default_out(args.name or Path(args.notebook).stem)
    print(f"batch folder {out} (a point's store, runs and figures: the folder named as its notebook); "
          f"record {args.db or batch.record_path(out)}; `workbench batch {args.notebook} --list` shows it again")
    report = batch.failure_report(results)
    if report:
        print(report)
        return 1
    return 0


def _numeric(column) -> bool:
    """Whether a summary column holds numbers (summarised over seeds), not text or JSON."""
    import pandas as pd

    return pd.api.types.is_numeric_dtype(column) and not pd.api.types.is_bool_dtype(column)


def _list(args: argparse.Namespace) -> int:
    from pathlib import Path

    from workbench import batch

    if not (args.notebook or args.name or args.out or args.db):
        table = batch.list_batches()
        print(table.to_string(index=False) if len(table) else f"no batches under {batch.default_out('-').parent}")
        return 0
    name = args.name or (Path(args.notebook).stem if args.notebook else None)
    record = Path(args.db) if args.db else batch.record_path(Path(args.out) if args.out else batch.default_out(name))
    table = batch.list_points(record, name)
    print(f"batch {name or '(every batch in the record)'}, record {record}: a point's store, runs and "
          f"figures are in the folder named as its notebook, without .ipynb")
    print(table.drop(columns="batch").to_string(index=False) if len(table) else "no points recorded")
    return 0
