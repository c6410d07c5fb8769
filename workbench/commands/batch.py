"""``workbench batch NOTEBOOK --grid FILE.yaml``: a notebook over a grid of parameters, with papermill."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "batch", help="run a notebook over a grid of parameter sets (papermill; parallel, resumable)",
        description="Runs NOTEBOOK once per grid point, --jobs at a time. Finished points are skipped; "
                    "each executed notebook is kept under runs/batch/<name>/<point>.ipynb and summarised "
                    "in the store's batch_results table. Exit status 1 when any point failed.")
    parser.add_argument("notebook", help="the notebook to run (its first code cell is tagged `parameters`)")
    parser.add_argument("--grid", default=None,
                        help="YAML: a mapping name -> list of values (cartesian product) or a list of mappings")
    parser.add_argument("-p", "--param", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"),
                        help="a parameter (YAML scalar); repeating a name makes it a grid axis")
    parser.add_argument("--out", default=None, help="folder for executed notebooks (default: runs/batch/<name>/)")
    parser.add_argument("--name", default=None, help="batch name (default: the notebook's file name)")
    parser.add_argument("--jobs", type=int, default=2, help="grid points run at once (default 2)")
    parser.add_argument("--kernel", default=None, help="Jupyter kernel (default: the notebook's own)")
    parser.add_argument("--db", default=None, help="store for batch_results (default: data/tiny.duckdb)")
    parser.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    import json

    from workbench import batch, paths

    grid = batch.load_grid(args.grid) if args.grid else [{}]
    grid = batch.combine(grid, batch.cli_axes(args.param))
    results = batch.run_batch(args.notebook, grid, name=args.name, out_dir=args.out, jobs=args.jobs,
                              db=args.db or paths.default_db(), kernel_name=args.kernel)
    for r in results:
        print(f"{r.status:8} {r.point} {r.duration_s:6.1f}s {json.dumps(r.params, sort_keys=True)} "
              f"{json.dumps(r.outputs, sort_keys=True)}")
    report = batch.failure_report(results)
    if report:
        print(report)
        return 1
    return 0
