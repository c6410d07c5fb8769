"""The dense index built in chunks streamed from DuckDB (issue 16): the same hits as the in-memory
build, no more rows in Python per step as the corpus grows, and a build killed with SIGKILL leaves
no index a search would read (the next build resumes it)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from test_search import WORLD, make_store

from workbench import store
from workbench.search import dense_stream
from workbench.search.index import DenseIndex, Encoder, build_dense, index_root, load_corpus
from workbench.search.tool import SearchTool

ROOT = Path(__file__).resolve().parents[1]
FAULT = Path(__file__).parent / "fixtures" / "fault_dense.py"
QUERIES = ["Which river port holds a lantern festival?", "Who studied the stars and was born in Veruna?",
           "film about fishermen", "capital of the desert country", "violinist born in a port city",
           "noodle restaurant chef", "glass making city"]


@pytest.fixture(scope="module")
def encoder():
    return Encoder()


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    path = tmp_path_factory.mktemp("dense") / "world.duckdb"
    make_store(path).close()
    return path


@pytest.fixture(scope="module")
def in_memory(db, encoder):
    """Today's build: every passage loaded and encoded at once, FAISS's IndexFlatIP in memory."""
    con = store.connect(db, read_only=True)
    try:
        corpus = load_corpus(con)
    finally:
        con.close()
    return corpus, DenseIndex.build(corpus, encoder)


@pytest.mark.parametrize("chunk", [1, 3, 64])
def test_streamed_index_gives_the_in_memory_hits(db, encoder, in_memory, tmp_path, chunk):
    corpus, reference = in_memory
    con = store.connect(db, read_only=True)
    try:
        meta = build_dense(con, encoder, tmp_path, chunk=chunk)
    finally:
        con.close()
    assert meta["key"] == DenseIndex.key(corpus, encoder)  # the folder today's readers look for
    assert meta["passages"] == len(corpus) == sum(len(p) for *_, p in WORLD) and meta["dim"] == 384
    streamed = DenseIndex.load(tmp_path / meta["key"], encoder)
    np.testing.assert_allclose(streamed.vectors(), reference.vectors(), atol=1e-5)
    rows, scores = streamed.search(QUERIES, 5)
    want_rows, want_scores = reference.search(QUERIES, 5)
    assert rows.tolist() == want_rows.tolist()
    np.testing.assert_allclose(scores, want_scores, atol=1e-5)
    assert sorted(p.name for p in tmp_path.iterdir()) == [f".{meta['key']}.lock", meta["key"]]  # no partial left


def test_search_tool_reads_the_streamed_folder_and_matches_in_memory(db, in_memory, tmp_path):
    corpus, reference = in_memory
    tool = SearchTool(db, index="dense", topk=4, cache=False)  # builds beside the store through build_dense
    folder = index_root(db) / DenseIndex.key(corpus, tool.index.encoder)
    assert json.loads((folder / "meta.json").read_text())["passages"] == len(corpus)
    hits = tool.search(QUERIES)
    rows, scores = reference.search(QUERIES, 4)
    assert [[h.passage_id for h in row] for row in hits] == [[corpus.passage_ids[r] for r in row] for row in rows]
    np.testing.assert_allclose([[h.score for h in row] for row in hits], scores, atol=1e-5)
    mtime = (folder / "index.faiss").stat().st_mtime_ns
    SearchTool(db, index="dense")  # a second tool loads it, builds nothing
    assert (folder / "index.faiss").stat().st_mtime_ns == mtime


def _store_of(path: Path, passages: int) -> Path:
    con = store.connect(path)
    con.execute("INSERT INTO entities VALUES (1, 'Ada', 'person', 'entity', 'test')")
    con.executemany("INSERT INTO passages VALUES (?, 1, ?, ?)",
                    [[i, i, f"Ada wrote note number {i} about the engine."] for i in range(passages)])
    con.close()
    return path


def test_rows_in_python_per_step_do_not_grow_with_the_corpus(tmp_path, monkeypatch):
    """At a fixed chunk, a 4x larger corpus means 4x more fetches of the same size: the rows DuckDB
    hands to Python per fetch and the texts per encoder call stay at the chunk."""
    fetched, encoded = [], []
    real_chunks = dense_stream.passage_chunks

    def counted(con, chunk):
        for rows in real_chunks(con, chunk):
            fetched.append(len(rows))
            yield rows

    class Counting(Encoder):
        def passages(self, texts):
            encoded.append(len(texts))
            return super().passages(texts)

    monkeypatch.setattr(dense_stream, "passage_chunks", counted)
    encoder, seen = Counting(), {}
    for n in (40, 160):
        fetched.clear(), encoded.clear()
        con = store.connect(_store_of(tmp_path / f"n{n}.duckdb", n), read_only=True)
        try:
            build_dense(con, encoder, tmp_path / f"n{n}.index", chunk=8)
        finally:
            con.close()
        seen[n] = (len(encoded), max(fetched), max(encoded), sum(encoded))
    # two streamed passes (the corpus hash, then the build), 8 rows a fetch whatever the corpus
    assert seen == {40: (5, 8, 8, 40), 160: (20, 8, 8, 160)}


def _killed(point: str, db: Path, chunk: int) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    return subprocess.run([sys.executable, str(FAULT), point, str(db), str(chunk)], env=env, capture_output=True,
                          text=True, timeout=300)


@pytest.mark.parametrize("point, rows_kept", [  # one kill point in make test, the others in make test-slow
    pytest.param("after_append", 3, marks=pytest.mark.slow), ("after_progress", 6),
    pytest.param("before_rename", None, marks=pytest.mark.slow)])
def test_a_killed_build_leaves_no_index_to_read_and_the_next_build_resumes(tmp_path, in_memory, point, rows_kept):
    corpus, reference = in_memory
    db = tmp_path / "world.duckdb"
    make_store(db).close()
    killed = _killed(point, db, 3)
    assert killed.returncode == -9, killed.stderr[-2000:]
    root = index_root(db)
    assert not [p for p in root.iterdir() if p.name.startswith("dense-")]  # nothing under the name readers load
    (partial,) = [p for p in root.iterdir() if p.name.endswith(".partial")]
    if rows_kept is not None:
        assert json.loads((partial / "progress.json").read_text())["rows"] == rows_kept
    rerun = _killed("none", db, 3)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    meta = json.loads(rerun.stdout)
    assert meta["key"] == DenseIndex.key(corpus, Encoder()) and meta["passages"] == len(corpus)
    if rows_kept:
        assert f"resumed after {rows_kept}" in rerun.stderr
    assert not partial.exists()
    rebuilt = DenseIndex.load(root / meta["key"], reference.encoder)
    np.testing.assert_allclose(rebuilt.vectors(), reference.vectors(), atol=1e-5)
    assert rebuilt.search(QUERIES, 5)[0].tolist() == reference.search(QUERIES, 5)[0].tolist()


def test_flat_layout_is_checked_and_bad_chunks_refused(tmp_path):
    dense_stream.check_flat_layout(5)  # this FAISS writes what the streaming writer writes
    with pytest.raises(ValueError, match="chunk must be at least 1"):
        next(dense_stream.passage_chunks(store.connect(":memory:"), 0))
    out = dense_stream.FlatIPFile(tmp_path / "index.faiss", 4)
    with pytest.raises(ValueError, match=r"shape \(n, 4\)"):
        out.append(np.zeros((2, 3), np.float32))
