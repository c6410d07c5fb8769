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
    import duckdb

    try:
        return int(args.func(args) or 0)
    except (ValueError, FileNotFoundError) as err:  # bad input: a clear message, no traceback
        print(f"workbench {args.command}: error: {err}", file=sys.stderr)
        return 2
    except duckdb.IOException as err:  # e.g. the store is open for writing in a notebook kernel
        print(f"workbench {args.command}: cannot open the store: {str(err).splitlines()[0]}", file=sys.stderr)
        return 2
    except RuntimeError as err:  # e.g. training stopped after repeated non-finite steps
        print(f"workbench {args.command}: stopped: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        resume = " (continue with --resume: a checkpoint is written after every round)" if args.command == "train" else ""
        print(f"workbench {args.command}: interrupted{resume}", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
