"""The CSR walker: walks follow labelled edges, are deterministic by seed, mark ends with -1."""

import numpy as np
import pytest

from workbench import store
from workbench.bench.walks import _prepare_sql, bench_walks, per_hop_walks, sql_walks, synthetic_edges
from workbench.kg.walks import CSRGraph, hop_range, random_walks


@pytest.fixture()
def random_store(tmp_path):
    """A random labelled multigraph with sparse, non-contiguous entity ids and some dead ends."""
    rng = np.random.default_rng(7)
    ids = 1000 + 7 * np.arange(60)
    labels = ["born in", "located in", "directed by", "capital of"]
    rows = {(int(ids[rng.integers(50)]), int(ids[rng.integers(60)]), labels[rng.integers(4)]) for _ in range(300)}
    con = store.connect(tmp_path / "w.duckdb")
    con.executemany("INSERT INTO edges VALUES (?, ?, ?, 'test')", [list(r) for r in rows])
    con.executemany("INSERT INTO entities (entity_id, title) VALUES (?, ?)", [[int(i), f"E{i}"] for i in ids])
    return con, rows


def test_every_step_is_an_edge_with_its_label(random_store):
    con, rows = random_store
    g = CSRGraph.from_store(con)
    assert g.n_edges == len(rows) and g.n_nodes == 60
    nodes, rels = random_walks(g, 3000, hops=(2, 3), seed=3)
    ents = g.to_entity(nodes)
    steps = 0
    for w in range(len(nodes)):
        for h in range(rels.shape[1]):
            if rels[w, h] < 0:
                assert ents[w, h + 1] == -1 and (rels[w, h:] == -1).all() and (ents[w, h + 1:] == -1).all()
                break
            assert (int(ents[w, h]), int(ents[w, h + 1]), g.labels[rels[w, h]]) in rows
            steps += 1
    assert steps > 5000


def test_walks_are_deterministic_by_seed():
    src, dst, rel, n = synthetic_edges(5000, seed=1)
    g = CSRGraph.from_edges(src, dst, rel, n)
    a = random_walks(g, 1000, (2, 3), seed=11)
    b = random_walks(g, 1000, (2, 3), seed=11)
    c = random_walks(g, 1000, (2, 3), seed=12)
    assert all((x == y).all() for x, y in zip(a, b))
    assert not (a[0] == c[0]).all()


def test_hop_range_draws_each_walks_length():
    # A complete digraph on 5 nodes has no dead ends: lengths are exactly the drawn ones.
    src, dst = zip(*[(i, j) for i in range(5) for j in range(5) if i != j])
    g = CSRGraph.from_edges(src, dst, np.zeros(len(src)), 5)
    nodes, rels = random_walks(g, 500, "2-3", seed=0)
    lengths = (rels >= 0).sum(axis=1)
    assert set(lengths.tolist()) == {2, 3} and nodes.shape == (500, 4)
    nodes, rels = random_walks(g, 100, 3, seed=0)
    assert (rels >= 0).all() and (nodes >= 0).all()


def test_dead_end_is_marked_minus_one():
    g = CSRGraph.from_edges([0, 1], [1, 2], [0, 1], 3, labels=("a", "b"))
    nodes, rels = random_walks(g, 200, 3, seed=0)
    from_one = nodes[nodes[:, 0] == 1]
    assert len(from_one) and (from_one == [1, 2, -1, -1]).all()
    assert (rels[nodes[:, 0] == 0] == [0, 1, -1]).all()
    assert not (nodes[:, 0] == 2).any()  # walks start at nodes with out-edges


@pytest.mark.parametrize("bad", ["", "3-2", "0", "a-b", "2-3-4", "2-", None, "2-100000", 65])
def test_bad_hops_is_a_clear_error(bad):
    with pytest.raises(ValueError, match="hops: expected N or MIN-MAX"):
        hop_range(bad)


def test_absurd_sizes_are_refused_before_any_allocation(random_store):
    """Regression: --walks 10**12 asked numpy for ~29 TiB and died with a MemoryError traceback (issue 12)."""
    import time

    from workbench.kg.pool import build_pool

    con, _ = random_store
    g = CSRGraph.from_edges([0, 1], [1, 2], [0, 1], 3, labels=("a", "b"))
    t0 = time.perf_counter()
    with pytest.raises(ValueError, match=r"n_walks: 1,000,000,000,000 walks of up to 3 hops: needs about .* TiB"):
        random_walks(g, 10**12, 3)
    with pytest.raises(ValueError, match=r"^walks: .* more than the .* available; ask for at most about"):
        build_pool(con, walks=10**12)
    with pytest.raises(ValueError, match=r"hops: expected .* MAX <= 64"):
        build_pool(con, walks=10, min_hops=2, max_hops=10**9)
    with pytest.raises(ValueError, match="walks: expected a positive number of walks, got 2.5"):
        build_pool(con, walks=2.5)
    assert time.perf_counter() - t0 < 5


def test_from_edges_rejects_out_of_range_nodes():
    with pytest.raises(ValueError, match="n_nodes"):
        CSRGraph.from_edges([0], [5], [0], 3)


def test_bench_walks_reports_the_contract_keys():
    r = bench_walks(edges=20000, walks=50000, seed=0, per_hop=20, sql=2000)
    assert list(r) == ["edges", "csr_walks_per_s", "per_hop_walks_per_s", "sql_walks_per_s",
                       "csr_vs_per_hop", "csr_vs_sql", "peak_rss_mb"]
    assert r["edges"] == 20000 and all(v > 0 for v in r.values())
    assert r["csr_vs_per_hop"] == pytest.approx(r["csr_walks_per_s"] / r["per_hop_walks_per_s"], rel=0.01)


def test_benchmark_baselines_walk_real_edges():
    import duckdb

    src, dst, rel, n = synthetic_edges(3000, seed=2)
    edges = set(zip(src.tolist(), dst.tolist()))
    con = duckdb.connect(":memory:")
    _prepare_sql(con, src, dst, rel)
    starts = np.unique(src)[:300]
    walks = [per_hop_walks(con, starts[:30], 3, seed=0)]
    walks += [sql_walks(con, starts, 3, seed=0, method=m) for m in ("csr", "window")]
    assert len(walks[0]) == 30 and all(len(w) > 0.8 * len(starts) for w in walks[1:])  # few dead ends
    for w in walks:
        assert set(w[:, 0].tolist()) <= set(starts.tolist())
        for row in w.tolist():
            assert all(step in edges for step in zip(row, row[1:]) if step[1] >= 0)
    with pytest.raises(ValueError, match="method"):
        sql_walks(con, starts, 3, method="recursive")
