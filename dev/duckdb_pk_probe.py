"""How much memory DuckDB needs to commit N primary keys inserted in one transaction (issue 16).

Usage: python dev/duckdb_pk_probe.py DB --keys 75000000 --memory-limit 1GB

An import is one transaction and ``passages.passage_id`` is a PRIMARY KEY: at commit DuckDB holds
that index in memory, so ``--memory-limit`` of ``workbench import kilt`` has a floor that grows
with the number of passages (the real KILT dump has ~69M). Inserts ``--keys`` rows (BIGINT key,
BIGINT, short VARCHAR) in batches of 3M into a fresh store under the limit, commits, and prints
one JSON line: keys, limit, committed or the error, seconds, peak RSS MB. The store is deleted.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time

import duckdb


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("db")
    ap.add_argument("--keys", type=int, required=True)
    ap.add_argument("--memory-limit", required=True)
    args = ap.parse_args()
    if os.path.exists(args.db):
        raise SystemExit(f"{args.db}: exists; give a path for a fresh store")
    con = duckdb.connect(args.db)
    con.execute("SET memory_limit = ?", [args.memory_limit])
    con.execute("SET enable_progress_bar = false")
    con.execute("CREATE TABLE p (id BIGINT PRIMARY KEY, e BIGINT, t VARCHAR)")
    started = time.perf_counter()
    con.execute("BEGIN")
    batch = 3_000_000
    for first in range(0, args.keys, batch):
        con.execute("INSERT INTO p SELECT range + ?, range, 'x' FROM range(?)", [first, min(batch, args.keys - first)])
    try:
        con.execute("COMMIT")
        outcome = "committed"
    except duckdb.Error as err:
        outcome = str(err).splitlines()[0]
    con.close()
    for suffix in ("", ".wal"):
        if os.path.exists(args.db + suffix):
            os.remove(args.db + suffix)
    print(json.dumps({"keys": args.keys, "memory_limit": args.memory_limit, "outcome": outcome,
                      "seconds": round(time.perf_counter() - started, 1),
                      "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
