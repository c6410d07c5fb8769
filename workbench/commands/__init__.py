"""Subcommands of the ``workbench`` CLI, one module per area, each with ``register(subparsers)``."""

import argparse

from workbench import paths


def add_db(parser: argparse.ArgumentParser, preset_default: str = "tiny") -> None:
    """The ``--db PATH`` option every writing subcommand takes (default ``data/<preset>.duckdb``)."""
    parser.add_argument("--db", default=None,
                        help=f"DuckDB store (default: data/<preset>.duckdb, i.e. {paths.default_db(preset_default).name})")


def db_path(args: argparse.Namespace) -> str:
    return args.db or str(paths.default_db(getattr(args, "preset", None) or "tiny"))
