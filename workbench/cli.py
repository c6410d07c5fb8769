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


def raised_by_workbench(err: BaseException) -> bool:
    """Whether ``err`` is a plain RuntimeError raised in the workbench's own code (its message is
    the whole story); a library's error (a CUDA failure inside vLLM, say) keeps its traceback.

    Example:
        >>> try:
        ...     raise RuntimeError("raised outside the package")
        ... except RuntimeError as e:
        ...     raised_by_workbench(e)
        False
    """
    import traceback
    from pathlib import Path

    frames = traceback.extract_tb(err.__traceback__)
    package = Path(__file__).resolve().parent
    return type(err) is RuntimeError and bool(frames) and package in Path(frames[-1].filename).resolve().parents


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
        from workbench import store

        if isinstance(err, duckdb.IOException) and "Could not write" not in line:
            # e.g. the store is open for writing in a notebook kernel: say which process, and how to release it
            print(f"workbench {args.command}: cannot open the store: {store.lock_holder(err) or line}", file=sys.stderr)
            return 2

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
        if not raised_by_workbench(err):  # a library's failure (CUDA, vLLM): where it happened is the clue
            import traceback

            traceback.print_exception(err, file=sys.stderr)
        print(f"workbench {args.command}: stopped: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        resume = " (continue with --resume: a checkpoint is written after every round)" if args.command == "train" else ""
        print(f"workbench {args.command}: interrupted{resume}", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
