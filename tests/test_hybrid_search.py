"""search.index=hybrid: BM25 and dense hits fused (search/index.py fuse and HybridIndex)."""

from __future__ import annotations

import random

import pytest

from workbench import config, store
from workbench.search.index import FUSION, FUSION_WEIGHT, FUSIONS, HYBRID_DEPTH, RRF_K, fuse, rrf
from workbench.search.retriever import make_retriever
from workbench.search.tool import INDEX_KINDS, SearchTool

TEXTS = [
    ("Assam", "Assam is a state in northeastern India known for its tea gardens."),
    ("Darjeeling", "Darjeeling tea is grown on the slopes of the Himalayas."),
    ("Coffee", "Coffee is brewed from roasted beans of the Coffea plant."),
    ("Kenya", "Kenya exports black tea and cut flowers."),
    ("Yerba mate", "Yerba mate is a caffeinated infusion drunk from a gourd in South America."),
    ("Oolong", "Oolong is a partially oxidised Chinese brew made from Camellia sinensis leaves."),
    ("Nile", "The Nile is the longest river in Africa."),
    ("Amazon", "The Amazon carries more water than any other river."),
]


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    path = tmp_path_factory.mktemp("hybrid") / "s.duckdb"
    con = store.connect(str(path))
    for i, (title, text) in enumerate(TEXTS, start=1):
        con.execute("INSERT INTO entities VALUES (?, ?, 'thing', 'entity', 't')", [i, title])
        con.execute("INSERT INTO passages VALUES (?, ?, 0, ?)", [10 * i, i, text])
    con.close()
    return path


QUERIES = ["where is tea grown", "a drink from a gourd", "longest river", "zzqx unknownword"]


def test_hybrid_is_rrf_of_the_bm25_and_dense_rankings(db):
    con = store.connect(str(db), read_only=True)
    depth = 5
    bm25, dense = SearchTool(con, "bm25", cache=False), SearchTool(con, "dense", cache=False)
    hybrid = SearchTool(con, "hybrid", cache=False, rrf_k=10, hybrid_depth=depth, fusion="rrf", fusion_weight=0.5)
    for query in QUERIES:
        lexical = [h.passage_id for h in bm25.search([query], k=depth)[0]]  # BM25's zero scores already dropped
        semantic = [h.passage_id for h in dense.search([query], k=depth)[0]]
        expected = dict(rrf([lexical, semantic], k=depth * 2, c=10))
        got = hybrid.search([query], k=4)[0]
        # weight 0.5: Cormack et al.'s unweighted sum, halved; the same top 4 up to ties
        assert all(h.score == pytest.approx(expected[h.passage_id] / 2, rel=1e-5) for h in got), query
        assert sorted(round(s / 2, 6) for s in expected.values())[::-1][:4] == [round(h.score, 6) for h in got], query
    # no known term: BM25 adds nothing, so the hybrid ranks as dense does
    assert [h.passage_id for h in hybrid.search(["zzqx unknownword"], k=4)[0]] == \
        [h.passage_id for h in dense.search(["zzqx unknownword"], k=4)[0]]
    # a passage both rank first outscores anything only one of them ranks
    top = hybrid.search(["longest river in Africa"], k=1)[0][0]
    assert top.title == "Nile" and top.score == pytest.approx(1 / (10 + 1), rel=1e-6)
    con.close()


def _lists(rng: random.Random, rows: int = 12) -> tuple[list, list]:
    """Two random ranked (row, score) lists over shared rows, with tied scores in each."""
    lexical = sorted(((r, float(rng.choice([1, 2, 2, 3, 5, 8]))) for r in rng.sample(range(rows), rng.randint(0, 8))),
                     key=lambda h: -h[1])
    dense = sorted(((r, rng.choice([0.2, 0.5, 0.5, 0.9])) for r in rng.sample(range(rows), rng.randint(0, 8))),
                   key=lambda h: -h[1])
    return lexical, dense


@pytest.mark.parametrize("fusion", FUSIONS)
def test_fuse_at_weight_1_keeps_bm25s_order_and_at_0_dense_s(fusion):
    rng = random.Random(0)
    for _ in range(300):
        lexical, dense = _lists(rng)
        for weight, first, second in ((1.0, lexical, dense), (0.0, dense, lexical)):
            got = [r for r, _ in fuse(lexical, dense, k=30, fusion=fusion, weight=weight)]
            listed = [r for r, _ in first]
            # the weighted list's order exactly (ties in its scores kept in its order), then the
            # other's rows it lacks, in the other's order
            assert got == listed + [r for r, _ in second if r not in listed], (fusion, weight, lexical, dense)


@pytest.mark.parametrize("fusion", FUSIONS)
def test_fuse_is_deterministic_and_ties_go_by_rank_then_row(fusion):
    rng = random.Random(1)
    for _ in range(100):
        lexical, dense = _lists(rng)
        weight = rng.choice([0.2, 0.5, 0.8])
        assert fuse(lexical, dense, 10, fusion, weight) == fuse(list(lexical), list(dense), 10, fusion, weight)
    # rows 7 and 3 each first in one list only, equal weights: equal scores; BM25's (weight 0.5) wins
    assert [r for r, _ in fuse([(7, 4.0)], [(3, 0.9)], 2, fusion, 0.5)] == [7, 3]
    assert [r for r, _ in fuse([(7, 4.0)], [(3, 0.9)], 2, fusion, 0.4)] == [3, 7]
    # rows the heavier list lacks, tied in the other (same score at ranks 1, 2): by that rank, not by row
    assert [r for r, _ in fuse([], [(9, 0.5), (2, 0.5)], 2, fusion, 0.5)] == [9, 2]


def test_fuse_values_by_hand():
    lexical, dense = [(1, 10.0), (2, 6.0), (3, 2.0)], [(3, 0.9), (4, 0.5)]
    # min-max: BM25 1, 0.5, 0 (row 4 absent: 0); dense 1 (row 3), 0 (row 4), absent 0
    got = dict(fuse(lexical, dense, 4, "minmax", 0.25))
    assert got == pytest.approx({1: 0.25, 2: 0.125, 3: 0.75, 4: 0.0})
    # z-score: BM25 (10, 6, 2) -> (1.2247, 0, -1.2247); dense (0.9, 0.5) -> (1, -1); absent: the list's least
    got = dict(fuse(lexical, dense, 4, "zscore", 0.5))
    z = 1.5 ** 0.5
    assert got == pytest.approx({1: (z - 1) / 2, 2: -0.5, 3: (-z + 1) / 2, 4: (-z - 1) / 2})
    # rrf, c=0, weight 0.75: row 3 is BM25's third and dense's first
    assert dict(fuse(lexical, dense, 4, "rrf", 0.75, c=0))[3] == pytest.approx(0.75 / 3 + 0.25 / 1)
    assert fuse([], [], 3) == [] and fuse(lexical, dense, 2, "minmax", 1.0) == [(1, 1.0), (2, 0.5)]


def test_fuse_refuses_bad_values_naming_the_field():
    with pytest.raises(ValueError, match="search.fusion must be one of"):
        fuse([], [], 1, fusion="max")
    for weight in (-0.1, 1.5, float("nan")):
        with pytest.raises(ValueError, match="search.fusion_weight"):
            fuse([], [], 1, weight=weight)


def test_the_config_selects_it_with_its_parameters(db):
    sets = {"search.index": "hybrid", "search.rrf_k": 5, "search.hybrid_depth": 3, "search.fusion": "minmax",
            "search.fusion_weight": 0.7}
    cfg = config.preset("tiny", **sets)
    con = store.connect(str(db), read_only=True)
    query = "where is tea grown"
    with make_retriever(con, cfg.search) as tool:
        index = tool.index
        assert index.kind == "hybrid" and (index.rrf_k, index.depth, index.fusion, index.weight) == (5.0, 3, "minmax", 0.7)
        hits = tool.search([query], k=3)[0]
        ranked = [[(h.passage_id, h.score) for h in SearchTool(con, kind).search([query], k=3)[0]]
                  for kind in ("bm25", "dense")]
        assert [(h.passage_id, round(h.score, 5)) for h in hits] == \
            [(p, round(s, 5)) for p, s in fuse(*ranked, 3, "minmax", 0.7)]
    with make_retriever(con, config.preset("tiny", **{**sets, "search.fusion_weight": 1.0}).search) as tool:
        lexical = [h.passage_id for h in SearchTool(con, "bm25").search([query], k=3)[0]]
        assert [h.passage_id for h in tool.search([query], k=3)[0]][:len(lexical)] == lexical
    con.close()
    assert config.INDEXES == INDEX_KINDS and config.FUSIONS == FUSIONS
    default = config.SearchConfig()
    assert (default.rrf_k, default.hybrid_depth, default.fusion, default.fusion_weight) == \
        (RRF_K, HYBRID_DEPTH, FUSION, FUSION_WEIGHT)
    for field, bad in (("search.rrf_k", -1), ("search.hybrid_depth", 0), ("search.index", "fusion"),
                       ("search.fusion", "max"), ("search.fusion_weight", 1.5), ("search.fusion_weight", -0.2)):
        with pytest.raises(ValueError, match=field):
            config.preset("tiny", **{field: bad})
    with pytest.raises(ValueError, match="index must be one of"):
        SearchTool(store.connect(":memory:"), index="fusion")
    with pytest.raises(ValueError, match="search.fusion must be one of"):
        SearchTool(store.connect(":memory:"), index="hybrid", fusion="max")


def test_memory_mapped_hybrid_gives_the_same_hits(db):
    con = store.connect(str(db), read_only=True)
    in_memory = SearchTool(con, "hybrid", cache=False).search(QUERIES, k=4)
    con.close()
    with SearchTool(str(db), "hybrid", cache=False, mmap=True) as mapped:
        assert mapped.passages is not None and mapped.corpus is None
        assert mapped.search(QUERIES, k=4) == in_memory


def test_the_search_command_takes_hybrid(db, capsys):
    from workbench.cli import main

    assert main(["search", "--db", str(db), "--index", "hybrid", "longest river in Africa", "-k", "1"]) == 0
    assert 'Doc 1(Title: "Nile")' in capsys.readouterr().out
