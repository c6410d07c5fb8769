"""``workbench bench walks|retrieval|rollout|loop``: speed figures as JSON, ratios measured in one run."""

from __future__ import annotations

import argparse
import importlib
import inspect
import json

from workbench.commands import db_path

# name -> (module, function, help); each function takes keyword arguments named like the bench's
# options (``--batch-sizes`` -> ``batch_sizes``) and returns a dict.
BENCHES = {
    "walks": ("workbench.kg.walks", "bench_walks", "CSR walker vs per-hop DuckDB loop vs set-based SQL"),
    "retrieval": ("workbench.search.bench", "bench_retrieval", "batched vs single queries, recall@3"),
    "rollout": ("workbench.method.bench", "bench_rollout", "tokens/s and questions/s by batch size"),
    "loop": ("workbench.method.bench", "bench_loop", "CoEvoKG round overhead, path support, write-back rates"),
}


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("bench", help="speed benchmarks (prints JSON)")
    benches = parser.add_subparsers(dest="bench", metavar="BENCH", required=True)
    for name, (module, func, help_) in BENCHES.items():
        p = benches.add_parser(name, help=help_)
        p.set_defaults(func=_runner(module, func))
        if name == "walks":
            p.add_argument("--edges", type=int, default=1_000_000, help="edges of the synthetic graph")
            p.add_argument("--walks", type=int, default=None, help="CSR walks to time (default: scaled)")
            p.add_argument("--seed", type=int, default=0)
        else:
            p.add_argument("--preset", default="tiny")
            p.add_argument("--db", default=None)
        if name in ("rollout", "retrieval"):
            p.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
        if name == "rollout":
            p.add_argument("--model", default=None, help="time this model (default: a random tiny model)")
            p.add_argument("--batch-sizes", dest="batch_sizes", type=int, nargs="+", default=None)
        if name == "retrieval":
            p.add_argument("--batch", type=int, default=256, help="queries per batched call (default 256)")


def _runner(module: str, func: str):
    def run(args: argparse.Namespace) -> int:
        bench = getattr(importlib.import_module(module), func)
        print(json.dumps(bench(**_keywords(bench, args)), indent=2))
        return 0
    return run


def _keywords(bench, args: argparse.Namespace) -> dict:
    """The options ``bench`` takes, by name; ``--db`` resolved to the preset's store when not given.
    Options left unset (None) are left out, so the library's defaults apply.

    Example:
        >>> def bench_x(db=":memory:", seed=0): ...
        >>> kw = _keywords(bench_x, argparse.Namespace(db=None, preset="smoke", seed=None, func=print))
        >>> sorted(kw), kw["db"].endswith("smoke.duckdb")
        (['db'], True)
    """
    given = {k: v for k, v in vars(args).items() if v is not None}
    if "db" in vars(args):
        given["db"] = db_path(args)
    accepted = inspect.signature(bench).parameters
    return {k: v for k, v in given.items() if k in accepted}
