"""Chain filters, the dedup key, G_0 build, G_t reconstruction, sampling, export and the pool CLI."""

import hashlib
import json

import numpy as np
import pytest

from workbench import store
from workbench.cli import main
from workbench.kg import filters
from workbench.kg.pool import build_pool, chain_hash, evidence_counts, export_pool, load_pool, sample_chains
from workbench.kg.walks import CSRGraph

ENTITIES = [  # id, title, type, kind
    (10, "Ada", "person", "entity"), (11, "Brova", "city", "entity"), (12, "Celand", "country", "entity"),
    (13, "Dorin", "person", "entity"), (14, "Essa", "city", "entity"), (15, "1987", "year", "year"),
    (16, "List of cities in Celand", "list", "list"), (17, "Ox", "person", "short"),
    (18, "Celandic", "nationality", "nationality"),
    (19, "Italian", None, "entity"),  # an imported-style row: only its title says it is noise
    (20, "Farnok", "film", "entity"),
]
EDGES = [  # src, dst, relation
    (10, 11, "born in"), (13, 14, "born in"), (11, 12, "located in"), (14, 12, "located in"),
    (20, 10, "directed by"), (20, 13, "directed by"), (20, 15, "released in"), (16, 11, "lists"),
    (13, 17, "nicknamed"), (10, 18, "nationality"), (13, 19, "nationality"), (12, 11, "capital"),
    (14, 11, "twinned with"), (15, 12, "events in"),
]
RELATIONS = [("born in", True), ("located in", True), ("directed by", True), ("released in", True),
             ("lists", False), ("nicknamed", False), ("nationality", False), ("capital", True),
             ("twinned with", False), ("events in", False)]
NOISE = {"1987", "List of cities in Celand", "Ox", "Celandic", "Italian"}


@pytest.fixture()
def con(tmp_path):
    con = store.connect(tmp_path / "pool.duckdb")
    con.executemany("INSERT INTO entities VALUES (?, ?, ?, ?, 'test')", [list(e) for e in ENTITIES])
    con.executemany("INSERT INTO edges VALUES (?, ?, ?, 'test')", [list(e) for e in EDGES])
    con.executemany("INSERT INTO relations VALUES (?, NULL, NULL, ?)", [list(r) for r in RELATIONS])
    passages = []
    for i, (eid, title, *_rest) in enumerate(ENTITIES):
        passages += [(2 * i, eid, 0, f"{title} is an entity."), (2 * i + 1, eid, 1, f"{title} links on.")]
    con.executemany("INSERT INTO passages VALUES (?, ?, ?, ?)", [list(p) for p in passages])
    # Anchors for two edges only: Ada -> Brova in Ada's paragraph 1, Brova -> Celand in paragraph 0.
    con.execute("INSERT INTO anchors VALUES (10, 1, 0, 5, 'Brova', 11), (11, 0, 0, 6, 'Celand', 12)")
    return con


# ----------------------------------------------------------------------------------- filters

def test_each_filter_rejects_what_it_should_counted_once_by_first_reason():
    nodes = np.array([
        [0, 1, 2, 3],     # clean, 3 hops
        [0, 1, -1, -1],   # 1 hop: 'hops'
        [0, 1, 0, -1],    # revisits 0: 'cycle'
        [0, 1, 4, -1],    # 4 is a year
        [5, 1, 2, -1],    # 5 is a list page
        [0, 6, 2, -1],    # 6 is a short token
        [0, 1, 7, -1],    # 7 is a nationality
        [0, 4, 0, -1],    # cycle and year: counted under 'cycle' only
    ])
    rels = np.where(nodes[:, 1:] >= 0, 0, -1)
    rels[0] = [0, 1, 0]
    noise = np.array([0, 0, 0, 0, 2, 1, 3, 4], dtype=np.int8)
    keep, counts = filters.apply(nodes, rels, noise)
    assert keep.tolist() == [True] + [False] * 7
    assert counts == {"hops": 1, "cycle": 2, "list": 1, "year": 1, "short": 1, "nationality": 1}
    assert sum(counts.values()) == (~keep).sum()

    functional = np.array([True, False])
    keep, counts = filters.apply(nodes[:1], rels[:1], noise, functional=functional)
    assert not keep[0] and counts == {"non_functional": 1}


def test_unique_grounding_rejects_a_hop_with_several_objects():
    # (0, r0) has two objects (1 and 2); (1, r0) and (2, r1) one each.
    g = CSRGraph.from_edges([0, 0, 1, 2], [1, 2, 3, 3], [0, 0, 0, 1], 4)
    nodes = np.array([[0, 1, 3], [1, 3, -1], [2, 3, -1]])
    rels = np.array([[0, 0], [0, -1], [1, -1]])
    assert filters.not_uniquely_grounded(nodes, rels, g).tolist() == [True, False, False]


def test_titles_reveal_noise_when_kind_is_missing():
    got = [filters.classify_title(t) for t in
           ["List of films", "Lists of rivers", "1987", "44 BC", "1990s", "AB", "Welsh", "Ravenna", "Orlanda"]]
    assert got == ["list", "list", "year", "year", "year", "short", "nationality", None, None]
    assert filters.noise_codes(["nationality", None], ["Celandic", "Zorbu"]).tolist() == [4, 0]


def test_chain_hash_is_case_insensitive_and_order_sensitive():
    h = chain_hash(["Ada", "Brova", "Celand"])
    assert len(h) == 40 and int(h, 16) >= 0
    assert h == chain_hash(["ADA", "brova", "CeLand"])
    assert h != chain_hash(["Celand", "Brova", "Ada"])
    assert chain_hash(["a b", "c"]) != chain_hash(["a", "b c"])


# ------------------------------------------------------------------------------------ G_0 build

def test_build_pool_keeps_only_valid_chains_with_evidence(con):
    result = build_pool(con, walks=3000, seed=0)
    chains = load_pool(con)
    assert result["chains"] == len(chains) > 0
    assert result["rejected"] + result["chains"] == 3000
    assert sum(result["rejections"].values()) == result["rejected"]
    for reason in ("hops", "cycle", "list", "year", "short", "nationality", "duplicate"):
        assert result["rejections"].get(reason, 0) > 0, reason
    edges = set(EDGES)
    for c in chains:
        assert c.hops == len(c.relations) == len(c.titles) - 1 >= 2
        assert len(set(c.entity_ids)) == len(c.entity_ids) and not NOISE & set(c.titles)
        assert all(e in edges for e in zip(c.entity_ids, c.entity_ids[1:], c.relations))
        assert c.hash == chain_hash(c.titles) and c.run is None and c.origin == "walk"
        node_ev = [e for e in c.evidence if e.target == "node"]
        assert [e.position for e in node_ev] == list(range(len(c.titles)))
        assert all(e.text == f"{t} is an entity." for e, t in zip(node_ev, c.titles))
    assert len({c.hash for c in chains}) == len(chains)
    # The one anchored edge on a valid chain: Ada -> Brova, evidence from Ada's paragraph 1.
    ada = next(c for c in chains if c.titles[:2] == ["Ada", "Brova"])
    edge_ev = [e for e in ada.evidence if e.target == "edge"]
    assert [(e.position, e.entity_id, e.text) for e in edge_ev][0] == (0, 10, "Ada links on.")
    build = con.execute("SELECT walks, min_hops, max_hops, rejections FROM pool_builds").fetchall()
    assert len(build) == 1 and build[0][:3] == (3000, 2, 3) and json.loads(build[0][3]) == result["rejections"]


def test_build_pool_is_deterministic_and_rebuild_replaces_g0(con, tmp_path):
    build_pool(con, walks=500, seed=4)
    export_pool(con, tmp_path / "a.jsonl")
    build_pool(con, walks=500, seed=4)
    export_pool(con, tmp_path / "b.jsonl")
    strip = lambda p: [{k: v for k, v in json.loads(line).items() if k != "chain_id"}
                       for line in open(p)]
    assert strip(tmp_path / "a.jsonl") == strip(tmp_path / "b.jsonl")
    n = con.execute("SELECT count(*), count(DISTINCT hash) FROM chains").fetchone()
    assert n[0] == n[1] == len(strip(tmp_path / "a.jsonl"))
    orphans = con.execute("""SELECT count(*) FROM evidence WHERE chain_id NOT IN (SELECT chain_id FROM chains)""")
    assert orphans.fetchone()[0] == 0


def test_dr_free_filters(con):
    result = build_pool(con, walks=3000, seed=0, functional_only=True, unique_grounding=True)
    functional = {label for label, f in RELATIONS if f}
    chains = load_pool(con)
    assert chains and all(set(c.relations) <= functional for c in chains)
    # Farnok is directed by two people: no chain may leave Farnok by "directed by".
    assert not any(c.titles[0] == "Farnok" for c in chains)
    assert result["rejections"]["not_unique"] > 0 and result["rejections"]["non_functional"] > 0


def test_bad_input_leaves_store_unchanged(con):
    with pytest.raises(ValueError, match="min_hops"):
        build_pool(con, walks=10, min_hops=1, max_hops=3)
    empty = store.connect(":memory:")
    with pytest.raises(ValueError, match="no edges"):
        build_pool(empty, walks=10)
    assert con.execute("SELECT count(*) FROM chains").fetchone()[0] == 0


# ------------------------------------------------------------------------------ G_t, sampling

def _write_back(con, run="r1"):
    """A write-back as issue 3 will do it: evidence on a G_0 chain at round 1, a new chain at round 2."""
    g0 = load_pool(con)[0]
    con.execute("INSERT INTO evidence VALUES (1000, ?, 0, 'node', ?, NULL, 'retrieved passage', 'writeback', ?, 1, 7)",
                [g0.chain_id, g0.entity_ids[0], run])
    con.execute("INSERT INTO chains VALUES (500, ?, 2, ?, 2, 'writeback', 8)",
                [chain_hash(["Dorin", "Essa", "Celand"]), run])
    con.executemany("INSERT INTO chain_nodes VALUES (500, ?, ?, ?)",
                    [[0, 13, "born in"], [1, 14, "located in"], [2, 12, None]])
    con.execute("INSERT INTO evidence VALUES (1001, 500, 1, 'node', 14, NULL, 'Essa text', 'writeback', ?, 2, 8)",
                [run])
    return g0


def test_g_t_reconstruction(con):
    build_pool(con, walks=2000, seed=0)
    n0 = len(load_pool(con))
    g0 = _write_back(con)
    by_id = lambda pool: {c.chain_id: c for c in pool}
    base = len(g0.evidence)
    for run, rnd, n_chains, n_ev, has_new in [
        (None, None, n0, base, False), ("r1", 0, n0, base, False), ("r1", 1, n0, base + 1, False),
        ("r1", 2, n0 + 1, base + 1, True), ("r1", None, n0 + 1, base + 1, True), ("r2", 5, n0, base, False),
    ]:
        pool = by_id(load_pool(con, run=run, round=rnd))
        assert len(pool) == n_chains and len(pool[g0.chain_id].evidence) == n_ev, (run, rnd)
        assert (500 in pool) == has_new
    new = by_id(load_pool(con, run="r1"))[500]
    assert new.titles == ["Dorin", "Essa", "Celand"] and new.relations == ["born in", "located in"]
    assert new.evidence[0].source == "writeback" and new.evidence[0].trajectory_id == 8
    with pytest.raises(ValueError, match="round"):
        load_pool(con, run="r1", round=-1)
    # Rebuilding G_0 now would orphan r1's evidence: refused, store unchanged, unless forced.
    with pytest.raises(ValueError, match="r1"):
        build_pool(con, walks=100, seed=1)
    assert len(load_pool(con, run="r1")) == n0 + 1
    build_pool(con, walks=100, seed=1, force=True)
    assert 500 in by_id(load_pool(con, run="r1"))
    assert con.execute("SELECT count(*) FROM evidence WHERE evidence_id = 1000").fetchone()[0] == 0


def test_sampling_is_deterministic_and_weighted_by_evidence(con):
    build_pool(con, walks=2000, seed=0)
    _write_back(con)
    a = [c.chain_id for c in sample_chains(con, 3, seed=5, run="r1")]
    assert a == [c.chain_id for c in sample_chains(con, 3, seed=5, run="r1")] and len(set(a)) == 3
    ids, counts = evidence_counts(con, run="r1")
    assert counts.max() > counts.min()
    # Drawing half the pool, weighted picks carry more evidence on average than uniform picks.
    mean_ev = lambda w: np.mean([len(c.evidence) for s in range(10)
                                 for c in sample_chains(con, len(ids) // 2, seed=s, run="r1", weighted=w)])
    assert mean_ev(True) > mean_ev(False)
    with pytest.raises(ValueError, match="holds"):
        sample_chains(con, len(ids) + 1, run="r1")


def test_export_format(con, tmp_path):
    build_pool(con, walks=1000, seed=0)
    n = export_pool(con, tmp_path / "pool.jsonl")
    lines = [json.loads(line) for line in open(tmp_path / "pool.jsonl")]
    assert n == len(lines) > 0
    assert [r["hash"] for r in lines] == sorted(r["hash"] for r in lines)
    for r in lines:
        assert {"entities", "relations", "hash", "chain_id", "hops", "evidence"} <= set(r)
        assert len(r["entities"]) == len(r["relations"]) + 1 == r["hops"] + 1
        assert r["hash"] == chain_hash(r["entities"]) and r["evidence"] >= r["hops"] + 1


# ------------------------------------------------------------------------------------------ CLI

def test_cli_build_and_export(con, tmp_path, capsys):
    db = con.execute("SELECT path FROM duckdb_databases() WHERE database_name = current_database()").fetchone()[0]
    con.close()
    assert main(["pool", "build", "--db", db, "--walks", "800", "--hops", "2-3", "--seed", "0"]) == 0
    out = capsys.readouterr().out
    assert "chains from 800 walks" in out and "rejected cycle" in out
    assert main(["pool", "export", "--db", db, "--round", "0", str(tmp_path / "g0.jsonl")]) == 0
    assert "wrote" in capsys.readouterr().out and (tmp_path / "g0.jsonl").stat().st_size > 0
    assert main(["pool", "build", "--db", db, "--walks", "10", "--hops", "two"]) == 2
    assert "--hops: expected N or MIN-MAX" in capsys.readouterr().err
    assert main(["pool", "export", "--db", str(tmp_path / "missing.duckdb"), str(tmp_path / "x.jsonl")]) == 2
    assert "no store at" in capsys.readouterr().err


def test_pool_on_a_tinyworld_smoke_world(tmp_path):
    from workbench.kg.tinyworld import generate_world, write_world

    con = store.connect(tmp_path / "tw.duckdb")
    write_world(con, generate_world(200, seed=0))
    result = build_pool(con, walks=2000, seed=0)
    assert result["chains"] > 100
    for reason in ("hops", "cycle", "list", "year", "nationality"):  # TinyWorld's noise is reached
        assert result["rejections"].get(reason, 0) > 0, reason
    edges = set(con.execute("SELECT src, dst, relation FROM edges").fetchall())
    kinds = dict(con.execute("SELECT entity_id, kind FROM entities").fetchall())
    for c in load_pool(con):
        assert all(e in edges for e in zip(c.entity_ids, c.entity_ids[1:], c.relations))
        assert all(kinds[e] == "entity" for e in c.entity_ids)
        assert sum(e.target == "node" for e in c.evidence) == len(c.entity_ids)


# sha256 of G_0 built on the smoke world with the smoke preset (2,000 walks, seed 0): the rows of
# each table below, ordered, as JSON. The walks' draws and the dedup order are pinned: change these
# only with a deliberate change to the pool (or to the world, pinned in test_tinyworld.py).
SMOKE_POOL_COLUMNS = {
    "chains": "chain_id, hash, hops, run, created_round, origin",
    "chain_nodes": "chain_id, position, entity_id, relation",
    "evidence": "evidence_id, chain_id, position, target, entity_id, passage_id, text, source, run, round",
}
SMOKE_POOL_SHA256 = {
    "chains": "6666e50c6c4492b86615fa48e69a5fed44f8742d65d667929c6164c56d6a1667",
    "chain_nodes": "d6eb6de885787e0480ac9ceb34a8d29d71e7bac89c449445a5197095e0d4caa6",
    "evidence": "58db183ec46fb5ecda65757d744857bdb5f751b20ea7c50158da731c0f0bd5ba",
}


def test_smoke_pool_is_pinned():
    from workbench.config import preset
    from workbench.kg.tinyworld import build_world

    con = store.connect(":memory:")
    build_world(con, preset="smoke", seed=0)
    p = preset("smoke").pool
    build_pool(con, p.walks, p.min_hops, p.max_hops, seed=0)

    def sha256(table):
        rows = con.execute(f"SELECT {SMOKE_POOL_COLUMNS[table]} FROM {table} ORDER BY ALL").fetchall()
        return hashlib.sha256(json.dumps(rows).encode()).hexdigest()

    assert {t: sha256(t) for t in SMOKE_POOL_COLUMNS} == SMOKE_POOL_SHA256


def test_export_writes_each_chains_passages_as_load_pool_has_them(con, tmp_path):
    build_pool(con, walks=1000, seed=0)
    export_pool(con, tmp_path / "pool.jsonl")
    lines = {r["chain_id"]: r for r in map(json.loads, open(tmp_path / "pool.jsonl"))}
    for chain in load_pool(con):
        passages = lines[chain.chain_id]["passages"]
        assert len(passages) == lines[chain.chain_id]["evidence"] == len(chain.evidence)
        assert [(p["position"], p["target"], p["text"]) for p in passages] == \
            [(e.position, e.target, e.text) for e in chain.evidence]
    export_pool(con, tmp_path / "counts.jsonl", passages=False)
    assert "passages" not in json.loads(open(tmp_path / "counts.jsonl").readline())


def test_cli_export_reads_the_store_read_only_while_another_reader_has_it(con, tmp_path, capsys):
    build_pool(con, walks=500, seed=0)
    db = con.execute("SELECT path FROM duckdb_databases() WHERE database_name = current_database()").fetchone()[0]
    con.close()
    reader = store.connect(db, read_only=True)  # a notebook reading the store: a writer could not open it
    try:
        assert main(["pool", "export", "--db", db, str(tmp_path / "g0.jsonl")]) == 0
    finally:
        reader.close()
    assert "with their evidence passages" in capsys.readouterr().out
    assert "passages" in json.loads((tmp_path / "g0.jsonl").open().readline())


def test_the_same_build_on_the_same_world_is_a_no_op_even_when_runs_use_it(tmp_path):
    """A notebook that rebuilds G_0 with the settings it already has (while a run uses it) changes
    nothing; other settings are still refused without force."""
    from workbench import store
    from workbench.kg.pool import build_pool
    from workbench.kg.tinyworld import build_world

    con = store.connect(tmp_path / "s.duckdb")
    build_world(con, preset="smoke", seed=0)
    first = build_pool(con, walks=500, seed=0)
    chain = con.execute("SELECT min(chain_id) FROM chains").fetchone()[0]
    con.execute("INSERT INTO candidates (candidate_id, run, round, chain_id) VALUES (0, 'r', 0, ?)", [chain])
    before = con.execute("SELECT count(*), max(chain_id) FROM chains").fetchone()
    again = build_pool(con, walks=500, seed=0)
    assert again["build_id"] == first["build_id"] and again["evidence"] == first["evidence"]
    assert con.execute("SELECT count(*), max(chain_id) FROM chains").fetchone() == before
    with pytest.raises(ValueError, match="in use"):
        build_pool(con, walks=400, seed=0)
