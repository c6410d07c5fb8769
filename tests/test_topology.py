"""Topology execution (issue 19, seed 004 Table 6): every pattern against a brute-force reading of
its formula on small random graphs, SQL against the index, sampling deterministic, non-empty and
bounded, and every pattern occurring on the smoke world."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from workbench import store
from workbench.kg import topology
from workbench.kg.topology import PATTERNS, TopologyGraph, count_queries, execute, execute_sql, sample_queries
from workbench.kg.walks import CSRGraph

hypothesis = pytest.importorskip(
    "hypothesis", reason="hypothesis is not installed: add hypothesis to pyproject.toml's pins to run these")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

LABELS = ("a", "b", "c")


def brute(edges: set, nodes, pattern: str, anchors, rels) -> set:
    """The pattern's formula read literally, quantifying over every node (no index, no joins)."""
    E = edges
    if pattern == "1p":  # r1(a, x)
        (a,), (r1,) = anchors, rels
        return {x for x in nodes if (a, x, r1) in E}
    if pattern == "2p":  # r1(a, y) ∧ r2(y, x)
        (a,), (r1, r2) = anchors, rels
        return {x for x in nodes if any((a, y, r1) in E and (y, x, r2) in E for y in nodes)}
    if pattern == "3p":  # r1(a, y1) ∧ r2(y1, y2) ∧ r3(y2, x)
        (a,), (r1, r2, r3) = anchors, rels
        return {x for x in nodes if any((a, y1, r1) in E and (y1, y2, r2) in E and (y2, x, r3) in E
                                        for y1 in nodes for y2 in nodes)}
    if pattern == "2i":  # r1(a1, x) ∧ r2(a2, x)
        (a1, a2), (r1, r2) = anchors, rels
        return {x for x in nodes if (a1, x, r1) in E and (a2, x, r2) in E}
    if pattern == "ip":  # r1(a1, y) ∧ r2(a2, y) ∧ r3(y, x)
        (a1, a2), (r1, r2, r3) = anchors, rels
        return {x for x in nodes if any((a1, y, r1) in E and (a2, y, r2) in E and (y, x, r3) in E for y in nodes)}
    # pi: r1(a1, y) ∧ r2(y, x) ∧ r3(a2, x)
    (a1, a2), (r1, r2, r3) = anchors, rels
    return {x for x in nodes if (a2, x, r3) in E and any((a1, y, r1) in E and (y, x, r2) in E for y in nodes)}


def groundings(nodes, labels, pattern: str):
    """Every (anchors, relations) of a pattern; 2i and ip once per unordered pair of distinct
    branches, in (anchor, label) order (the space sample_queries and count_queries use)."""
    for anchors in itertools.product(nodes, repeat=topology.N_ANCHORS[pattern]):
        for rels in itertools.product(labels, repeat=topology.N_RELATIONS[pattern]):
            if pattern in ("2i", "ip") and not (anchors[0], rels[0]) < (anchors[1], rels[1]):
                continue
            yield anchors, rels


@st.composite
def graphs(draw):
    """Up to 6 nodes with sparse, non-contiguous entity ids, up to 3 labels, any edge set."""
    n = draw(st.integers(1, 6))
    n_labels = draw(st.integers(1, 3))
    ids = [100 + 7 * i for i in range(n)]
    triples = st.tuples(st.sampled_from(ids), st.sampled_from(ids), st.sampled_from(LABELS[:n_labels]))
    return ids, set(draw(st.sets(triples, max_size=14)))


def _graph(ids, edges) -> TopologyGraph:
    labels = tuple(sorted({r for _, _, r in edges}))
    pos = {e: i for i, e in enumerate(ids)}
    src, dst, rel = ([pos[s] for s, _, _ in edges], [pos[d] for _, d, _ in edges],
                     [labels.index(r) for _, _, r in edges])
    return TopologyGraph.from_csr(CSRGraph.from_edges(src, dst, rel, len(ids), labels=labels or None, node_ids=ids))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graphs())
def test_every_pattern_matches_brute_force(g):
    ids, edges = g
    graph = _graph(ids, edges)
    for p in PATTERNS:
        for anchors, rels in groundings(ids, LABELS, p):
            assert set(execute(graph, p, anchors, rels).tolist()) == brute(edges, ids, p, anchors, rels), (p, anchors, rels)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graphs(), st.integers(1, 3))
def test_sql_and_counts_match_brute_force(g, max_answers):
    ids, edges = g
    con = store.connect(":memory:")
    if edges:  # executemany refuses an empty list
        con.executemany("INSERT INTO edges VALUES (?, ?, ?, 't')", [list(e) for e in edges])
    graph = _graph(ids, edges)
    counts = count_queries(con, max_answers=max_answers)
    for p in PATTERNS:
        space = set()
        for i, (anchors, rels) in enumerate(groundings(ids, LABELS, p)):
            want = brute(edges, ids, p, anchors, rels)
            # One statement costs ~1 ms: check every non-empty grounding and every 7th empty one.
            if want or i % 7 == 0:
                assert set(execute_sql(con, p, anchors, rels).tolist()) == want, (p, anchors, rels)
            if 1 <= len(want) <= max_answers:
                space.add((anchors, rels))
        assert counts[p] == len(space), p
        # Sampling draws only from the counted space, each query with its complete answer set.
        got = sample_queries(graph, p, len(space), seed=0, max_answers=max_answers, max_tries=300)
        assert {(q.anchors, q.relations) for q in got} <= space, p
        assert all(set(q.answers) == brute(edges, ids, p, q.anchors, q.relations) for q in got)


@pytest.fixture(scope="module")
def smoke():
    from workbench.kg.tinyworld import build_world

    con = store.connect(":memory:")
    build_world(con, preset="smoke", seed=0)
    return con, TopologyGraph.from_store(con)


def test_sampling_is_deterministic_non_empty_and_bounded(smoke):
    con, g = smoke
    for p in PATTERNS:
        a = sample_queries(g, p, 40, seed=3, max_answers=5)
        assert a == sample_queries(g, p, 40, seed=3, max_answers=5)
        assert a != sample_queries(g, p, 40, seed=4, max_answers=5)
        assert len(a) == 40 and len(set((q.anchors, q.relations) for q in a)) == 40
        assert all(1 <= len(q.answers) <= 5 for q in a)
        for q in a[:5]:  # the stored answer set is the complete one, by the independent SQL path
            assert list(q.answers) == execute_sql(con, p, q.anchors, q.relations).tolist()


def test_every_pattern_occurs_on_the_smoke_world(smoke):
    con, _ = smoke
    # Measured on preset smoke, seed 0 (944 edges, 43 labels); a change means the world changed.
    assert count_queries(con) == {"1p": 836, "2p": 2222, "3p": 6736, "2i": 6788, "ip": 16142, "pi": 52270}
    # Answer sets with more than one entity exist for every pattern (non-functional relations).
    assert min(count_queries(con, min_answers=2).values()) > 0


def test_errors_name_the_parameter(smoke):
    _, g = smoke
    for call, name in [(lambda: execute(g, "4p", (1,), ("a",)), "pattern"),
                       (lambda: execute(g, "2i", (1,), ("a", "b")), "anchors"),
                       (lambda: execute(g, "2p", (1,), ("a",)), "relations"),
                       (lambda: sample_queries(g, "1p", 1, max_answers=0), "max_answers"),
                       (lambda: sample_queries(g, "1p", -1), "n")]:
        with pytest.raises(ValueError, match=f"^{name}:"):
            call()


def test_unknown_anchor_or_label_gives_the_empty_set(smoke):
    _, g = smoke
    assert execute(g, "1p", (-5,), ("born in",)).tolist() == []
    assert execute(g, "1p", (int(g.node_ids[0]),), ("no such label",)).tolist() == []
    assert np.asarray(execute(g, "pi", (-1, -2), ("x", "y", "z"))).size == 0


def test_sampling_reaches_the_whole_counted_space():
    # A fixed random graph (seeded, so not flaky): with tries to spare, every counted grounding is drawn.
    rng = np.random.default_rng(5)
    ids = [10 + 3 * i for i in range(7)]
    edges = {(ids[rng.integers(7)], ids[rng.integers(7)], LABELS[rng.integers(2)]) for _ in range(16)}
    con = store.connect(":memory:")
    con.executemany("INSERT INTO edges VALUES (?, ?, ?, 't')", [list(e) for e in edges])
    graph = _graph(ids, edges)
    for p, n in count_queries(con, max_answers=3).items():
        got = sample_queries(graph, p, n + 1, seed=0, max_answers=3, max_tries=20 * n * n + 100)
        assert len(got) == n > 0, p
