"""Eqs. 8-9: the deterministic path extractor and M(u, v) on a small G_t computed by hand."""

import doctest
import math

import pytest

from workbench import store
from workbench.method import path_support
from workbench.bench.loop import bench_path_support
from workbench.method.path_support import EvidenceGraph, PathSupportParams, Record, extract_path


def test_doctests():
    assert doctest.testmod(path_support).failed == 0


@pytest.fixture()
def con():
    con = store.connect(":memory:")
    con.execute("INSERT INTO entities VALUES (1,'Ann','person','entity','t'), (2,'Rome','city','entity','t'), "
                "(3,'Italy','country','entity','t'), (4,'Bob','person','entity','t'), "
                "(5,'Paris','city','entity','t')")
    con.execute("INSERT INTO chains VALUES (10,'h10',2,NULL,0,'walk',NULL), (11,'h11',1,NULL,0,'walk',NULL), "
                "(12,'h12',1,'other',1,'writeback',7)")
    con.execute("INSERT INTO chain_nodes VALUES (10,0,1,'born in'), (10,1,2,'located in'), (10,2,3,NULL), "
                "(11,0,4,'lives in'), (11,1,2,NULL), (12,0,1,'visited'), (12,1,5,NULL)")
    con.execute("""INSERT INTO evidence VALUES
        (0,10,0,'node',1,100,'Ann was born in Rome.','walk',NULL,0,NULL),
        (1,10,1,'node',2,101,'Rome is located in Italy.','walk',NULL,0,NULL),
        (2,10,2,'node',3,102,'Italy is a country in Europe.','walk',NULL,0,NULL),
        (3,11,0,'node',4,103,'Bob lives in Rome and met Ann.','walk',NULL,0,NULL),
        (4,11,1,'node',2,104,'Rome is old.','walk',NULL,0,NULL),
        (5,12,0,'node',1,105,'Ann visited Paris.','writeback','other',1,7),
        (6,10,1,'edge',3,106,'The capital of Italy is Rome, where Ann was born.','writeback','r',2,8),
        (7,10,0,'edge',5,107,'Paris, Ann, Rome.','writeback','other',1,9)""")
    return con


def test_hand_computed_graph_round_1(con):
    # G_1 of run 'r': chains 10, 11 (G_0), not 12 (run 'other'); evidence rows 0-4 (rows 5, 7 belong
    # to 'other', row 6 to round 2). Weights alpha .5, beta .25, gamma .25, eta .5, eps .01.
    g = EvidenceGraph.from_store(con, run="r", round=1)
    # Record 10: seq [Ann, Rome, Italy]. Ann's passage names {Ann, Rome}; Rome's {Rome, Italy};
    # Italy's {Italy}.
    # (Ann, Rome): order 1 -> .5; text (Rome in Ann's = 1, Ann in Rome's = 0)/2 = .5 -> .125; co 1 -> .25
    assert g.direct(1, 2) == pytest.approx(0.875)
    # (Rome, Ann): order .5 -> .25; text .5 -> .125; co .25 -> .625
    assert g.direct(2, 1) == pytest.approx(0.625)
    # (Rome, Italy) likewise .875, (Italy, Rome) .625
    assert g.direct(2, 3) == pytest.approx(0.875)
    assert g.direct(3, 2) == pytest.approx(0.625)
    # (Ann, Italy): not adjacent, no passage names the other, never together in one passage -> 0
    assert g.direct(1, 3) == 0.0
    # Record 11: seq [Bob, Rome]; Bob's passage names {Bob, Rome} (Ann is named but is no record entity)
    assert g.direct(4, 2) == pytest.approx(0.875)
    assert g.direct(2, 4) == pytest.approx(0.625)
    assert g.direct(1, 4) == 0.0
    # Bridges: M(Ann, Italy) = .5 * max_z min(M_d(Ann, z), M_d(z, Italy)) = .5 * min(.875, .875) = .4375
    assert g.support(1, 3) == pytest.approx(0.4375)
    # M(Ann, Bob) via Rome: .5 * min(M_d(Ann, Rome) .875, M_d(Rome, Bob) .625) = .3125
    assert g.support(1, 4) == pytest.approx(0.3125)
    # M(Italy, Ann) via Rome: .5 * min(.625, .625) = .3125
    assert g.support(3, 1) == pytest.approx(0.3125)
    # Paris only co-occurs with Ann in run 'other': invisible -> 0
    assert g.support(1, 5) == 0.0
    # S_path of [Ann, Rome, Italy]: exp(mean(log .885, log .885)) = .885 -> passes tau .5
    full = g.path_support([1, 2, 3])
    assert full.steps == pytest.approx((0.875, 0.875))
    assert full.s_path == pytest.approx(0.885) and full.passed
    # The shortcut [Ann, Italy]: .4375 + .01 = .4475 < .5 -> fails
    short = g.path_support([1, 3])
    assert short.s_path == pytest.approx(0.4475) and not short.passed
    # [Ann, Rome, Bob]: sqrt(.885 * .635) = sqrt(.561975) = .749650 -> passes
    assert g.path_support([1, 2, 4]).s_path == pytest.approx(math.sqrt(0.561975))
    # A lucky [Ann, Paris]: eps alone = .01; a one-entity path has no hop -> 0
    assert g.path_support([1, 5]).s_path == pytest.approx(0.01)
    assert g.path_support([1]) == (0.0, (), False)


def test_hand_computed_graph_round_2(con):
    # Round 2 adds row 6 to record 10: owner Italy, it names {Italy, Rome, Ann}.
    g = EvidenceGraph.from_store(con, run="r", round=2)
    # (Rome, Italy): order .5; text (Italy in Rome's = 1, Rome in Italy's = 1) = 1 -> .25; co .25 -> 1.0
    assert g.direct(2, 3) == pytest.approx(1.0)
    # (Italy, Rome): .25 + .25 + .25 = .75
    assert g.direct(3, 2) == pytest.approx(0.75)
    # (Ann, Italy): order 0; text (Italy in Ann's 0 + Ann in Italy's 1)/2 -> .125; co 1 -> .25: .375,
    # but the bridge .5 * min(.875, 1.0) = .4375 is larger
    assert g.direct(1, 3) == pytest.approx(0.375)
    assert g.support(1, 3) == pytest.approx(0.4375)


def test_store_scopes(con):
    # run=None reads G_0 alone: no write-back evidence, so Rome->Italy keeps .875
    assert EvidenceGraph.from_store(con).direct(2, 3) == pytest.approx(0.875)
    # run 'other' sees chain 12 and row 7 (on chain 10, owner Paris, naming Paris, Ann, Rome).
    g = EvidenceGraph.from_store(con, run="other")
    # record 12 [Ann, Paris]: order 1 -> .5; text (Paris in Ann's row 5 = 1, no Paris passage = 0) -> .125;
    # co .25 -> .875. Record 10 gives (Ann, Paris) only text .5 -> .125 + co .25 = .375. Max: .875
    assert g.direct(1, 5) == pytest.approx(0.875)
    # (Paris, Rome) from record 10 alone: order 0; text (Rome in row 7 = 1, Paris in Rome's = 0) -> .125;
    # co .25 -> .375
    assert g.direct(5, 2) == pytest.approx(0.375)


def test_params_validation():
    with pytest.raises(ValueError):
        PathSupportParams(alpha=0.8, beta=0.3, gamma=0.2)
    with pytest.raises(ValueError):
        PathSupportParams(eps=-0.1)
    with pytest.raises(ValueError, match="no title"):
        EvidenceGraph.from_records([Record([1, 2])], {1: "a"})


def test_custom_weights_change_scores():
    # alpha 1, beta 0, gamma 0: only order counts; eta 1: bridge undamped
    g = EvidenceGraph.from_records([Record([1, 2, 3])], {1: "A", 2: "B", 3: "C"},
                                   PathSupportParams(alpha=1.0, beta=0.0, gamma=0.0, eta=1.0))
    assert g.direct(1, 2) == 1.0 and g.direct(2, 1) == 0.5
    assert g.support(1, 3) == 1.0  # min(1, 1) via B


TITLES = {1: "Kavimo Rutel", 2: "Dagiju", 3: "Pelora", 9: "Noise Town", 10: "Rome"}


def test_extract_path_rules():
    # grounded and named by a query, ordered by first naming query, ending at the answer entity
    assert extract_path(["Kavimo Rutel birthplace", "Dagiju country"], [1, 9, 2], TITLES, "Pelora") == [1, 2, 3]
    # retrieval order does not matter: the query order does
    assert extract_path(["Kavimo Rutel birthplace", "Dagiju country"], [2, 1], TITLES, "Pelora") == [1, 2, 3]
    # named but never retrieved (not grounded): off the path
    assert extract_path(["Kavimo Rutel", "Dagiju"], [1], TITLES, "Pelora") == [1, 3]
    # retrieved distractor never named by a query: off the path
    assert extract_path(["Kavimo Rutel"], [1, 9], TITLES, None) == [1]
    # an answer that is no entity ends nothing; an answer entity seen earlier moves to the end
    assert extract_path(["Kavimo Rutel", "Dagiju"], [1, 2], TITLES, "somewhere") == [1, 2]
    assert extract_path(["Dagiju", "Kavimo Rutel"], [1, 2], TITLES, "the dagiju") == [1, 2]
    # whole-word matching: 'Romeo' does not name Rome
    assert extract_path(["Romeo and Juliet"], [10], TITLES, None) == []
    assert extract_path([], [], TITLES, "") == []


def test_bench_small():
    r = bench_path_support(n_chains=100, n_trajectories=500, seed=1)
    assert r["trajectories"] == 500 and r["path_support_per_s"] > 0
    # the synthetic mix: 60% follow their chain (pass), the rest shortcut or wander (fail)
    assert 0.5 < r["pass_rate"] < 0.7
