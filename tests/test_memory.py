"""Section 3.4: verified write-back -- filtering, node/edge matching, dedup, idempotent replay,
one transaction (rollback leaves the store unchanged), and the rate benchmark."""

import doctest

import duckdb
import pytest

from workbench import store
from workbench.kg.pool import chain_hash
from workbench.method import memory
from workbench.bench.loop import bench_writeback
from workbench.method.memory import ChainView, RetrievedPassage, WriteBackItem, write_back
from workbench.method.path_support import EvidenceGraph

TITLES = ["Ann", "Rome", "Italy"]
CHAIN = ChainView(10, chain_hash(TITLES), [1, 2, 3], TITLES, ["born in", "located in"],
                  ["Ann was born in Rome.", "Rome is located in Italy.", "Italy is a country."])


@pytest.fixture()
def con():
    con = store.connect(":memory:")
    con.execute("INSERT INTO entities VALUES (1,'Ann','person','entity','t'), (2,'Rome','city','entity','t'), "
                "(3,'Italy','country','entity','t'), (4,'Bob','person','entity','t')")
    con.execute("INSERT INTO edges VALUES (1,3,'citizen of','t'), (1,3,'born near','t')")
    con.execute("INSERT INTO chains VALUES (10, ?, 2, NULL, 0, 'walk', NULL)", [CHAIN.hash])
    con.execute("INSERT INTO chain_nodes VALUES (10,0,1,'born in'), (10,1,2,'located in'), (10,2,3,NULL)")
    con.execute("""INSERT INTO evidence VALUES
        (0,10,0,'node',1,100,'Ann was born in Rome.','walk',NULL,0,NULL),
        (1,10,1,'node',2,101,'Rome is located in Italy.','walk',NULL,0,NULL),
        (2,10,2,'node',3,102,'Italy is a country.','walk',NULL,0,NULL)""")
    return con


def snapshot(con):
    return {t: con.execute(f"SELECT * FROM {t} ORDER BY ALL").fetchall() for t in ("chains", "chain_nodes", "evidence")}


def item(tid, path, passages, r_ans=1, s_path=0.9, chain=CHAIN):
    return WriteBackItem(tid, chain, r_ans, s_path, path, [RetrievedPassage(*p) for p in passages])


def test_doctests():
    assert doctest.testmod(memory).failed == 0


def test_known_sequence_merges_new_evidence_only(con):
    counts = write_back(con, "r", 2, [item(7, [1, 2, 3], [
        (200, 2, "Rome, where Ann was born, lies in Italy."),  # node 1; edge 0 (Ann+Rome); edge 1 (Rome+Italy)
        (101, 2, "Rome is located in Italy."),  # node 1 already in G_0 -> skipped; edge 1 is new
        (300, 4, "Bob has never been anywhere."),  # matches no node or edge: not written
    ])])
    assert counts == {"new_chains": 0, "merged_evidence": 4, "skipped_duplicates": 1, "rejected": 0, "not_chains": 0}
    rows = con.execute("SELECT chain_id, position, target, entity_id, passage_id, source, run, round, trajectory_id "
                       "FROM evidence WHERE source = 'writeback' ORDER BY position, target, passage_id").fetchall()
    assert rows == [(10, 0, "edge", 2, 200, "writeback", "r", 3, 7), (10, 1, "edge", 2, 101, "writeback", "r", 3, 7),
                    (10, 1, "edge", 2, 200, "writeback", "r", 3, 7), (10, 1, "node", 2, 200, "writeback", "r", 3, 7)]
    assert con.execute("SELECT min(evidence_id) FROM evidence WHERE source = 'writeback'").fetchall() == [(3,)]


def test_new_sequence_becomes_a_chain_and_the_originating_chain_gets_the_evidence(con):
    counts = write_back(con, "r", 0, [
        item(8, [1, 3, 2], [(400, 3, "Italy is where Ann lives.")]),  # Ann -> Italy (edges table) -> Rome
        item(9, [2, 3, 1], [(401, 1, "Ann.")]),  # Rome -> Italy (chain's label), Italy -> Ann (no label)
    ])
    # 400: chain 11 node 1 and edge 0 (names Ann and Italy), chain 10 node 2; 401: chain 12 node 2, chain 10 node 0
    assert counts == {"new_chains": 2, "merged_evidence": 5, "skipped_duplicates": 0, "rejected": 0, "not_chains": 0}
    chains = con.execute("SELECT chain_id, hash, hops, run, created_round, origin, trajectory_id FROM chains "
                         "WHERE origin = 'writeback' ORDER BY chain_id").fetchall()
    assert chains == [(11, chain_hash(["ann", "italy", "rome"]), 2, "r", 1, "writeback", 8),
                      (12, chain_hash(["Rome", "Italy", "Ann"]), 2, "r", 1, "writeback", 9)]
    nodes = con.execute("SELECT * FROM chain_nodes WHERE chain_id > 10 ORDER BY chain_id, position").fetchall()
    # labels: edges table (min label of (Ann, Italy)), originating chain, then 'related to'
    assert nodes == [(11, 0, 1, "born near"), (11, 1, 3, "related to"), (11, 2, 2, None),
                     (12, 0, 2, "located in"), (12, 1, 3, "related to"), (12, 2, 1, None)]
    ev = con.execute("SELECT chain_id, position, target, passage_id FROM evidence WHERE round = 1 "
                     "ORDER BY chain_id, position, target").fetchall()
    assert ev == [(10, 0, "node", 401), (10, 2, "node", 400), (11, 0, "edge", 400), (11, 1, "node", 400),
                  (12, 2, "node", 401)]


def test_a_known_path_chain_and_the_originating_chain_both_get_the_evidence(con):
    con.execute("INSERT INTO chains VALUES (11, ?, 2, NULL, 0, 'walk', NULL)", [chain_hash(["Italy", "Rome", "Ann"])])
    con.execute("INSERT INTO chain_nodes VALUES (11,0,3,'has city'), (11,1,2,'birthplace of'), (11,2,1,NULL)")
    counts = write_back(con, "r", 0, [item(8, [3, 2, 1], [(400, 3, "Italy is where Ann lives.")])])
    assert counts["new_chains"] == 0 and counts["merged_evidence"] == 2
    assert con.execute("SELECT chain_id, position, target FROM evidence WHERE round = 1 ORDER BY ALL").fetchall() == [
        (10, 2, "node"), (11, 0, "node")]


def test_no_originating_chain_and_no_chain_path_writes_nothing(con):
    before = snapshot(con)
    orphan = ChainView(-1, "", [], [], [], [])
    counts = write_back(con, "r", 0, [item(8, [1, 3], [(400, 3, "Italy is where Ann lives.")], chain=orphan)])
    assert counts == {"new_chains": 0, "merged_evidence": 0, "skipped_duplicates": 0, "rejected": 0, "not_chains": 1}
    assert snapshot(con) == before


@pytest.mark.parametrize("path, why", [([1, 3], "one hop"), ([1, 2, 1], "a cycle"), ([1, 5, 3], "a year node")])
def test_a_path_that_is_no_chain_only_feeds_the_originating_chain(con, path, why):
    con.execute("INSERT INTO entities VALUES (5, '1987', 'year', 'year', 't')")
    counts = write_back(con, "r", 0, [item(8, path, [(400, 3, "Italy is where Ann lives.")])])
    assert counts["new_chains"] == 0 and counts["not_chains"] == 1, why
    # the passage (entity Italy) still reaches node 2 of the originating chain
    assert con.execute("SELECT chain_id, position, target FROM evidence WHERE round = 1").fetchall() == [(10, 2, "node")]


def test_dedup_within_a_batch_and_across_runs(con):
    a = item(20, [1, 3, 2], [(500, 1, "Ann saw Italy.")])
    b = item(21, [1, 3, 2], [(500, 1, "Ann saw Italy."), (501, 3, "Italy.")])
    counts = write_back(con, "r", 0, [a, b])
    # one new chain for the shared sequence; passage 500's rows (new chain node 0 and edge 0, chain 10
    # node 0) once, 501's nodes (new chain node 1, chain 10 node 2) once
    assert counts == {"new_chains": 1, "merged_evidence": 5, "skipped_duplicates": 3, "rejected": 0, "not_chains": 0}
    # another run has its own G_t: the same sequence is new there
    assert write_back(con, "s", 0, [a])["new_chains"] == 1
    # run 'r' sees G_0's node evidence as known; run 's' too (G_0 is shared)
    assert write_back(con, "s", 0, [item(22, [1, 2, 3], [(100, 1, "Ann was born in Rome.")])]) == {
        "new_chains": 0, "merged_evidence": 1, "skipped_duplicates": 1, "rejected": 0, "not_chains": 0}  # edge 0


def test_rejections(con):
    before = snapshot(con)
    counts = write_back(con, "r", 0, [
        item(1, [1, 2, 3], [(600, 2, "Rome.")], r_ans=0, s_path=1.0),  # wrong answer
        item(2, [1, 2, 3], [(600, 2, "Rome.")], s_path=0.49),  # below tau_path
        item(3, [2], [(600, 2, "Rome.")]),  # no hop
    ], tau_path=0.5)
    assert counts == {"new_chains": 0, "merged_evidence": 0, "skipped_duplicates": 0, "rejected": 3, "not_chains": 0}
    assert snapshot(con) == before
    # at exactly tau_path it passes
    assert write_back(con, "r", 0, [item(4, [1, 2, 3], [(600, 2, "Rome.")], s_path=0.5)])["merged_evidence"] == 1


def test_replay_changes_nothing(con):
    items = [item(7, [1, 2, 3], [(200, 2, "Rome, where Ann was born, lies in Italy.")]),
             item(8, [1, 3, 2], [(400, 3, "Italy is where Ann lives.")])]
    first = write_back(con, "r", 4, items)
    assert first["new_chains"] == 1 and first["merged_evidence"] == 6
    after_first = snapshot(con)
    again = write_back(con, "r", 4, items)
    assert again == {"new_chains": 0, "merged_evidence": 0, "skipped_duplicates": 6, "rejected": 0, "not_chains": 0}
    assert snapshot(con) == after_first


def test_bad_item_rolls_back(con):
    before = snapshot(con)
    good = item(7, [1, 3, 2], [(200, 3, "Italy, Ann.")])  # would create a chain
    with pytest.raises(ValueError, match="path entities \\[99\\] are not in the entities table"):
        write_back(con, "r", 0, [good, item(8, [1, 99], [])])
    with pytest.raises(ValueError, match="item 1 .*bad retrieved passage"):
        write_back(con, "r", 0, [good, item(8, [1, 2], [("p", 2, "x")])])
    with pytest.raises(ValueError, match="r_ans must be 0 or 1"):
        write_back(con, "r", 0, [item(9, [1, 2], [], r_ans=0.5)])
    # a failure inside DuckDB after the new chain was inserted (a passage id beyond BIGINT): the
    # original error surfaces and everything is undone
    with pytest.raises(duckdb.ConversionException, match="out of range"):
        write_back(con, "r", 0, [good, item(10, [1, 2, 3], [(2 ** 70, 2, "Rome, Ann.")])])
    assert snapshot(con) == before
    with pytest.raises(ValueError, match="round"):
        write_back(con, "r", -1, [good])


def test_written_evidence_raises_path_support_next_round(con):
    # G_0: Ann -> Italy is only bridged: .5 * min(M(Ann, Rome), M(Rome, Italy))
    g0 = EvidenceGraph.from_store(con, run="r", round=0)
    write_back(con, "r", 0, [item(7, [1, 3, 2], [(400, 3, "Italy is where Ann lives.")])])
    # G_1 holds the new chain [Ann, Italy, Rome] with its evidence: the direct support is now order 1 -> .5;
    # text (Italy's passage names Ann) .5 -> .125; co .25 -> .875
    g1 = EvidenceGraph.from_store(con, run="r", round=1)
    assert g1.direct(1, 3) == pytest.approx(0.875)
    assert g0.support(1, 3) < 0.875
    assert EvidenceGraph.from_store(con, run="r", round=0).direct(1, 3) == g0.direct(1, 3)  # G_0 unchanged


def test_bench_writeback_small():
    r = bench_writeback(n_chains=50, n_items=100, seed=0)  # raises if evidence points to no chain
    assert r["evidence_written"] > 0 and r["new_chains"] > 0 and r["replay_written"] == 0
    assert r["replay_skipped"] == r["evidence_written"]


def test_numpy_ids_are_accepted(con):
    import numpy as np
    it = WriteBackItem(np.int64(7), CHAIN, 1, 0.9, [np.int64(1), np.int64(3), np.int64(2)],
                       [RetrievedPassage(np.int64(400), np.int64(3), "Italy is where Ann lives.")])
    assert write_back(con, "r", 0, [it]) == {"new_chains": 1, "merged_evidence": 3, "skipped_duplicates": 0,
                                             "rejected": 0, "not_chains": 0}
    assert con.execute("SELECT trajectory_id FROM chains WHERE origin = 'writeback'").fetchall() == [(7,)]
