"""search.index=hybrid: BM25 and dense hits fused by reciprocal rank fusion (search/index.py HybridIndex)."""

from __future__ import annotations

import pytest

from workbench import config, store
from workbench.search.index import HYBRID_DEPTH, RRF_K, rrf
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
    hybrid = SearchTool(con, "hybrid", cache=False, rrf_k=10, hybrid_depth=depth)
    for query in QUERIES:
        lexical = [h.passage_id for h in bm25.search([query], k=depth)[0]]  # BM25's zero scores already dropped
        semantic = [h.passage_id for h in dense.search([query], k=depth)[0]]
        expected = rrf([lexical, semantic], k=4, c=10)
        got = hybrid.search([query], k=4)[0]
        assert [(h.passage_id, round(h.score, 6)) for h in got] == [(p, round(s, 6)) for p, s in expected], query
    # no known term: BM25 adds nothing, so the hybrid ranks as dense does
    assert [h.passage_id for h in hybrid.search(["zzqx unknownword"], k=4)[0]] == \
        [h.passage_id for h in dense.search(["zzqx unknownword"], k=4)[0]]
    # a passage both rank first outscores anything only one of them ranks
    top = hybrid.search(["longest river in Africa"], k=1)[0][0]
    assert top.title == "Nile" and top.score == pytest.approx(2 / (10 + 1), rel=1e-6)
    con.close()


def test_the_config_selects_it_with_its_parameters(db):
    cfg = config.preset("tiny", **{"search.index": "hybrid", "search.rrf_k": 5, "search.hybrid_depth": 3})
    con = store.connect(str(db), read_only=True)
    with make_retriever(con, cfg.search) as tool:
        assert tool.index.kind == "hybrid" and (tool.index.rrf_k, tool.index.depth) == (5.0, 3)
        hits = tool.search(["where is tea grown"], k=3)[0]
        ranked = [[h.passage_id for h in SearchTool(con, kind).search(["where is tea grown"], k=3)[0]]
                  for kind in ("bm25", "dense")]
        assert [(h.passage_id, round(h.score, 6)) for h in hits] == [(p, round(s, 6)) for p, s in rrf(ranked, 3, c=5)]
    con.close()
    assert config.INDEXES == INDEX_KINDS
    assert (config.SearchConfig().rrf_k, config.SearchConfig().hybrid_depth) == (RRF_K, HYBRID_DEPTH)
    for field, bad in (("search.rrf_k", -1), ("search.hybrid_depth", 0), ("search.index", "fusion")):
        with pytest.raises(ValueError, match=field):
            config.preset("tiny", **{field: bad})
    with pytest.raises(ValueError, match="index must be one of"):
        SearchTool(store.connect(":memory:"), index="fusion")


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
