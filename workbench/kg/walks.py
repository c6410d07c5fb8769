"""Random walks over the labelled hyperlink graph, vectorised over walks (seed 000, section 3.2).

The paper builds G_0 "offline by random walks" because "walking a large knowledge graph online is
expensive, since each hop queries an external graph database". Here the whole ``edges`` table is
loaded once into a compressed sparse row (CSR) array and every hop of every walk is one numpy step.
``bench.walks`` measures that design against a per-hop query loop and a set-based SQL walk.

Example:
    >>> import numpy as np
    >>> g = CSRGraph.from_edges(np.array([0, 1, 2]), np.array([1, 2, 0]), np.array([0, 0, 1]), 3,
    ...                         labels=("born in", "located in"))
    >>> nodes, rels = random_walks(g, n_walks=2, hops=2, seed=0)
    >>> nodes.shape, rels.shape
    ((2, 3), (2, 2))
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class CSRGraph:
    """A directed multigraph in CSR form: the out-edges of node ``i`` are entries
    ``indptr[i]:indptr[i+1]`` of ``indices`` (target node) and ``rels`` (relation id). Both carry
    one trailing -1 entry that walks which have ended point at.

    Node ``i`` is the store entity ``node_ids[i]``; relation id ``r`` is the label ``labels[r]``.
    """

    indptr: np.ndarray  # int64, n_nodes + 1
    indices: np.ndarray  # int32/int64, n_edges + 1: target node; the last entry is a -1 sentinel
    rels: np.ndarray  # int32, n_edges + 1: relation id; the last entry is a -1 sentinel
    labels: tuple[str, ...]
    node_ids: np.ndarray  # int64, n_nodes: the store's entity_id of each node

    @property
    def n_nodes(self) -> int:
        return len(self.indptr) - 1

    @property
    def n_edges(self) -> int:
        return int(self.indptr[-1])

    def degree(self) -> np.ndarray:
        """Out-degree of every node."""
        return np.diff(self.indptr)

    def to_entity(self, nodes: np.ndarray) -> np.ndarray:
        """Map node indices to store entity ids, keeping -1 (no node) as -1.

        Example:
            >>> g = CSRGraph.from_edges([0], [1], [0], 2, node_ids=[10, 20])
            >>> g.to_entity(np.array([1, -1])).tolist()
            [20, -1]
        """
        nodes = np.asarray(nodes)
        return np.where(nodes >= 0, self.node_ids[np.maximum(nodes, 0)], -1)

    @classmethod
    def from_edges(cls, src, dst, rel_ids, n_nodes: int, labels=None, node_ids=None) -> "CSRGraph":
        """Build from parallel arrays of node indices in ``[0, n_nodes)`` and relation ids.

        Duplicate (src, dst, rel) rows are kept as given (``from_store`` removes them).

        Example:
            >>> g = CSRGraph.from_edges([0, 0, 1], [1, 2, 2], [0, 1, 0], 3)
            >>> g.degree().tolist(), g.labels
            ([2, 1, 0], ('r0', 'r1'))
        """
        src = np.asarray(src, dtype=np.int64)
        dst = np.asarray(dst, dtype=np.int64)
        rel_ids = np.asarray(rel_ids, dtype=np.int32)
        if not (len(src) == len(dst) == len(rel_ids)):
            raise ValueError(f"src, dst and rel_ids differ in length ({len(src)}, {len(dst)}, {len(rel_ids)})")
        if len(src) and (min(src.min(), dst.min()) < 0 or max(src.max(), dst.max()) >= n_nodes):
            raise ValueError(f"edge endpoints must lie in [0, n_nodes={n_nodes})")
        n_rels = int(rel_ids.max()) + 1 if len(rel_ids) else 0
        if labels is None:
            labels = tuple(f"r{i}" for i in range(n_rels))
        if len(labels) < n_rels:
            raise ValueError(f"{len(labels)} labels given for relation ids up to {n_rels - 1}")
        # Stable sort keeps each node's neighbours in input order, so the graph (and every walk
        # drawn from it) depends only on the input rows.
        order = np.argsort(src, kind="stable")
        counts = np.bincount(src, minlength=n_nodes)
        indptr = np.zeros(n_nodes + 1, dtype=np.int64)
        np.cumsum(counts, out=indptr[1:])
        index_dtype = np.int32 if n_nodes < 2**31 else np.int64  # halves the random gathers' memory traffic
        node_ids = np.arange(n_nodes, dtype=np.int64) if node_ids is None else np.asarray(node_ids, dtype=np.int64)
        indices = np.append(dst[order], -1).astype(index_dtype)
        return cls(indptr, indices, np.append(rel_ids[order], -1).astype(np.int32), tuple(labels), node_ids)

    @classmethod
    def from_store(cls, con) -> "CSRGraph":
        """Load the store's ``edges`` table (distinct (src, dst, relation) rows).

        Nodes are every entity of ``entities`` plus every edge endpoint, numbered in entity-id
        order; relation ids number the labels alphabetically.

        Example:
            >>> from workbench import store
            >>> con = store.connect(":memory:")
            >>> _ = con.execute("INSERT INTO edges VALUES (5, 7, 'born in', 't'), (7, 9, 'located in', 't')")
            >>> g = CSRGraph.from_store(con)
            >>> g.n_nodes, g.n_edges, g.labels
            (3, 2, ('born in', 'located in'))
        """
        labels = tuple(r for (r,) in con.execute(
            "SELECT DISTINCT relation FROM edges WHERE relation IS NOT NULL ORDER BY relation").fetchall())
        cols = con.execute("""
            WITH labs AS (SELECT relation, (row_number() OVER (ORDER BY relation) - 1)::INTEGER AS rid
                          FROM (SELECT DISTINCT relation FROM edges WHERE relation IS NOT NULL))
            SELECT DISTINCT e.src, e.dst, l.rid FROM edges e JOIN labs l USING (relation)
            ORDER BY e.src, e.dst, l.rid""").fetchnumpy()
        src, dst, rid = (np.asarray(cols[k]) for k in ("src", "dst", "rid"))
        node_ids = np.asarray(con.execute("""
            SELECT entity_id AS id FROM entities UNION SELECT src FROM edges UNION SELECT dst FROM edges
            ORDER BY id""").fetchnumpy()["id"], dtype=np.int64)
        return cls.from_edges(np.searchsorted(node_ids, src), np.searchsorted(node_ids, dst), rid,
                              len(node_ids), labels=labels, node_ids=node_ids)


MAX_HOPS = 64  # ours: far beyond the paper's 2-3 hops; bounds the walk arrays (each hop a column)


def hop_range(hops, name: str = "hops") -> tuple[int, int]:
    """``3`` -> (3, 3); ``(2, 3)`` or ``range(2, 4)`` -> (2, 3); ``"2-3"`` -> (2, 3).

    Raises ValueError naming the parameter (``name``) when the value is not N or MIN-MAX with
    1 <= MIN <= MAX <= :data:`MAX_HOPS`.

    Example:
        >>> hop_range("2-3"), hop_range(3), hop_range(range(2, 4))
        ((2, 3), (3, 3), (2, 3))
    """
    try:
        if isinstance(hops, range):
            lo, hi = hops.start, hops.stop - 1
        elif isinstance(hops, str):
            parts = hops.strip().split("-")
            if len(parts) not in (1, 2):
                raise ValueError
            lo, hi = int(parts[0]), int(parts[-1])
        elif isinstance(hops, (tuple, list)):
            lo, hi = (int(h) for h in hops)
        else:
            lo = hi = int(hops)
    except (TypeError, ValueError):
        lo = hi = None
    if lo is None or not 1 <= lo <= hi <= MAX_HOPS:
        raise ValueError(f"{name}: expected N or MIN-MAX with 1 <= MIN <= MAX <= {MAX_HOPS} (e.g. 3 or 2-3), "
                         f"got {hops!r}")
    return lo, hi


def walk_bytes(max_hops: int) -> int:
    """Memory one walk of up to ``max_hops`` hops may take while a pool is built (ours, measured
    with margin: ~500 bytes at 3 hops): its node and relation columns, the walker's and filters'
    temporaries, and the deduplication key of a kept walk."""
    return 64 * (max_hops + 1) + 512


def check_walk_memory(n_walks: int, max_hops: int, name: str = "walks") -> None:
    """ValueError naming ``name`` when ``n_walks`` walks would not fit in the memory available now,
    before anything is allocated (10**12 walks would otherwise ask numpy for tebibytes).

    Example:
        >>> check_walk_memory(10**12, 3)
        Traceback (most recent call last):
        ...
        ValueError: walks: 1,000,000,000,000 walks of up to 3 hops: needs about 698.5 TiB of memory, ...
    """
    from workbench.limits import available_memory, check_memory

    check_memory(n_walks * walk_bytes(max_hops), f"{name}: {n_walks:,} walks of up to {max_hops} hops",
                 f"ask for at most about {available_memory() // walk_bytes(max_hops):,} walks")


def random_walks(graph: CSRGraph, n_walks: int, hops, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``n_walks`` uniform random walks, one numpy step per hop over all walks at once.

    Each walk starts at a node drawn uniformly among nodes with out-edges (ours: the paper does
    not say how starts are drawn) and moves to a uniformly drawn out-edge. With a hop range each
    walk first draws its length uniformly in [MIN, MAX]. Returns ``nodes`` (n_walks, MAX + 1,
    int64 node indices) and ``rels`` (n_walks, MAX, int32 relation ids); positions past a walk's
    length or after a dead end are -1. The same graph and seed give the same walks.

    Example:
        >>> g = CSRGraph.from_edges([0, 1, 1], [1, 0, 2], [0, 1, 1], 3)
        >>> nodes, rels = random_walks(g, 4, hops=(2, 3), seed=1)
        >>> bool(((nodes[:, 1:] >= 0) == (rels >= 0)).all())
        True
    """
    lo, hi = hop_range(hops)
    if n_walks < 0:
        raise ValueError(f"n_walks must be >= 0, got {n_walks}")
    check_walk_memory(n_walks, hi, "n_walks")
    rng = np.random.default_rng(seed)
    # Node -1 (a finished or dead walk) reads the trailing 0 of ``deg`` and the trailing sentinel
    # edge of ``indices``/``rels``, so finished walks stay at -1 without compacting arrays.
    deg = np.append(graph.degree(), 0).astype(np.int32)
    sources = np.flatnonzero(deg > 0)
    nodes = np.empty((n_walks, hi + 1), dtype=np.int64)
    rels = np.empty((n_walks, hi), dtype=np.int32)
    if len(sources) == 0:
        nodes.fill(-1)
        rels.fill(-1)
        return nodes, rels
    cur = sources[rng.integers(0, len(sources), n_walks)].astype(graph.indices.dtype)
    nodes[:, 0] = cur
    length = rng.integers(lo, hi + 1, n_walks) if lo < hi else None
    for h in range(hi):
        d = deg[cur]
        if length is not None:
            d[length <= h] = 0
        off = graph.indptr[cur] + (rng.random(n_walks) * d).astype(np.int64)
        off[d == 0] = graph.n_edges  # the sentinel edge: target -1, relation -1
        cur = graph.indices[off]
        nodes[:, h + 1] = cur
        rels[:, h] = graph.rels[off]
    return nodes, rels
