"""``workbench figures``: regenerate every table and figure of the paper beside the store's runs."""

from __future__ import annotations

import argparse

from workbench.commands import add_store, db_path, other_stores


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "figures", help="rebuild Tables 1-2 and Figures 3-4: the paper's numbers beside this store's runs",
        description="Writes HTML (and PNG where a Chromium exists) figures and Markdown/CSV tables; prints their paths.")
    add_store(parser)
    parser.add_argument("--paper-only", action="store_true", help="ignore the store: the paper's numbers alone")
    parser.add_argument("--out", default=None, help="output folder (default: figures/, env WORKBENCH_FIGURES)")
    parser.add_argument("--reference", default=None, metavar="FILE",
                        help="the reference runs shown beside the paper's and yours: a file in data/reference/ "
                             "or a path (default: workbench.reference.DEFAULT, the Table 2 rows at 56 rounds)")
    parser.add_argument("--table1-reference", default=None, metavar="FILE",
                        help="Table 1 at the tiny tier beside the paper's: a tiny_table1_* file in data/reference/ or "
                             "a path (default: the shipped one with the most rounds, if any)")
    parser.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from workbench import figures, reference

    db = db_path(args)
    if not args.paper_only and not Path(db).exists() and (args.db or args.preset != "tiny" or other_stores(db)):
        # a store named, or runs elsewhere: never fall back to the paper's numbers alone without saying so
        raise FileNotFoundError(f"--db: no store at {db}{other_stores(db)}; or --paper-only for the paper's numbers")
    figures.build_all(db=db, paper_only=args.paper_only, out_dir=args.out,
                      reference_file=args.reference or reference.DEFAULT, table1_file=args.table1_reference)
    return 0
