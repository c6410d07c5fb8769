"""Subcommands of the ``workbench`` CLI, one module per area, each with ``register(subparsers)``."""

import argparse
import logging
import sys

from workbench import paths


def add_db(parser: argparse.ArgumentParser, preset_default: str = "tiny") -> None:
    """The ``--db PATH`` option every writing subcommand takes (default ``data/<preset>.duckdb``)."""
    parser.add_argument("--db", default=None,
                        help=f"DuckDB store (default: data/<preset>.duckdb, i.e. {paths.default_db(preset_default).name})")


def add_store(parser: argparse.ArgumentParser) -> None:
    """``--preset`` and ``--db`` for a command that reads a store: the store ``train`` and ``world``
    wrote at that preset (``data/<preset>.duckdb``) unless ``--db`` names another."""
    parser.add_argument("--preset", default="tiny",
                        help="read the store of this preset, data/<preset>.duckdb, as train wrote it (default tiny)")
    add_db(parser)


def other_stores(db: str) -> str:
    """``"; stores in data/: smoke.duckdb (--preset smoke)"`` for the stores beside a missing ``db``, else ``""``."""
    from pathlib import Path

    found = sorted(p.name for p in paths.data_dir().glob("*.duckdb") if p.is_file() and str(p) != str(db))
    if not found:
        return ""
    named = ", ".join(f"{n} (--preset {n.removesuffix('.duckdb')})" for n in found)
    return f"; stores in {paths.data_dir()}: {named}"


def db_path(args: argparse.Namespace) -> str:
    return args.db or str(paths.default_db(getattr(args, "preset", None) or "tiny"))


def existing_db(args: argparse.Namespace, hint: str = "build a world first: workbench world --db PATH") -> str:
    """``db_path(args)``, or FileNotFoundError when no store is there (reading must not create one)."""
    from pathlib import Path

    db = db_path(args)
    if not Path(db).exists():
        raise FileNotFoundError(f"--db: no store at {db} (no such store; {hint}){other_stores(db)}")
    return db


def add_set(parser: argparse.ArgumentParser) -> None:
    """The repeatable ``--set section.field=value`` config override."""
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="SECTION.FIELD=VALUE",
                        help="override a config value, e.g. --set method.lr=1e-4 (repeatable)")


def overrides(args: argparse.Namespace) -> dict:
    """``--set`` pairs as ``{"section.field": value}`` (values parsed as YAML scalars)."""
    import yaml

    out = {}
    for pair in args.overrides:
        key, sep, value = pair.partition("=")
        if not sep:
            raise ValueError(f"--set: expected section.field=value, got {pair!r}")
        try:
            out[key] = yaml.safe_load(value)
        except yaml.YAMLError as err:  # e.g. a tag such as !!python/object: safe_load refuses it
            reason = str(err).splitlines()[0]
            raise ValueError(f"--set {pair!r}: expected a plain value (a number, true/false or text), "
                             f"not YAML's {reason!r}") from None
    return out


class _Stderr(logging.StreamHandler):
    """A handler that writes to whatever ``sys.stderr`` is when a record comes (as logging's
    last-resort handler does), not to the stream of the moment it was made."""

    def __init__(self):
        super().__init__()
        self.setFormatter(logging.Formatter("%(asctime)s %(name)s: %(message)s"))

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, _value):
        pass


def log_to_stderr(level: int = logging.INFO) -> None:
    """Send the workbench's own log records (a round's stages as they end, a benchmark's rows as
    they are measured) to stderr at ``level``, so a command cut short still shows how far it got;
    other libraries' logging is left as it is, and the records are not also passed to the root
    logger's handlers (no second copy where an application configured those).

    Example:
        >>> log_to_stderr(); logging.getLogger("workbench").level == logging.INFO
        True
    """
    log = logging.getLogger("workbench")
    if not any(isinstance(h, _Stderr) for h in log.handlers):
        log.addHandler(_Stderr())
    log.setLevel(level)
    log.propagate = False
