"""``workbench bench walks``: the CSR walker against a per-hop query loop and a set-based SQL walk
(issue 2, "Speed"; ``kg.walks``).

The paper builds G_0 "offline by random walks" because "walking a large knowledge graph online is
expensive, since each hop queries an external graph database": :func:`bench_walks` measures the
workbench's design (the whole ``edges`` table in a CSR array, every hop of every walk one numpy
step) against both.

Example:
    >>> src, dst, rel, n = synthetic_edges(1000, seed=0)
    >>> len(src), n
    (1000, 125)
"""

from __future__ import annotations

import time

import numpy as np

from workbench.kg.walks import CSRGraph, random_walks
from workbench.limits import peak_rss_mb


def synthetic_edges(n_edges: int, seed: int = 0, n_labels: int = 20):
    """A seeded random multigraph with ``n_edges`` edges and power-law-ish degrees.

    Nodes: ``max(n_edges // 8, 16)`` (ours); endpoint popularity ~ rank^-0.8 (ours), so a few hubs
    have thousands of edges as in a hyperlink graph. Returns (src, dst, rel_ids, n_nodes).

    Example:
        >>> src, dst, rel, n = synthetic_edges(1000, seed=0)
        >>> len(src), n
        (1000, 125)
    """
    rng = np.random.default_rng(seed)
    n_nodes = max(n_edges // 8, 16)
    weight = np.arange(1, n_nodes + 1, dtype=np.float64) ** -0.8
    cdf = np.cumsum(rng.permutation(weight))
    cdf /= cdf[-1]
    src = np.minimum(np.searchsorted(cdf, rng.random(n_edges)), n_nodes - 1)
    dst = np.minimum(np.searchsorted(cdf, rng.random(n_edges)), n_nodes - 1)
    rel = rng.integers(0, n_labels, n_edges).astype(np.int32)
    return src.astype(np.int64), dst.astype(np.int64), rel, n_nodes


def per_hop_walks(con, starts: np.ndarray, hops: int, seed: int = 0) -> np.ndarray:
    """Walks by one ``SELECT ... WHERE src = ?`` per hop per walk: what serving each hop from a
    graph database costs (the design seed 000, section 3.2 calls expensive). Returns node ids."""
    rng = np.random.default_rng(seed)
    out = np.full((len(starts), hops + 1), -1, dtype=np.int64)
    for w, node in enumerate(starts):
        out[w, 0] = node
        for h in range(hops):
            rows = con.execute("SELECT dst, rid FROM bench_edges WHERE src = ?", [int(node)]).fetchall()
            if not rows:
                break
            node = rows[int(rng.integers(len(rows)))][0]
            out[w, h + 1] = node
    return out


def sql_walks(con, starts: np.ndarray, hops: int, seed: int = 0, method: str = "csr") -> np.ndarray:
    """Set-based walks in DuckDB: all walks advance one hop per statement.

    ``method='window'``: join each walk to all out-edges of its node, draw ``random()`` in a
    subquery (DuckDB refuses a volatile ORDER BY inside a window) and keep ``row_number() = 1``.
    ``method='csr'``: the same walk over a numbered-neighbour table (CSR in SQL): draw one
    offset ``floor(random() * degree)`` per walk and join on it, so hubs do not blow up the join.
    Expects ``bench_nbr(src, k, dst, rid)`` and ``bench_deg(src, d)`` (see ``_prepare_sql``).
    Returns node ids (walks that reached ``hops`` hops, hops + 1), in walk order.
    """
    con.execute("SELECT setseed(?)", [((seed % 1000) / 1000.0)]).fetchall()
    con.register("bench_starts", {"walk": np.arange(len(starts)), "n0": np.asarray(starts)})
    con.execute("CREATE OR REPLACE TEMP TABLE bw AS SELECT walk, n0, n0 AS cur FROM bench_starts")
    cols = ["walk", "n0"]
    for h in range(hops):
        keep = ", ".join(f"w.{c}" for c in cols)
        if method == "csr":
            step = f"""SELECT {keep}, n.dst AS n{h + 1}, n.rid AS r{h}, n.dst AS cur
                FROM (SELECT w.*, floor(random() * d.d)::BIGINT AS k FROM bw w JOIN bench_deg d ON d.src = w.cur) w
                JOIN bench_nbr n ON n.src = w.cur AND n.k = w.k"""
        elif method == "window":
            step = f"""SELECT {keep}, n{h + 1}, r{h}, n{h + 1} AS cur FROM (
                SELECT *, row_number() OVER (PARTITION BY walk ORDER BY u) AS rn FROM (
                    SELECT w.*, e.dst AS n{h + 1}, e.rid AS r{h}, random() AS u
                    FROM bw w JOIN bench_edges e ON e.src = w.cur)) w WHERE rn = 1"""
        else:
            raise ValueError(f"method: expected 'csr' or 'window', got {method!r}")
        con.execute(f"CREATE OR REPLACE TEMP TABLE bw AS {step}")
        cols += [f"n{h + 1}", f"r{h}"]
    node_cols = ", ".join(f"n{h}" for h in range(hops + 1))
    # Dead-ended walks drop out of the inner joins (about 3% on the bench graph); rates count
    # every started walk, which flatters SQL slightly.
    res = con.execute(f"SELECT {node_cols} FROM bw ORDER BY walk").fetchnumpy()
    con.unregister("bench_starts")
    return np.stack([np.asarray(res[f"n{h}"]) for h in range(hops + 1)], axis=1) if len(res["n0"]) else \
        np.zeros((0, hops + 1), dtype=np.int64)


def _prepare_sql(con, src, dst, rel) -> None:
    """Write the synthetic graph as a DuckDB table plus the indexes each SQL design gets."""
    con.register("bench_in", {"src": src, "dst": dst, "rid": rel})
    con.execute("CREATE OR REPLACE TABLE bench_edges AS SELECT * FROM bench_in")
    con.unregister("bench_in")
    # A graph database serves a hop from an index on the source; give the per-hop loop one too.
    con.execute("CREATE INDEX bench_edges_src ON bench_edges (src)")
    con.execute("""CREATE OR REPLACE TEMP TABLE bench_nbr AS
        SELECT src, (row_number() OVER (PARTITION BY src ORDER BY dst, rid) - 1) AS k, dst, rid FROM bench_edges""")
    con.execute("CREATE OR REPLACE TEMP TABLE bench_deg AS SELECT src, count(*) AS d FROM bench_edges GROUP BY src")


def _rate(fn, n: int, min_seconds: float = 0.5) -> float:
    """Walks per second of ``fn()`` (which does ``n`` walks), best of repeats within ~min_seconds."""
    best, spent = float("inf"), 0.0
    while spent < min_seconds or best == float("inf"):
        t0 = time.perf_counter()
        fn()
        dt = time.perf_counter() - t0
        best, spent = min(best, dt), spent + dt
    return n / best


def bench_walks(edges: int = 1_000_000, walks: int | None = None, seed: int = 0, per_hop: int = 200,
                sql: int | None = None) -> dict:
    """``workbench bench walks --edges N``: 3-hop walks per second of the CSR walker, a per-hop
    DuckDB query loop and a set-based DuckDB SQL walk on one synthetic graph of ``edges`` edges,
    with their ratios.

    The CSR graph is built from the same DuckDB table the SQL designs read (``from_store``-style);
    build times are not counted, walks are. ``walks`` CSR walks are timed (default
    max(10**6, edges)); the per-hop loop times ``per_hop`` walks and extrapolates the rate; the
    set-based SQL walk times ``sql`` walks (default edges // 5, within 1,000-200,000) with
    ``sql_walks(method='csr')``, the faster of its two designs (the window design joins every
    out-edge of hub nodes: about 20x slower at 1M edges), so the ratio is against the strongest
    SQL baseline.

    Example:
        >>> r = bench_walks(edges=20000, walks=20000, seed=0, per_hop=20, sql=2000)
        >>> sorted(r)[:3]
        ['csr_vs_per_hop', 'csr_vs_sql', 'csr_walks_per_s']
    """
    import duckdb

    hops, n_edges = 3, int(edges)
    if n_edges < 1:
        raise ValueError(f"edges: expected a positive number of edges, got {n_edges}")
    n_csr = int(walks or max(10**6, n_edges))
    n_hop = int(per_hop)
    n_sql = int(sql or min(200_000, max(n_edges // 5, 1000)))

    src, dst, rel, n_nodes = synthetic_edges(n_edges, seed)
    con = duckdb.connect(":memory:")
    _prepare_sql(con, src, dst, rel)
    del src, dst, rel
    e = con.execute("SELECT src, dst, rid FROM bench_edges").fetchnumpy()
    graph = CSRGraph.from_edges(e["src"], e["dst"], e["rid"], n_nodes)
    del e

    csr_rate = _rate(lambda: random_walks(graph, n_csr, hops, seed), n_csr, min_seconds=1.0)
    starts = graph.node_ids[np.flatnonzero(graph.degree() > 0)]
    starts = np.random.default_rng(seed).choice(starts, max(n_hop, n_sql))
    hop_rate = _rate(lambda: per_hop_walks(con, starts[:n_hop], hops, seed), n_hop, min_seconds=0.0)
    sql_rate = _rate(lambda: sql_walks(con, starts[:n_sql], hops, seed, method="csr"), n_sql, min_seconds=1.0)
    con.close()
    return {
        "edges": n_edges,
        "csr_walks_per_s": round(csr_rate),
        "per_hop_walks_per_s": round(hop_rate, 1),
        "sql_walks_per_s": round(sql_rate),
        "csr_vs_per_hop": round(csr_rate / hop_rate, 1),
        "csr_vs_sql": round(csr_rate / sql_rate, 1),
        "peak_rss_mb": peak_rss_mb(),
    }
