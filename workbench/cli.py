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
    except duckdb.Error as err:
        line = str(err).splitlines()[0]
        if isinstance(err, duckdb.IOException) and "Could not write" not in line:
            # e.g. the store is open for writing in a notebook kernel
            print(f"workbench {args.command}: cannot open the store: {line}", file=sys.stderr)
            return 2
        from workbench import store

        # e.g. a disk that fills: DuckDB rolls the failed transaction back, earlier commits stay
        hint = (f"the store is damaged: {store.RESTORE}" if store.damaged(err)
                else "the failed transaction was rolled back")
        print(f"workbench {args.command}: store error: {line} ({hint})", file=sys.stderr)
        return 1
    except OSError as err:  # a read-only location, a disk that fills, a directory where a file belongs
        where = f": {err.filename}" if err.filename else ""
        print(f"workbench {args.command}: error: {err.strerror or err}{where}", file=sys.stderr)
        return 1
    except MemoryError:
        print(f"workbench {args.command}: error: out of memory (a size asked for is too large for this machine)",
              file=sys.stderr)
        return 1
    except RuntimeError as err:  # e.g. training stopped after repeated non-finite steps
        print(f"workbench {args.command}: stopped: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        resume = " (continue with --resume: a checkpoint is written after every round)" if args.command == "train" else ""
        print(f"workbench {args.command}: interrupted{resume}", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
