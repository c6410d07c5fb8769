"""Logical-query topologies executed over the store's graph (seed 004, EoG, its Table 6; issue 19).

EoG's proposer synthesises questions over first-order query patterns executed on the KG, so every
task comes with its complete answer set. The six patterns, with anchors ``a``, intermediate
variables ``y``, answer variable ``x`` and relations ``r``:

* ``1p``: r1(a, x)
* ``2p``: r1(a, y) ∧ r2(y, x)
* ``3p``: r1(a, y1) ∧ r2(y1, y2) ∧ r3(y2, x)
* ``2i``: r1(a1, x) ∧ r2(a2, x)
* ``ip``: r1(a1, y) ∧ r2(a2, y) ∧ r3(y, x)
* ``pi``: r1(a1, y) ∧ r2(y, x) ∧ r3(a2, x)

``execute`` returns the complete answer set (store entity ids) of one query over a
:class:`TopologyGraph` (the store's ``edges`` table in memory, indexed by (src, relation) both
ways); ``execute_sql`` is the same query as one DuckDB statement over ``edges``. ``sample_queries``
draws queries deterministically by seed so that answer sets are non-empty and at most
``max_answers`` large; ``count_queries`` counts every such query per pattern (DuckDB).

Why CSR in memory, not SQL (measured, ``bench.topology.bench_execution``): executing 300 sampled
queries per pattern on the tiny world (preset ``tiny``, seed 0, 9,844 edges) on this 2-core machine took
0.013-0.041 ms per query with the in-memory index and 1.0-2.7 ms per query with DuckDB (one
statement per query over ``edges``, answers checked equal): the index is 64-86x faster per query
(smoke world: 66-85x; index build 14 ms on the tiny world), and sampling
executes every candidate query, so ``execute``/``sample_queries`` use it. SQL stays for
``count_queries``, which enumerates all groundings at once (set-based, where DuckDB is strong),
and as an independent implementation the tests check the index against. Command::

    PYTHONPATH=$PWD python -c "from workbench import store; from workbench.kg import tinyworld; \\
    from workbench.bench import topology; \\
    con = store.connect(':memory:'); tinyworld.build_world(con, preset='tiny', seed=0); \\
    print(topology.bench_execution(con, n_queries=300, seed=0))"

Every pattern occurs on TinyWorld (seed 0; no generator change needed): ``count_queries`` with
1-20 answers gives smoke 1p 836, 2p 2,222, 3p 6,736, 2i 6,788, ip 16,142, pi 52,270 and tiny
1p 8,627, 2p 22,892, 3p 69,458, 2i 92,563, ip 186,478, pi 717,208; with 2-20 answers (sets of more
than one entity) smoke 70 / 647 / 2,607 / 19 / 4,003 / 707 and tiny 827 / 7,612 / 31,831 / 50 /
58,602 / 6,521 (2i is the rarest: two facts rarely share more than one object).

Example:
    >>> from workbench import store
    >>> con = store.connect(":memory:")
    >>> _ = con.execute("INSERT INTO edges VALUES (1, 2, 'born in', 't'), (2, 3, 'located in', 't')")
    >>> g = TopologyGraph.from_store(con)
    >>> execute(g, "2p", anchors=(1,), relations=("born in", "located in")).tolist()
    [3]
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from workbench.kg.walks import CSRGraph

PATTERNS = ("1p", "2p", "3p", "2i", "ip", "pi")
# How many anchors and relations each pattern takes.
N_ANCHORS = {"1p": 1, "2p": 1, "3p": 1, "2i": 2, "ip": 2, "pi": 2}
N_RELATIONS = {"1p": 1, "2p": 2, "3p": 3, "2i": 2, "ip": 3, "pi": 3}
FORMULAS = {
    "1p": "r1(a, x)",
    "2p": "r1(a, y) ∧ r2(y, x)",
    "3p": "r1(a, y1) ∧ r2(y1, y2) ∧ r3(y2, x)",
    "2i": "r1(a1, x) ∧ r2(a2, x)",
    "ip": "r1(a1, y) ∧ r2(a2, y) ∧ r3(y, x)",
    "pi": "r1(a1, y) ∧ r2(y, x) ∧ r3(a2, x)",
}
# Reasoning depth of each pattern: its longest anchor-to-answer path (a question's hops).
DEPTH = {"1p": 1, "2p": 2, "3p": 3, "2i": 1, "ip": 2, "pi": 2}
MAX_ANSWERS = 20  # ours: EoG does not state a bound; a question with more answers is a list, not a task


@dataclass(frozen=True)
class Query:
    """One grounded pattern: ``anchors`` are store entity ids, ``relations`` labels, ``answers`` the
    complete answer set (sorted entity ids)."""

    pattern: str
    anchors: tuple[int, ...]
    relations: tuple[str, ...]
    answers: tuple[int, ...]

    @property
    def formula(self) -> str:
        """The pattern's formula, e.g. ``r1(a, y) ∧ r2(y, x)``."""
        return FORMULAS[self.pattern]


@dataclass(frozen=True)
class _Index:
    """Edges sorted by (key, other end) with ``key = node * n_rels + rel``: the edges of one
    (node, relation) are one contiguous run, found by two binary searches."""

    keys: np.ndarray  # int64, sorted
    other: np.ndarray  # int64: the edge's other end
    node_ptr: np.ndarray  # int64, n_nodes + 1: node i's edges are node_ptr[i]:node_ptr[i+1]
    n_rels: int

    def rel(self, e: int, node: int) -> int:
        """The relation id of edge ``e`` of ``node``."""
        return int(self.keys[e] - node * self.n_rels)

    @classmethod
    def build(cls, ends: np.ndarray, others: np.ndarray, rels: np.ndarray, n_nodes: int, n_rels: int) -> "_Index":
        keys = ends * n_rels + rels
        order = np.lexsort((others, keys))
        ptr = np.zeros(n_nodes + 1, dtype=np.int64)
        np.cumsum(np.bincount(ends, minlength=n_nodes), out=ptr[1:])
        return cls(keys[order], others[order], ptr, n_rels)


@dataclass(frozen=True)
class TopologyGraph:
    """The store's graph indexed for pattern execution: out-edges and in-edges by (node, relation).

    Node ``i`` is the entity ``node_ids[i]`` and relation id ``r`` the label ``labels[r]``, as in
    :class:`~workbench.kg.walks.CSRGraph` (which it is built from).
    """

    out: _Index
    into: _Index
    labels: tuple[str, ...]
    node_ids: np.ndarray

    @property
    def n_nodes(self) -> int:
        return len(self.node_ids)

    @classmethod
    def from_csr(cls, g: CSRGraph) -> "TopologyGraph":
        """Index a :class:`CSRGraph` (its distinct (src, dst, rel) edges) both ways.

        Example:
            >>> g = TopologyGraph.from_csr(CSRGraph.from_edges([0, 1], [1, 2], [0, 0], 3))
            >>> follow(g, np.array([0]), 0).tolist(), follow(g, np.array([2]), 0, reverse=True).tolist()
            ([1], [1])
        """
        src = np.repeat(np.arange(g.n_nodes, dtype=np.int64), g.degree())
        dst = g.indices[:-1].astype(np.int64)
        rel = g.rels[:-1].astype(np.int64)
        # Duplicate rows would not change answer sets but would bias uniform edge draws.
        if len(src):
            uniq = np.unique(np.stack([src, dst, rel], axis=1), axis=0)
            src, dst, rel = uniq[:, 0], uniq[:, 1], uniq[:, 2]
        n_rels = max(len(g.labels), 1)
        return cls(_Index.build(src, dst, rel, g.n_nodes, n_rels), _Index.build(dst, src, rel, g.n_nodes, n_rels),
                   g.labels, g.node_ids)

    @classmethod
    def from_store(cls, con) -> "TopologyGraph":
        """Load the store's ``edges`` table (see :meth:`CSRGraph.from_store`).

        Example:
            >>> from workbench import store
            >>> con = store.connect(":memory:")
            >>> _ = con.execute("INSERT INTO edges VALUES (5, 7, 'born in', 't')")
            >>> TopologyGraph.from_store(con).labels
            ('born in',)
        """
        return cls.from_csr(CSRGraph.from_store(con))

    def node(self, entity_id: int) -> int:
        """The node index of a store entity id; -1 when the entity is not in the graph."""
        i = int(np.searchsorted(self.node_ids, entity_id))
        return i if i < len(self.node_ids) and self.node_ids[i] == entity_id else -1

    def rel(self, label: str) -> int:
        """The relation id of a label; -1 when no edge carries it."""
        return self.labels.index(label) if label in self.labels else -1


def follow(graph: TopologyGraph, nodes: np.ndarray, rel: int, reverse: bool = False) -> np.ndarray:
    """The set {x : rel(n, x) for some n in nodes} (``reverse``: {x : rel(x, n)}), sorted node indices.

    Example:
        >>> g = TopologyGraph.from_csr(CSRGraph.from_edges([0, 0, 1], [1, 2, 2], [0, 0, 1], 3))
        >>> follow(g, np.array([0, 1]), 0).tolist()
        [1, 2]
    """
    idx = graph.into if reverse else graph.out
    nodes = np.asarray(nodes, dtype=np.int64)
    if rel < 0 or len(nodes) == 0:
        return np.zeros(0, dtype=np.int64)
    keys = nodes * idx.n_rels + rel
    lo = np.searchsorted(idx.keys, keys, "left")
    hi = np.searchsorted(idx.keys, keys, "right")
    lengths = hi - lo
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    # Concatenated ranges lo[i]:hi[i] without a Python loop: each position's offset within its run.
    starts = np.repeat(lo - np.cumsum(lengths) + lengths, lengths)
    return np.unique(idx.other[starts + np.arange(total)])


def _check(pattern: str, anchors, relations) -> None:
    if pattern not in PATTERNS:
        raise ValueError(f"pattern: expected one of {', '.join(PATTERNS)}, got {pattern!r}")
    if len(anchors) != N_ANCHORS[pattern]:
        raise ValueError(f"anchors: pattern {pattern} takes {N_ANCHORS[pattern]} anchors, got {len(anchors)}")
    if len(relations) != N_RELATIONS[pattern]:
        raise ValueError(f"relations: pattern {pattern} takes {N_RELATIONS[pattern]} relations, got {len(relations)}")


def execute_nodes(graph: TopologyGraph, pattern: str, anchors, relations) -> np.ndarray:
    """:func:`execute` on node indices and relation ids; returns sorted node indices.

    Example:
        >>> g = TopologyGraph.from_csr(CSRGraph.from_edges([0, 1], [2, 2], [0, 1], 3))
        >>> execute_nodes(g, "2i", (0, 1), (0, 1)).tolist()
        [2]
    """
    _check(pattern, anchors, relations)
    a = [np.array([int(n)], dtype=np.int64) if int(n) >= 0 else np.zeros(0, dtype=np.int64) for n in anchors]
    r = [int(x) for x in relations]
    if pattern == "1p":  # r1(a, x)
        return follow(graph, a[0], r[0])
    if pattern == "2p":  # r1(a, y) ∧ r2(y, x)
        return follow(graph, follow(graph, a[0], r[0]), r[1])
    if pattern == "3p":  # r1(a, y1) ∧ r2(y1, y2) ∧ r3(y2, x)
        return follow(graph, follow(graph, follow(graph, a[0], r[0]), r[1]), r[2])
    if pattern == "2i":  # r1(a1, x) ∧ r2(a2, x)
        return np.intersect1d(follow(graph, a[0], r[0]), follow(graph, a[1], r[1]), assume_unique=True)
    if pattern == "ip":  # r1(a1, y) ∧ r2(a2, y) ∧ r3(y, x)
        y = np.intersect1d(follow(graph, a[0], r[0]), follow(graph, a[1], r[1]), assume_unique=True)
        return follow(graph, y, r[2])
    # pi: r1(a1, y) ∧ r2(y, x) ∧ r3(a2, x)
    return np.intersect1d(follow(graph, follow(graph, a[0], r[0]), r[1]), follow(graph, a[1], r[2]),
                          assume_unique=True)


def execute(graph: TopologyGraph, pattern: str, anchors, relations) -> np.ndarray:
    """The complete answer set of ``pattern`` grounded with ``anchors`` (store entity ids) and
    ``relations`` (labels): sorted entity ids of every x satisfying the pattern's formula (see
    :data:`FORMULAS`). Unknown anchors or labels give the empty set.

    Raises ValueError naming the parameter for an unknown pattern or a wrong number of anchors or
    relations.

    Example:
        >>> g = TopologyGraph.from_csr(CSRGraph.from_edges([0, 1, 1], [1, 2, 0], [0, 1, 1], 3,
        ...                                                labels=("a", "b"), node_ids=[10, 20, 30]))
        >>> execute(g, "2p", (10,), ("a", "b")).tolist()
        [10, 30]
    """
    _check(pattern, anchors, relations)
    nodes = execute_nodes(graph, pattern, [graph.node(int(e)) for e in anchors], [graph.rel(r) for r in relations])
    return graph.node_ids[nodes]


# The variables of each pattern in the order :func:`witness` grounds them (Table 6's names).
VARIABLES = {"1p": ("a", "x"), "2p": ("a", "y", "x"), "3p": ("a", "y1", "y2", "x"), "2i": ("a1", "a2", "x"),
             "ip": ("a1", "a2", "y", "x"), "pi": ("a1", "a2", "y", "x")}


def _first(*sets: np.ndarray) -> int:
    common = sets[0]
    for s in sets[1:]:
        common = np.intersect1d(common, s, assume_unique=True)
    if len(common) == 0:
        raise ValueError("answer: not a member of the query's answer set")
    return int(common[0])


def witness(graph: TopologyGraph, query: Query, answer: int | None = None) -> tuple[int, ...]:
    """One grounding of every variable of ``query`` (:data:`VARIABLES` order, store entity ids)
    that derives ``answer`` (default: the smallest member of the answer set); where several
    intermediates y derive it, the smallest node index (ours: any witness proves membership, and
    the smallest is deterministic). Raises ValueError when ``answer`` is not in the answer set.

    Example:
        >>> g = TopologyGraph.from_csr(CSRGraph.from_edges([0, 0, 1, 2], [1, 2, 3, 3], [0, 0, 1, 1], 4,
        ...                                                labels=("r", "s"), node_ids=[10, 11, 12, 13]))
        >>> witness(g, Query("2p", (10,), ("r", "s"), (13,)))
        (10, 11, 13)
    """
    _check(query.pattern, query.anchors, query.relations)
    x = query.answers[0] if answer is None else int(answer)
    a = [np.array([graph.node(int(e))], dtype=np.int64) for e in query.anchors]
    r = [graph.rel(label) for label in query.relations]
    xn = np.array([graph.node(x)], dtype=np.int64)
    if xn[0] < 0 or a and min(int(n[0]) for n in a) < 0:
        raise ValueError("query: an anchor or the answer is not in the graph")
    p = query.pattern
    if p == "1p":
        mid: list[int] = []
        _first(follow(graph, a[0], r[0]), xn)
    elif p == "2p":
        mid = [_first(follow(graph, a[0], r[0]), follow(graph, xn, r[1], reverse=True))]
    elif p == "3p":
        y1s = follow(graph, a[0], r[0])
        y2 = _first(follow(graph, y1s, r[1]), follow(graph, xn, r[2], reverse=True))
        mid = [_first(y1s, follow(graph, np.array([y2]), r[1], reverse=True)), y2]
    elif p == "2i":
        mid = []
        _first(follow(graph, a[0], r[0]), follow(graph, a[1], r[1]), xn)
    elif p == "ip":
        mid = [_first(follow(graph, a[0], r[0]), follow(graph, a[1], r[1]), follow(graph, xn, r[2], reverse=True))]
    else:  # pi
        mid = [_first(follow(graph, a[0], r[0]), follow(graph, xn, r[1], reverse=True))]
        _first(follow(graph, a[1], r[2]), xn)
    return (*query.anchors, *(int(graph.node_ids[n]) for n in mid), x)


# One statement per pattern over the distinct labelled edges; parameters in ``_SQL_PARAMS`` order.
_E = "(SELECT DISTINCT src, dst, relation FROM edges)"
_SQL = {
    "1p": f"SELECT DISTINCT dst FROM {_E} WHERE src = $a1 AND relation = $r1",
    "2p": f"""SELECT DISTINCT e2.dst FROM {_E} e1 JOIN {_E} e2 ON e2.src = e1.dst
              WHERE e1.src = $a1 AND e1.relation = $r1 AND e2.relation = $r2""",
    "3p": f"""SELECT DISTINCT e3.dst FROM {_E} e1 JOIN {_E} e2 ON e2.src = e1.dst JOIN {_E} e3 ON e3.src = e2.dst
              WHERE e1.src = $a1 AND e1.relation = $r1 AND e2.relation = $r2 AND e3.relation = $r3""",
    "2i": f"""SELECT dst FROM {_E} WHERE src = $a1 AND relation = $r1
              INTERSECT SELECT dst FROM {_E} WHERE src = $a2 AND relation = $r2""",
    "ip": f"""SELECT DISTINCT e3.dst FROM {_E} e3 WHERE e3.relation = $r3 AND e3.src IN (
                SELECT dst FROM {_E} WHERE src = $a1 AND relation = $r1
                INTERSECT SELECT dst FROM {_E} WHERE src = $a2 AND relation = $r2)""",
    "pi": f"""SELECT e2.dst FROM {_E} e1 JOIN {_E} e2 ON e2.src = e1.dst
              WHERE e1.src = $a1 AND e1.relation = $r1 AND e2.relation = $r2
              INTERSECT SELECT dst FROM {_E} WHERE src = $a2 AND relation = $r3""",
}


def execute_sql(con, pattern: str, anchors, relations) -> np.ndarray:
    """:func:`execute` as one DuckDB statement over the store's ``edges`` table.

    Example:
        >>> from workbench import store
        >>> con = store.connect(":memory:")
        >>> _ = con.execute("INSERT INTO edges VALUES (1, 3, 'r', 't'), (2, 3, 's', 't'), (2, 4, 's', 't')")
        >>> execute_sql(con, "2i", (1, 2), ("r", "s")).tolist()
        [3]
    """
    _check(pattern, anchors, relations)
    params = {f"a{i + 1}": int(a) for i, a in enumerate(anchors)}
    params.update({f"r{i + 1}": str(r) for i, r in enumerate(relations)})
    rows = con.execute(_SQL[pattern], params).fetchall()
    return np.array(sorted(r[0] for r in rows), dtype=np.int64)


def _draw_edge(rng, idx: _Index, node: int) -> tuple[int, int] | None:
    """A uniformly drawn edge of ``node`` in ``idx`` as (relation id, other end); None at a dead end."""
    lo, hi = idx.node_ptr[node], idx.node_ptr[node + 1]
    if hi == lo:
        return None
    e = int(lo + rng.integers(hi - lo))
    return idx.rel(e, node), int(idx.other[e])


def _candidate(rng, g: TopologyGraph, pattern: str, starts: np.ndarray, ends: np.ndarray):
    """One grounded query drawn along existing edges (so its answer set is non-empty), as
    (anchor nodes, relation ids); None when the draw hits a dead end or is degenerate.

    Path parts walk forward from a uniformly drawn node with out-edges; intersections draw two
    distinct in-edges of a uniformly drawn node with at least two in-edges (ours: EoG does not
    say how anchors are drawn)."""
    n_out = lambda n: g.out.node_ptr[n + 1] - g.out.node_ptr[n]  # noqa: E731

    def walk(node: int, hops: int):
        rels = []
        for _ in range(hops):
            step = _draw_edge(rng, g.out, node)
            if step is None:
                return None
            rels.append(step[0])
            node = step[1]
        return rels, node

    def two_in(x: int):
        lo, hi = g.into.node_ptr[x], g.into.node_ptr[x + 1]
        if hi - lo < 2:
            return None
        e1, e2 = (int(lo + i) for i in rng.choice(hi - lo, 2, replace=False))
        b = sorted([(int(g.into.other[e]), g.into.rel(e, x)) for e in (e1, e2)])
        return b  # branches in a canonical order: 2i and ip are symmetric in them

    if pattern in ("1p", "2p", "3p"):
        a = int(starts[rng.integers(len(starts))])
        w = walk(a, int(pattern[0]))
        return None if w is None else ((a,), tuple(w[0]))
    if pattern in ("2i", "ip"):
        y = int(ends[rng.integers(len(ends))])
        b = two_in(y)
        if b is None:
            return None
        if pattern == "2i":
            return (b[0][0], b[1][0]), (b[0][1], b[1][1])
        if n_out(y) == 0:
            return None
        r3, _ = _draw_edge(rng, g.out, y)
        return (b[0][0], b[1][0]), (b[0][1], b[1][1], r3)
    # pi: a1 -r1-> y -r2-> x, then another in-edge (a2, r3) of x.
    a1 = int(starts[rng.integers(len(starts))])
    w = walk(a1, 2)
    if w is None:
        return None
    (r1, r2), x = w
    lo, hi = g.into.node_ptr[x], g.into.node_ptr[x + 1]
    # Any in-edge of x, the one from y included: r3(a2, x) with a2 = y names the branch's entity,
    # which still differs from 2p; count_queries counts the same space.
    e = int(lo + rng.integers(hi - lo))
    a2, r3 = int(g.into.other[e]), g.into.rel(e, x)
    return (a1, a2), (r1, r2, r3)


def sample_queries(graph: TopologyGraph, pattern: str, n: int, seed: int = 0, max_answers: int = MAX_ANSWERS,
                   max_tries: int | None = None) -> list[Query]:
    """Up to ``n`` distinct queries of ``pattern`` whose complete answer sets hold 1 to
    ``max_answers`` entities; the same graph and seed give the same queries.

    Candidates are drawn along existing edges (so none is empty; see ``_candidate``), executed,
    and kept when the answer set is small enough. 2i and ip never ground both branches with the
    same (anchor, relation) (that is 1p or 2p in disguise). At most ``max_tries`` candidates
    (default ``100 * n``) are drawn: a graph where the pattern is rare returns fewer than ``n``.

    Example:
        >>> g = TopologyGraph.from_csr(CSRGraph.from_edges([0, 1, 2], [2, 2, 3], [0, 1, 0], 4))
        >>> [(q.anchors, q.relations, q.answers) for q in sample_queries(g, "2i", 5, seed=0)]
        [((0, 1), ('r0', 'r1'), (2,))]
    """
    if pattern not in PATTERNS:
        raise ValueError(f"pattern: expected one of {', '.join(PATTERNS)}, got {pattern!r}")
    if n < 0:
        raise ValueError(f"n: expected a number of queries >= 0, got {n}")
    if max_answers < 1:
        raise ValueError(f"max_answers: expected >= 1, got {max_answers}")
    tries = 100 * n if max_tries is None else int(max_tries)
    starts = np.flatnonzero(np.diff(graph.out.node_ptr) > 0)
    ends = np.flatnonzero(np.diff(graph.into.node_ptr) >= 2)
    if len(starts) == 0 or (pattern in ("2i", "ip") and len(ends) == 0):
        return []
    # One generator per (seed, pattern): each pattern's draws do not depend on the others'.
    rng = np.random.default_rng([int(seed), PATTERNS.index(pattern)])
    seen, out = set(), []
    for _ in range(tries):
        if len(out) >= n:
            break
        cand = _candidate(rng, graph, pattern, starts, ends)
        if cand is None or cand in seen:
            continue
        seen.add(cand)
        ans = execute_nodes(graph, pattern, *cand)
        if 1 <= len(ans) <= max_answers:
            out.append(Query(pattern, tuple(int(graph.node_ids[a]) for a in cand[0]),
                             tuple(graph.labels[r] for r in cand[1]), tuple(int(v) for v in graph.node_ids[ans])))
    return out


_COUNT_SQL = {
    "1p": "SELECT src, relation, count(*) AS n FROM e GROUP BY ALL",
    "2p": "SELECT e1.src, e1.relation, e2.relation, count(DISTINCT e2.dst) AS n "
          "FROM e e1 JOIN e e2 ON e2.src = e1.dst GROUP BY ALL",
    "3p": "SELECT e1.src, e1.relation, e2.relation, e3.relation, count(DISTINCT e3.dst) AS n "
          "FROM e e1 JOIN e e2 ON e2.src = e1.dst JOIN e e3 ON e3.src = e2.dst GROUP BY ALL",
    # Unordered branch pairs with distinct (anchor, relation): the canonical order sample_queries uses.
    "2i": "SELECT a1, r1, a2, r2, count(*) AS n FROM i2 GROUP BY ALL",
    "ip": "SELECT a1, r1, a2, r2, e3.relation, count(DISTINCT e3.dst) AS n "
          "FROM i2 JOIN e e3 ON e3.src = i2.y GROUP BY ALL",
    "pi": "SELECT e1.src, e1.relation, e2.relation, e3.src, e3.relation, count(DISTINCT e2.dst) AS n "
          "FROM e e1 JOIN e e2 ON e2.src = e1.dst JOIN e e3 ON e3.dst = e2.dst GROUP BY ALL",
}


def count_queries(con, max_answers: int = MAX_ANSWERS, min_answers: int = 1) -> dict[str, int]:
    """Per pattern, how many distinct groundings (anchors, relations) over the store's ``edges``
    have ``min_answers`` to ``max_answers`` answers; the defaults give the space ``sample_queries``
    draws from (2i and ip count each unordered pair of distinct branches once).

    Example:
        >>> from workbench import store
        >>> con = store.connect(":memory:")
        >>> _ = con.execute("INSERT INTO edges VALUES (1, 3, 'r', 't'), (2, 3, 's', 't'), (3, 4, 'r', 't')")
        >>> count_queries(con)
        {'1p': 3, '2p': 2, '3p': 0, '2i': 1, 'ip': 1, 'pi': 2}
    """
    if min_answers < 1:
        raise ValueError(f"min_answers: expected >= 1, got {min_answers}")
    if max_answers < min_answers:
        raise ValueError(f"max_answers: expected >= min_answers ({min_answers}), got {max_answers}")
    with_ = ("WITH e AS (SELECT DISTINCT src, dst, relation FROM edges WHERE relation IS NOT NULL), "
             "i2 AS (SELECT e1.src AS a1, e1.relation AS r1, e2.src AS a2, e2.relation AS r2, e1.dst AS y "
             "FROM e e1 JOIN e e2 ON e1.dst = e2.dst "
             "AND (e1.src < e2.src OR (e1.src = e2.src AND e1.relation < e2.relation))) ")
    return {p: int(con.execute(f"{with_} SELECT count(*) FROM ({_COUNT_SQL[p]}) WHERE n BETWEEN ? AND ?",
                               [int(min_answers), int(max_answers)]).fetchone()[0]) for p in PATTERNS}


