"""``workbench figures``: regenerate every table and figure of the paper beside the store's runs."""

from __future__ import annotations

import argparse

from workbench.commands import add_db, db_path


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "figures", help="rebuild Tables 1-2 and Figures 3-4: the paper's numbers beside this store's runs",
        description="Writes HTML (and PNG where a Chromium exists) figures and Markdown/CSV tables; prints their paths.")
    add_db(parser)
    parser.add_argument("--paper-only", action="store_true", help="ignore the store: the paper's numbers alone")
    parser.add_argument("--out", default=None, help="output folder (default: figures/, env WORKBENCH_FIGURES)")
    parser.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from workbench import figures

    figures.build_all(db=db_path(args), paper_only=args.paper_only, out_dir=args.out)
    return 0
