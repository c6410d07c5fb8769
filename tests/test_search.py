"""The search tool: real bm25s and FAISS/MiniLM indexes over a small hand-filled store."""

from __future__ import annotations

import os

import numpy as np
import pytest

from workbench import cli, store
from workbench.search.encoder import Encoder, is_e5
from workbench.search.index import load_corpus
from workbench.search.tool import Hit, SearchTool, render

# (entity_id, title, type, [paragraphs]): invented names, so no encoder has memorised them.
WORLD = [
    (1, "Dagiju", "city", ["Dagiju is a river port in the country of Kolomo.",
                           "Dagiju hosts a yearly lantern festival in autumn."]),
    (2, "Kolomo", "country", ["Kolomo is a mountainous country whose capital is Veruna."]),
    (3, "Veruna", "city", ["Veruna is the capital city of Kolomo, known for glassworks."]),
    (4, "Tamsin Ore", "person", ["Tamsin Ore was born in Dagiju and became a famous violinist.",
                                 "Tamsin Ore recorded three albums of folk music."]),
    (5, "Bexley Hune", "person", ["Bexley Hune was born in Veruna and studied astronomy."]),
    (6, "Pollar Institute", "organization", ["The Pollar Institute is a research university in Veruna.",
                                             "Bexley Hune was educated at the Pollar Institute."]),
    (7, "Saffa", "country", ["Saffa is a desert country on the southern coast; its capital is Mirrel."]),
    (8, "Mirrel", "city", ["Mirrel is the capital of Saffa and its largest harbour."]),
    (9, "Quon Adel", "person", ["Quon Adel was born in Mirrel and directed the film Grey Tide."]),
    (10, "Grey Tide", "film", ["Grey Tide is a drama film directed by Quon Adel about fishermen."]),
    (11, "Ulmo Fesk", "person", ["Ulmo Fesk is a chef who opened a noodle restaurant in Dagiju."]),
    (12, "Orrin Vale", "person", ["Orrin Vale painted landscapes of the Saffa desert."]),
]


def make_store(path) -> "duckdb.DuckDBPyConnection":  # noqa: F821
    """A store with WORLD's entities and passages (passage ids 100, 101, ... in order)."""
    con = store.connect(path)
    pid = 100
    for eid, title, type_, paragraphs in WORLD:
        con.execute("INSERT INTO entities VALUES (?, ?, ?, 'entity', 'test')", [eid, title, type_])
        for i, text in enumerate(paragraphs):
            con.execute("INSERT INTO passages VALUES (?, ?, ?, ?)", [pid, eid, i, text])
            pid += 1
    return con


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    path = tmp_path_factory.mktemp("store") / "world.duckdb"
    make_store(path).close()
    return path


@pytest.fixture(scope="module")
def dense(db):
    return SearchTool(db, index="dense", topk=3)


def ids(rows):
    return [[h.passage_id for h in row] for row in rows]


def test_corpus_joins_titles_in_passage_order(db):
    con = store.connect(db)
    corpus = load_corpus(con)
    con.close()
    assert corpus.passage_ids == sorted(corpus.passage_ids) and len(corpus) == 15
    assert corpus.contents[0] == '"Dagiju"\nDagiju is a river port in the country of Kolomo.'
    assert corpus.entity_ids[:3] == [1, 1, 2]


def test_empty_store_is_a_clear_error(tmp_path):
    store.connect(tmp_path / "empty.duckdb").close()
    with pytest.raises(ValueError, match="passages table is empty"):
        SearchTool(tmp_path / "empty.duckdb")
    with pytest.raises(FileNotFoundError):
        SearchTool(tmp_path / "missing.duckdb")
    with pytest.raises(ValueError, match="index must be one of \['bm25', 'dense', 'hybrid'\]"):
        SearchTool(make_store(":memory:"), index="tfidf")


def test_bm25_finds_the_fact_and_returns_full_hits(db):
    tool = SearchTool(db, index="bm25", topk=3)
    (row,) = tool.search(["Where was Tamsin Ore born?"])
    assert row[0] == Hit(104, 4, "Tamsin Ore", "Tamsin Ore was born in Dagiju and became a famous violinist.",
                         row[0].score)
    assert row[0].score > row[1].score > 0 and len(row) == 3


def test_bm25_drops_zero_score_passages_and_clamps_k(db):
    tool = SearchTool(db, index="bm25", topk=3)
    assert tool.search(["zzzq xxyy", "", "the of"]) == [[], [], []]
    (row,) = tool.search(["capital"], k=50)  # k above the corpus size
    assert 0 < len(row) <= 15 and all(h.score > 0 for h in row)


def test_bad_queries_and_k(db):
    tool = SearchTool(db, topk=3)
    with pytest.raises(ValueError, match="list of strings"):
        tool.search("Dagiju")
    with pytest.raises(ValueError, match="list of strings"):
        tool.search(["ok", None])
    with pytest.raises(ValueError, match="k must be at least 1"):
        tool.search(["Dagiju"], k=0)
    with pytest.raises(ValueError, match="topk"):
        SearchTool(db, topk=0)


def test_batched_equals_one_at_a_time_and_is_deterministic(db, dense):
    queries = ["Who directed Grey Tide?", "capital of Saffa", "violinist from a river port",
               "noodle restaurant chef", "astronomy student born in Veruna"]
    for tool in (SearchTool(db, index="bm25", cache=False), dense):
        tool.use_cache = False
        batched = tool.search(queries)
        single = [tool.search([q])[0] for q in queries]
        assert ids(batched) == ids(single)
        for b, s in zip(batched, single):
            assert [h.score for h in b] == pytest.approx([h.score for h in s], abs=1e-5)
        assert tool.search(queries) == batched
        tool.use_cache = True


def test_dense_finds_paraphrases_bm25_cannot(dense, db):
    (row,) = dense.search(["Which musician plays the violin?"])
    assert row[0].passage_id == 104 and len(row) == 3
    assert -1.0 <= row[-1].score <= row[0].score <= 1.0 + 1e-6
    bm25 = SearchTool(db, index="bm25")
    assert bm25.search(["musician plays violin"])[0] == []  # no shared term ("violinist" != "violin")


def test_indexes_persist_beside_the_store_keyed_by_content(tmp_path):
    path = tmp_path / "w.duckdb"
    make_store(path).close()
    SearchTool(path, index="bm25")
    root = tmp_path / "w.index"
    (folder,) = list(root.iterdir())
    assert folder.name.startswith("bm25-") and (folder / "meta.json").exists()
    stamp = os.stat(folder / "meta.json").st_mtime_ns
    tool = SearchTool(path, index="bm25")  # same passages: loaded, not rebuilt
    assert os.stat(folder / "meta.json").st_mtime_ns == stamp and [p.name for p in root.iterdir()] == [folder.name]
    before = tool.search(["Veruna glassworks"])
    con = store.connect(path)
    con.execute("UPDATE passages SET text = 'Veruna is famous for its clocks.' WHERE entity_id = 3")
    con.close()
    after = SearchTool(path, index="bm25")
    assert len(list(root.iterdir())) == 2  # the changed corpus got its own index
    assert after.search(["Veruna glassworks"])[0][0].text != before[0][0].text


def test_dense_index_persists_and_reloads_identically(db, dense):
    folders = [p.name for p in db.with_suffix(".index").iterdir() if p.name.startswith("dense-")]
    assert len(folders) == 1 and (db.with_suffix(".index") / folders[0] / "index.faiss").exists()
    again = SearchTool(db, index="dense")
    q = ["film about fishermen", "Which country has a desert?"]
    assert again.search(q) == dense.search(q)


def test_in_memory_store_builds_without_files(tmp_path):
    tool = SearchTool(make_store(":memory:"), index="bm25")
    assert tool.search(["Mirrel harbour"])[0][0].title == "Mirrel"


def test_e5_detection_and_prefixes(dense):
    assert is_e5("intfloat/e5-base-v2") and is_e5("/m/E5-small") and not is_e5("gte-base") and not is_e5("e55")
    enc = dense.index.encoder
    assert enc.e5 is False
    forced = Encoder(enc.path, e5=True)
    assert forced.e5 and forced.fingerprint() != enc.fingerprint()
    q, p = forced.queries(["Dagiju"]), forced.passages(["Dagiju"])
    assert float(q[0] @ p[0]) < 0.9999  # the two prefixes make different inputs
    assert float(enc.queries(["Dagiju"])[0] @ enc.passages(["Dagiju"])[0]) == pytest.approx(1.0, abs=1e-5)


def test_encoder_runs_in_float32_on_the_cpu_and_half_gives_the_same_directions(dense):
    """half=None keeps float32 off CUDA (the tiny tier's numbers); half=True is the CUDA default
    (Search-R1 runs E5 in float16): float32 embeddings out, near the float32 model's."""
    import torch

    enc = dense.index.encoder
    assert next(enc.model.parameters()).dtype == torch.float32
    texts = ["Dagiju is a river of the north", "Saffa is the capital", "a film about fishermen"]
    half = Encoder(enc.path, half=True)
    assert next(half.model.parameters()).dtype == torch.float16
    full, low = enc.passages(texts), half.passages(texts)
    assert low.dtype == np.float32 and np.allclose(np.linalg.norm(low, axis=1), 1, atol=1e-3)
    assert (full * low).sum(axis=1).min() > 0.999  # the same direction, to float16's precision


def test_encoder_gives_sentence_transformers_own_embeddings(dense, monkeypatch):
    """The encoder tokenises in one Rust batch call and pads with numpy (not transformers' slow
    tensor conversion): the vectors are the ones ``SentenceTransformer.encode`` returns, whatever the
    batching, for texts longer than the model's 256 tokens too, and for no text at all."""
    enc = dense.index.encoder
    assert enc.tokens is not None  # the fast path is the one under test
    texts = ["Dagiju", "Saffa is a desert country on the southern coast; its capital is Mirrel.",
             " ".join(["Veruna glassworks and the Pollar Institute"] * 80), "", "Grey Tide, a film"] * 3
    small = Encoder(enc.path, batch_size=4)  # batches that mix lengths differently from encode's
    monkeypatch.setattr("workbench.search.encoder.EMBED_SLICE", 7)  # and slices of a call (15 texts: 7, 7, 1)
    for e in (enc, small):
        ours = e.passages(texts)
        theirs = e.model.encode(texts, normalize_embeddings=True, convert_to_numpy=True)
        assert ours.dtype == np.float32 and np.abs(ours - theirs).max() < 1e-5
    assert enc.passages([]).shape == (0, enc.model.get_embedding_dimension())


@pytest.mark.parametrize("side", ["right", "left"])
def test_text_tokenizer_pads_as_the_hf_tokenizer_pads(dense, side):
    from workbench.search.encoder import TextTokenizer

    hf = dense.index.encoder.model.tokenizer
    hf.padding_side = side
    try:
        tokens = TextTokenizer(hf, max_length=12)
        texts = ["Dagiju", "Tamsin Ore was born in Dagiju and became a famous violinist.", "a b"]
        expected = hf(texts, padding=True, truncation=True, max_length=12, return_tensors="np")
        got = tokens.pad(tokens.encode_batch(texts))
    finally:
        hf.padding_side = "right"
    assert set(got) == set(hf.model_input_names)
    assert all(np.array_equal(got[k], expected[k]) for k in got) and got["input_ids"].shape == (3, 12)


def test_encoder_falls_back_to_encode_for_a_model_with_a_default_prompt(dense, tmp_path):
    from sentence_transformers import SentenceTransformer

    from workbench.search.encoder import text_tokenizer

    enc = dense.index.encoder
    prompted = SentenceTransformer(enc.path, device="cpu", prompts={"doc": "doc: "}, default_prompt_name="doc")
    assert text_tokenizer(prompted) is None  # encode would add the prompt; the fast path would not
    prompted.save(str(tmp_path / "prompted"))
    again = Encoder(str(tmp_path / "prompted"))
    assert again.tokens is None
    assert np.allclose(again.passages(["Dagiju"]), prompted.encode(["Dagiju"], normalize_embeddings=True), atol=1e-6)


def test_cache_counts_hits_and_returns_identical_results(db):
    tool = SearchTool(db, index="bm25")
    first = tool.search(["Grey Tide director", "Saffa capital"])
    assert tool.cache_stats() == {"hits": 0, "misses": 2, "hit_rate": 0.0}
    again = tool.search(["  Grey   Tide director ", "Saffa capital", "Saffa capital", "Mirrel"])
    assert again[:2] == first and again[2] == first[1]
    assert tool.cache_stats() == {"hits": 3, "misses": 3, "hit_rate": 0.5}
    tool.search(["Saffa capital"], k=1)  # another k is another key
    assert tool.cache_stats()["misses"] == 4
    again[0].clear()  # callers may mutate their lists without touching the cache
    assert tool.search(["Grey Tide director"]) == first[:1]
    tool.reset_cache_stats()
    assert tool.cache_stats() == {"hits": 0, "misses": 0, "hit_rate": 0.0}
    tool.clear_cache()  # a cleared cache searches again, with the same results
    assert tool.search(["Grey Tide director"]) == first[:1] and tool.cache_stats()["misses"] == 1


def test_render_is_search_r1_format(db):
    hits = SearchTool(db, topk=2).search(["Quon Adel born"])[0]
    assert render(hits) == (
        'Doc 1(Title: "Quon Adel") Quon Adel was born in Mirrel and directed the film Grey Tide.\n'
        'Doc 2(Title: "Grey Tide") Grey Tide is a drama film directed by Quon Adel about fishermen.\n')
    assert render([Hit(1, None, "T", "line one\nline two", 0.0)]) == 'Doc 1(Title: "T") line one\nline two\n'


def test_cli_search_prints_rendered_hits(db, capsys):
    assert cli.main(["search", "--db", str(db), "Who directed Grey Tide?", "-k", "1"]) == 0
    assert capsys.readouterr().out.startswith('Doc 1(Title: "Grey Tide") Grey Tide is a drama film')
    assert cli.main(["search", "--db", str(db), "Dagiju", "-k", "0"]) == 2
    assert "-k must be at least 1" in capsys.readouterr().err


def test_cli_search_mmap_prints_the_same_hits_and_releases_the_store(db, capsys):
    assert cli.main(["search", "--db", str(db), "Who directed Grey Tide?", "-k", "2"]) == 0
    plain = capsys.readouterr().out
    assert cli.main(["search", "--db", str(db), "Who directed Grey Tide?", "-k", "2", "--mmap"]) == 0
    assert capsys.readouterr().out == plain
    store.connect(db).close()  # read-write again in this process: the mapped tool closed its connection


def test_cli_search_opens_the_store_read_only(db, tmp_path, capsys):
    """Regression: `workbench search` opened the store for writing (issue 12). A read-only
    connection held here makes any read-write open of the same file in this process fail."""
    import duckdb

    reader = duckdb.connect(str(db), read_only=True)
    try:
        assert cli.main(["search", "--db", str(db), "Who directed Grey Tide?", "-k", "1"]) == 0
    finally:
        reader.close()
    assert "Grey Tide" in capsys.readouterr().out
    missing = tmp_path / "none.duckdb"
    assert cli.main(["search", "--db", str(missing), "x"]) == 2
    assert "no store at" in capsys.readouterr().err and not missing.exists()


def test_bench_recall_and_speed_on_bm25(db, tmp_path):
    from workbench.search import bench

    tool = SearchTool(db, index="bm25")
    questions = [("Where was Tamsin Ore born?", ["Dagiju"], [4, 1]),       # evidence: passage 104
                 ("Who directed Grey Tide?", ["Quon Adel"], [10, 9]),      # evidence: passage 112
                 ("What is the capital of Saffa?", ["Mirrel"], [7, 8]),
                 ("Which film did Orrin Vale make?", ["Nothing"], [12, 99])]  # no gold passage
    assert bench.gold_passages(tool.corpus, ["Dagiju"], [4, 1]) == ({100, 101, 104}, {104})
    r = bench.recall(tool, questions, k=3)
    assert r == {"questions": 3, "no_gold_passage": 1, "recall_at_3": 1.0, "evidence_recall_at_3": 1.0}
    s = bench.speed(tool, [q for q, _, _ in questions], batch=16)
    assert s["batch"] == 16 and s["batched_qps"] > 0 and s["single_qps"] > 0
    assert tool.use_cache and tool.cache_stats()["hits"] == 0  # speed runs without the cache
    encoder = Encoder()
    enc = bench.encode_speed(encoder, tool.corpus.contents)
    assert enc["passages"] == 15 and enc["encode_per_s"] > 0 and enc["workbench_per_s"] > 0
    assert enc["max_abs_diff"] < 1e-5 and encoder.tokens is not None  # the fast path is back after the timing
    make_store(tmp_path / "noq.duckdb").close()
    with pytest.raises(ValueError, match="no 'tinyworld' single_hop questions"):
        bench.bench_retrieval(db=str(tmp_path / "noq.duckdb"), preset="smoke")


@pytest.mark.parametrize("chunk", [1, 7, 64, 1 << 21])
def test_exact_topk_equals_faiss_flat_ip_whatever_the_chunk(chunk):
    """search.device=cuda's exact top-k (index.exact_topk) against FAISS's own scan, on the CPU."""
    import faiss
    import torch

    from workbench.search.index import exact_topk

    rng = np.random.default_rng(0)
    vectors = rng.standard_normal((50, 16)).astype(np.float32)
    queries = rng.standard_normal((9, 16)).astype(np.float32)
    flat = faiss.IndexFlatIP(16)
    flat.add(vectors)
    want_scores, want_rows = flat.search(queries, 5)
    rows, scores = exact_topk(torch.from_numpy(vectors), torch.from_numpy(queries), 5, chunk=chunk)
    assert rows.tolist() == want_rows.tolist()
    np.testing.assert_allclose(scores, want_scores, rtol=1e-5, atol=1e-5)
    rows, _ = exact_topk(torch.from_numpy(vectors), torch.from_numpy(queries), 500, chunk=chunk)
    assert rows.shape == (9, 50)  # k is clamped to the rows there are


def test_dense_index_gives_its_vectors_to_the_gpu_path(dense):
    """The vectors the GPU path copies are the ones FAISS searches: the same top-k on the CPU."""
    import torch

    from workbench.search.index import exact_topk

    index = dense.index
    q = ["Which musician plays the violin?", "tea"]
    want_rows, want_scores = index.search(q, 3)
    rows, scores = exact_topk(torch.from_numpy(index.vectors()), torch.from_numpy(index.encoder.queries(q)), 3)
    assert rows.tolist() == want_rows.tolist()
    np.testing.assert_allclose(scores, want_scores, rtol=1e-5, atol=1e-6)


def test_search_device_is_checked():
    from workbench.config import preset

    assert preset("smoke", **{"search.device": "cuda:1"}).search.device == "cuda:1"
    with pytest.raises(ValueError, match="search.device"):
        preset("smoke", **{"search.device": "gpu"})


def test_search_device_auto_is_the_gpu_where_torch_sees_one(monkeypatch):
    import torch

    from workbench.search.retriever import search_device

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert search_device("auto") == "cpu"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert search_device("auto") == "cuda" and search_device("cpu") == "cpu"
