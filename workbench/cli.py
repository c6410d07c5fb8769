"""The ``workbench`` command: a thin face over the package.

Each module of ``workbench.commands`` adds its subcommands through ``register(subparsers)``;
heavy imports (torch, transformers) happen inside the handlers so ``--help`` stays instant.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys

from workbench import commands


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="workbench",
        description="CoEvoKG workbench: knowledge-graph chain pools, search agents and their co-evolution.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        importlib.import_module(f"workbench.commands.{info.name}").register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 0
    try:
        return int(args.func(args) or 0)
    except (ValueError, FileNotFoundError) as err:  # bad input: a clear message, no traceback
        print(f"workbench {args.command}: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
