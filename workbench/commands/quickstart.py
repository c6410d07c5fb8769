"""``workbench quickstart``: execute notebooks/00_quickstart.ipynb with papermill, keep the
executed copy under the runs folder, and say where the figures are."""

from __future__ import annotations

import argparse
import logging
import time

from workbench.commands import add_db


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("quickstart", help="run the whole method at tiny size (executes notebook 00)")
    p.add_argument("--preset", default="tiny", choices=("smoke", "tiny"), help="smoke (about a minute) | tiny (default)")
    p.add_argument("--long", action="store_true",
                   help="the longer run: 30 rounds of 16 slots, 1,000 test questions "
                        "(workbench/quickstart.py: LONG; about 25-95 minutes)")
    p.add_argument("--steps", type=int, default=None, help="CoEvoKG rounds (default: the quickstart's 6, 30 with --long)")
    p.add_argument("--slots", type=int, default=None,
                   help="question slots a round (default: the quickstart's 8, 16 with --long; 0 = the preset's, 32 at tiny)")
    p.add_argument("--seed", type=int, default=0, help="world, pool, warm start and training seed (default 0)")
    p.add_argument("--train-seed", type=int, default=None,
                   help="the training rounds' seed alone: the same world and warm start (default: --seed)")
    add_db(p)
    p.set_defaults(func=_quickstart)


def _quickstart(args: argparse.Namespace) -> int:
    import papermill

    # papermill streams the notebook's own output (progress bars, prints, tables) through logging,
    # beside lines of its own (each cell's start and end) that are not what a user reads
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    for noisy in ("traitlets", "asyncio", "httpx", "urllib3", "filelock"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    logging.getLogger("papermill").addFilter(notebook_output_only)
    from traitlets.config import Config

    from workbench import paths
    from workbench.config import preset

    for seed in (args.seed, args.train_seed):  # bad settings: one line here, not a notebook's traceback
        if seed is not None:
            preset(args.preset, **{"method.seed": seed})
    for flag, value in (("--steps", args.steps), ("--slots", args.slots)):
        if value is not None and value < (1 if flag == "--steps" else 0):
            raise ValueError(f"{flag} {value}: expected an integer >= {1 if flag == '--steps' else 0}")
    src = paths.notebooks_dir() / "00_quickstart.ipynb"
    out = paths.runs_dir() / "quickstart" / f"00_quickstart-{args.preset}{'-long' if args.long else ''}.ipynb"
    out.parent.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    print(f"quickstart ({args.preset}): running {src.name}; its output follows")
    # CurveZMQ keys for the kernel (its spec declares them), so it warns of no plain-text TCP
    papermill.execute_notebook(str(src), str(out), cwd=str(src.parent), progress_bar=False, log_output=True,
                               config=Config(KernelManager={"transport_encryption": "auto"}),
                               parameters={"preset": args.preset, "seed": args.seed, "db": args.db or "", "long": args.long,
                                           **{k: v for k, v in (("steps", args.steps), ("slots", args.slots),
                                                                 ("train_seed", args.train_seed))
                                              if v is not None}})
    minutes = (time.perf_counter() - start) / 60
    print(f"quickstart ({args.preset}) finished in {minutes:.1f} min")
    print(f"executed notebook: {out}")
    print(f"figures: {paths.figures_dir()}  (open the .html files in a browser)")
    return 0


# What papermill logs of its own around the notebook's output (execute.py, engines.py).
_PAPERMILL_OWN = ("Input Notebook:", "Output Notebook:", "Working directory:", "Executing notebook with kernel",
                  "Executing Cell", "Ending Cell")


def notebook_output_only(record: logging.LogRecord) -> bool:
    """A logging filter that keeps the notebook's own output and drops papermill's cell markers.

    Example:
        >>> notebook_output_only(logging.makeLogRecord({"msg": "Ending Cell 3---"}))
        False
        >>> notebook_output_only(logging.makeLogRecord({"msg": "round 2 of 6"}))
        True
    """
    return not record.getMessage().startswith(_PAPERMILL_OWN)
