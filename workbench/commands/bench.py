"""``workbench bench walks|retrieval|rollout|loop``: speed figures as JSON, ratios measured in one run."""

from __future__ import annotations

import argparse
import importlib
import json

# name -> (module, function, help); each function takes the parsed args and returns a dict.
BENCHES = {
    "walks": ("workbench.kg.walks", "bench_walks", "CSR walker vs per-hop DuckDB loop vs set-based SQL"),
    "retrieval": ("workbench.search.bench", "bench_retrieval", "batched vs single queries, recall@3"),
    "rollout": ("workbench.policy.bench", "bench_rollout", "tokens/s and questions/s by batch size"),
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
        result = getattr(importlib.import_module(module), func)(args)
        print(json.dumps(result, indent=2))
        return 0
    return run
