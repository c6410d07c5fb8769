"""``workbench bench topology``: EoG's query patterns (``kg.topology``: 1p 2p 3p 2i ip pi) executed
by the in-memory index against one DuckDB statement each, on the same sampled queries.

Example:
    >>> r = bench_topology(edges=5000, n_queries=3)
    >>> r["edges"], sorted(r["2p"])
    (5000, ['csr_ms', 'n', 'sql_ms', 'sql_vs_csr'])
"""

from __future__ import annotations

import time

import numpy as np

from workbench.kg.topology import MAX_ANSWERS, PATTERNS, TopologyGraph, execute, execute_sql, sample_queries
from workbench.limits import peak_rss_mb


def bench_execution(con, n_queries: int = 300, seed: int = 0, max_answers: int = MAX_ANSWERS) -> dict:
    """Milliseconds per query, per pattern, of :func:`execute` (in-memory index) and
    :func:`execute_sql` (DuckDB) on the same ``n_queries`` sampled queries of the store's graph,
    checking that both give the same answers. Index build time is reported apart.

    Example:
        >>> from workbench import store
        >>> from workbench.kg.tinyworld import build_world
        >>> con = store.connect(":memory:"); _ = build_world(con, preset="smoke", seed=0)
        >>> r = bench_execution(con, n_queries=5)
        >>> sorted(r["1p"])
        ['csr_ms', 'n', 'sql_ms', 'sql_vs_csr']
    """
    t0 = time.perf_counter()
    g = TopologyGraph.from_store(con)
    out: dict = {"build_ms": round(1000 * (time.perf_counter() - t0), 2)}
    for p in PATTERNS:
        qs = sample_queries(g, p, n_queries, seed=seed, max_answers=max_answers)
        if not qs:
            out[p] = {"n": 0, "csr_ms": None, "sql_ms": None, "sql_vs_csr": None}
            continue
        t0 = time.perf_counter()
        a = [execute(g, p, q.anchors, q.relations) for q in qs]
        t_csr = time.perf_counter() - t0
        t0 = time.perf_counter()
        b = [execute_sql(con, p, q.anchors, q.relations) for q in qs]
        t_sql = time.perf_counter() - t0
        if any(not np.array_equal(x, y) for x, y in zip(a, b)):
            raise AssertionError(f"pattern {p}: the index and SQL disagree")
        out[p] = {"n": len(qs), "csr_ms": round(1000 * t_csr / len(qs), 4), "sql_ms": round(1000 * t_sql / len(qs), 4),
                  "sql_vs_csr": round(t_sql / t_csr, 1)}
    return out


def bench_topology(edges: int = 1_000_000, n_queries: int = 50, seed: int = 0,
                   max_answers: int = MAX_ANSWERS) -> dict:
    """``workbench bench topology --edges N``: per pattern, milliseconds per query of :func:`execute`
    (the in-memory index) and :func:`execute_sql` (one DuckDB statement) on the same ``n_queries``
    sampled queries of one synthetic graph (``bench.walks.synthetic_edges``: power-law degrees, 20
    relation labels) of ``edges`` edges, in one run, answers checked equal; ``sql_vs_csr`` is the
    ratio. Loading the edges into DuckDB (``load_s``) and building the index from the store
    (``build_ms``) are reported apart; sampling the queries is not timed.

    Example:
        >>> r = bench_topology(edges=5000, n_queries=3)
        >>> r["edges"], sorted(r["2p"])
        (5000, ['csr_ms', 'n', 'sql_ms', 'sql_vs_csr'])
    """
    from workbench import store
    from workbench.bench.walks import synthetic_edges

    n_edges = int(edges)
    if n_edges < 1:
        raise ValueError(f"edges: expected a positive number of edges, got {n_edges}")
    if n_queries < 1:
        raise ValueError(f"n_queries: expected >= 1, got {n_queries}")
    src, dst, rel, n_nodes = synthetic_edges(n_edges, seed)
    con = store.connect(":memory:")
    t0 = time.perf_counter()
    con.register("bench_in", {"src": src, "dst": dst, "rid": rel})
    con.execute("INSERT INTO edges SELECT src, dst, 'r' || rid, 'synthetic' FROM bench_in")
    con.unregister("bench_in")
    load_s = time.perf_counter() - t0
    del src, dst, rel
    out = bench_execution(con, n_queries=n_queries, seed=seed, max_answers=max_answers)
    con.close()
    return {"edges": n_edges, "nodes": n_nodes, "load_s": round(load_s, 2), **out, "peak_rss_mb": peak_rss_mb()}
