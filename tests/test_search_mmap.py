"""search.mmap: the index memory-mapped and the passages read from the store give the same hits as
the corpus and index in memory; a changed corpus is never served by a stale index (search/on_disk.py)."""

from __future__ import annotations

import numpy as np
import pytest

from workbench import store
from workbench.search.index import load_corpus
from workbench.search.on_disk import StorePassages, corpus_record, open_mmap, store_fingerprint
from workbench.search.tool import SearchTool

from test_search import make_store

QUERIES = ["Where was Tamsin Ore born?", "capital of Saffa", "Which musician plays the violin?",
           "film about fishermen", "zzzz qqq", "Veruna glassworks"]


@pytest.fixture(scope="module")
def con(tmp_path_factory):
    path = tmp_path_factory.mktemp("mmap") / "world.duckdb"
    make_store(path).close()
    con = store.connect(path, read_only=True)  # the in-memory and the mapped tool share it
    yield con
    con.close()


def mapped_files(suffix: str) -> list[str]:
    """The permissions of this process's mappings of files ending in ``suffix``."""
    return [line.split()[1] for line in open("/proc/self/maps") if line.rstrip().endswith(suffix)]


@pytest.mark.parametrize("kind", ["bm25", "dense"])
def test_mapped_search_equals_in_memory_search(con, kind):
    memory = SearchTool(con, index=kind, topk=5, cache=False)
    mapped = SearchTool(con, index=kind, topk=5, cache=False, mmap=True)
    assert mapped.corpus is None and memory.corpus is not None and mapped.n_passages == memory.n_passages == 15
    assert mapped.search(QUERIES) == memory.search(QUERIES)  # ids, entity ids, titles, texts, scores
    rows, scores = mapped.index.search(QUERIES, 15)  # the whole ranking, not only the top 5
    want_rows, want_scores = memory.index.search(QUERIES, 15)
    np.testing.assert_allclose(scores, want_scores, rtol=0, atol=1e-5)
    assert np.array_equal(rows[scores > 0], want_rows[want_scores > 0]) if kind == "bm25" else \
        np.array_equal(rows, want_rows)


def test_the_dense_vectors_are_a_shared_mapping_of_the_file(con):
    before = len(mapped_files("index.faiss"))
    mapped = SearchTool(con, index="dense", topk=3, mmap=True)
    perms = mapped_files("index.faiss")
    assert len(perms) == before + 1 and perms[-1].startswith("r") and perms[-1].endswith("s")  # r--s: shared
    SearchTool(con, index="dense", topk=3)  # read into memory: no mapping
    assert len(mapped_files("index.faiss")) == before + 1
    # the GPU path's upload reads the mapped view, chunk by chunk: the same top-k as FAISS
    import torch

    from workbench.search.index import exact_topk, to_device

    index = mapped.index
    want_rows, want_scores = index.search(QUERIES, 4)
    rows, scores = exact_topk(to_device(index.vectors(copy=False), "cpu", chunk=4).float(),
                              torch.from_numpy(index.encoder.queries(QUERIES)), 4)
    assert rows.tolist() == want_rows.tolist()
    np.testing.assert_allclose(scores, want_scores, atol=2e-3)  # float16 vectors


def test_passages_read_from_the_store_equal_the_corpus(con, tmp_path):
    corpus = load_corpus(con)
    record = corpus_record(con, tmp_path)
    assert record["digest"] == corpus.content_hash() and record["passages"] == len(corpus)
    passages = StorePassages(con, record["passage_ids"])
    order = list(np.random.default_rng(0).permutation(len(corpus))) + [3, 3]  # any order, repeats too
    want = [(corpus.passage_ids[r], corpus.entity_ids[r], corpus.titles[r], corpus.texts[r]) for r in order]
    assert passages.rows(order) == want and passages.rows([]) == []


def test_the_fingerprint_sees_every_field_of_the_corpus():
    db = make_store(":memory:")
    seen = {store_fingerprint(db)}
    for change in ["UPDATE passages SET text = text || '.' WHERE passage_id = 100",
                   "UPDATE entities SET title = 'Dagijou' WHERE entity_id = 1",
                   "UPDATE passages SET entity_id = NULL WHERE passage_id = 101",
                   "UPDATE passages SET entity_id = 0 WHERE passage_id = 101",
                   "UPDATE passages SET passage_id = 99 WHERE passage_id = 114",
                   "DELETE FROM passages WHERE passage_id = 113",
                   "INSERT INTO passages VALUES (500, 2, 1, 'Kolomo exports tin.')"]:
        db.execute(change)
        seen.add(store_fingerprint(db))
    assert len(seen) == 8
    db.execute("UPDATE passages SET paragraph = 7 WHERE passage_id = 100")  # not part of the corpus
    assert store_fingerprint(db) in seen


def test_a_changed_corpus_gets_its_own_index_never_the_stale_one(tmp_path):
    path = tmp_path / "w.duckdb"
    make_store(path).close()
    root = tmp_path / "w.index"
    before = SearchTool(path, index="bm25", mmap=True)
    old = before.search(["Veruna glassworks"])[0][0]
    assert old.text.endswith("glassworks.")
    before.close()  # the store given by path stays open (read-only) until the tool is closed
    con = store.connect(path)
    con.execute("UPDATE passages SET text = 'Veruna is famous for its clocks and glassworks.' WHERE entity_id = 3")
    con.close()
    after = SearchTool(path, index="bm25", mmap=True)
    hit = after.search(["Veruna glassworks"])[0][0]
    assert hit.text == "Veruna is famous for its clocks and glassworks."
    names = sorted(p.name.split("-")[0] for p in root.iterdir())
    assert names == ["bm25", "bm25", "corpus", "corpus", "fingerprint", "fingerprint"]
    # and the default (in-memory) tool, keyed by the content hash, agrees on the folder it uses
    after.close()
    assert SearchTool(path, index="bm25").search(["Veruna glassworks"])[0][0] == hit


def test_a_passage_gone_after_opening_is_an_error_not_a_wrong_hit(tmp_path):
    con = make_store(tmp_path / "w.duckdb")
    tool = SearchTool(con, index="bm25", mmap=True)
    con.execute("DELETE FROM passages WHERE entity_id = 8")
    with pytest.raises(RuntimeError, match="store changed after the search tool opened it"):
        tool.search(["Mirrel harbour"])
    con.close()


def test_in_memory_store_has_nothing_to_map(tmp_path):
    con = make_store(":memory:")
    assert open_mmap(con) is None
    tool = SearchTool(con, index="bm25", mmap=True)  # loads as without search.mmap
    assert tool.corpus is not None and tool.search(["Mirrel harbour"])[0][0].title == "Mirrel"
    with pytest.raises(ValueError, match="'bm25' or 'dense'"):
        open_mmap(con, "tfidf", root=tmp_path)


def test_the_setting_is_off_for_the_tiny_tier_and_on_for_the_paper_presets(tmp_path):
    from workbench.config import PAPER_MODELS, preset
    from workbench.search.retriever import make_retriever

    assert not preset("smoke").search.mmap and not preset("tiny").search.mmap
    assert all(preset(name).search.mmap for name in PAPER_MODELS)
    path = tmp_path / "w.duckdb"
    con = make_store(path)
    tool = make_retriever(con, preset("tiny", **{"search.mmap": True}).search)
    assert tool.corpus is None and tool.passages is not None
    assert make_retriever(con, preset("tiny").search).corpus is not None
    con.close()


def test_a_tool_by_path_holds_the_store_until_closed_and_says_why_it_cannot_search_without_it(tmp_path):
    path = tmp_path / "w.duckdb"
    make_store(path).close()
    with SearchTool(path, index="bm25", mmap=True) as tool:
        assert tool.search(["Mirrel harbour"])[0][0].title == "Mirrel"
    writer = store.connect(path)  # read-write again once the tool is closed
    with pytest.raises(RuntimeError, match="holds it open read-write: pass that open connection"):
        SearchTool(path, index="bm25", mmap=True)
    tool = SearchTool(writer, index="bm25", mmap=True)
    writer.close()
    with pytest.raises(RuntimeError, match="the store connection the search tool was opened on is closed"):
        tool.search(["Mirrel harbour"])


def test_the_bench_refuses_random_vectors_in_the_stores_own_index_folder(tmp_path):
    import subprocess
    import sys

    path = tmp_path / "w.duckdb"
    make_store(path).close()
    done = subprocess.run([sys.executable, "-m", "workbench.bench.mmap", str(path), "--index", "dense",
                           "--index-dir", str(tmp_path / "w.index"), "--synthetic-vectors"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "the store's own index folder" in done.stderr
    assert not (tmp_path / "w.index").exists()
