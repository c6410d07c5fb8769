"""Search over a persisted index with neither the corpus nor the vectors in the process's private
memory (issue 16's paper tier; ``search.mmap``).

``SearchTool`` by default reads every passage into Python (``load_corpus``), hashes them all to
find its index folder and reads the whole index into RAM: for wiki-18 with E5-base ~64 GB of
float32 vectors plus ~20-30 GB of Python strings, in every process that opens it. Here:

* the dense index is FAISS's own ``index.faiss`` read with ``faiss.IO_FLAG_MMAP_IFC``: the vectors
  are a shared read-only mapping of the file, so the OS page cache holds one copy for every process
  on the machine and FAISS searches it with the same kernel (bitwise the same hits and scores as
  the index read into RAM). BM25's arrays are opened with bm25s's ``mmap=True`` likewise;
* the passages stay in the store: a search fetches only its hits' rows from DuckDB, by passage id;
  row ``i`` of an index is the ``i``-th passage in passage_id order, and that map is
  ``passage_ids.npy`` (int64, memory-mapped too) in ``<root>/corpus-<digest>/``;
* the index folder is still found by the corpus's content hash (``Corpus.content_hash``: a changed
  corpus is never served by a stale index), but the hash is looked up by a cheap fingerprint of the
  store's corpus, computed inside DuckDB on every open (:func:`store_fingerprint`: count, sum and
  xor of DuckDB's 64-bit ``hash`` of every (passage_id, entity_id, title, text) row, and DuckDB's
  version). A fingerprint seen before maps to its content hash through
  ``<root>/fingerprint-<fp>.json``; an unseen one (a changed corpus, or a new DuckDB) has the content
  hash streamed again (constant memory, ``dense_stream.corpus_digest``) in the same snapshot.

Example:
    >>> import tempfile
    >>> from pathlib import Path
    >>> from workbench import store
    >>> root = Path(tempfile.mkdtemp())
    >>> con = store.connect(str(root / "s.duckdb"))
    >>> _ = con.execute("INSERT INTO entities VALUES (1, 'Tea', 'plant', 'entity', 't')")
    >>> _ = con.execute("INSERT INTO passages VALUES (7, 1, 0, 'Tea grows in Assam.'), (9, NULL, 0, 'Coffee.')")
    >>> record = corpus_record(con, root / "s.index")
    >>> record["passages"], np.load(record["passage_ids"]).tolist()
    (2, [7, 9])
    >>> StorePassages(con, record["passage_ids"]).rows([1, 0])
    [(9, None, '', 'Coffee.'), (7, 1, 'Tea', 'Tea grows in Assam.')]
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import numpy as np

from workbench.search.dense_stream import DENSE_CHUNK, _write_json, corpus_digest

# One row's fingerprint hash: the same columns, joined and coalesced as CORPUS_SQL reads them.
_ROW_HASH = "hash(p.passage_id, p.entity_id, coalesce(e.title, ''), coalesce(p.text, ''))"
FINGERPRINT_SQL = (f"SELECT count(*), coalesce(sum({_ROW_HASH}), 0)::VARCHAR, coalesce(bit_xor({_ROW_HASH}), 0) "
                   "FROM passages p LEFT JOIN entities e USING (entity_id)")
_HITS_SQL = ("WITH hit AS (SELECT passage_id, entity_id, text FROM passages WHERE passage_id IN "
             "(SELECT unnest(?::BIGINT[]))) SELECT hit.passage_id, hit.entity_id, coalesce(e.title, ''), "
             "coalesce(hit.text, '') FROM hit LEFT JOIN entities e USING (entity_id)")


def store_fingerprint(con) -> str:
    """A digest of the store's corpus computed inside DuckDB (one scan, no row reaches Python):
    any change to a passage's id, entity, title or text changes it (but for a 64-bit hash
    collision in both the sum and the xor), and so does DuckDB's version (its hash may change).

    Example:
        >>> from workbench import store
        >>> con = store.connect(":memory:")
        >>> _ = con.execute("INSERT INTO passages VALUES (1, NULL, 0, 'a')")
        >>> before = store_fingerprint(con)
        >>> _ = con.execute("UPDATE passages SET text = 'b'")
        >>> before == store_fingerprint(con), len(before)
        (False, 64)
    """
    import duckdb

    count, total, xor = con.execute(FINGERPRINT_SQL).fetchall()[0]
    return hashlib.sha256(f"{duckdb.__version__}|{count}|{total}|{xor}".encode()).hexdigest()


def _corpus_dir(root: Path, digest: str) -> Path:
    return Path(root) / f"corpus-{digest[:16]}"


def _stream_record(con, folder: Path, chunk: int) -> tuple[str, int]:
    """Stream the corpus once: its content hash and passage count, and ``passage_ids.npy`` (index
    row -> passage_id) written into ``folder`` through a renamed temporary file."""
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f".passage_ids.{os.getpid()}.tmp"
    with open(tmp, "wb") as out:
        def write_ids(rows):
            np.asarray([r[0] for r in rows], dtype="<i8").tofile(out)

        digest, n = corpus_digest(con, chunk, each=write_ids)
        out.flush()
        os.fsync(out.fileno())
    raw = np.memmap(tmp, dtype="<i8", mode="r", shape=(n,)) if n else np.zeros(0, "<i8")
    np.save(folder / f".passage_ids.{os.getpid()}.npy", raw)  # .npy: the header carries shape and dtype
    del raw
    tmp.unlink()
    os.replace(folder / f".passage_ids.{os.getpid()}.npy", folder / "passage_ids.npy")
    return digest, n


def corpus_record(con, root: Path, chunk: int = DENSE_CHUNK) -> dict:
    """The store's corpus as the on-disk search sees it: ``{"digest", "passages", "passage_ids"}``
    (``digest`` is ``Corpus.content_hash``, ``passage_ids`` the path of the row -> passage_id map).

    The fingerprint and, when it is new, the streamed hash are read in one DuckDB transaction (one
    snapshot), on a cursor of ``con``, so the record is never of a corpus mixed from two states.
    Raises ValueError when the store holds no passages.
    """
    from workbench.search.index import EMPTY

    root = Path(root)
    cur = con.cursor()
    try:
        cur.begin()
        fingerprint = store_fingerprint(cur)
        known = root / f"fingerprint-{fingerprint[:32]}.json"
        record = json.loads(known.read_text()) if known.exists() else None
        if record and record.get("fingerprint") == fingerprint and \
                (_corpus_dir(root, record["digest"]) / "passage_ids.npy").exists():
            digest, passages = record["digest"], int(record["passages"])
        else:
            staging = root / f".corpus-staging-{os.getpid()}"
            digest, passages = _stream_record(cur, staging, chunk)
            if not passages:
                raise ValueError(EMPTY)
            final = _corpus_dir(root, digest)
            final.mkdir(parents=True, exist_ok=True)
            os.replace(staging / "passage_ids.npy", final / "passage_ids.npy")
            staging.rmdir()
            # a name of this process's own: two processes recording the same corpus never share a temporary
            _write_json(known.with_name(f".{os.getpid()}.{known.name}"),
                        {"fingerprint": fingerprint, "digest": digest, "passages": passages})
            os.replace(known.with_name(f".{os.getpid()}.{known.name}"), known)
        cur.commit()
    finally:
        cur.close()
    return {"digest": digest, "passages": passages,
            "passage_ids": str(_corpus_dir(root, digest) / "passage_ids.npy")}


def read_store(cur, sql: str, params: list, reads: str) -> list[tuple]:
    """``cur.execute(sql, params).fetchall()`` for a search tool reading on its cursor of the caller's
    store; a closed connection (the caller closed the store the tool was given) is a RuntimeError
    that says so, ``reads`` naming what the tool reads there ("search.mmap reads each hit's passage"),
    not DuckDB's "Connection already closed"."""
    import duckdb

    try:
        return cur.execute(sql, params).fetchall()
    except duckdb.ConnectionException as e:  # the caller closed the connection the tool reads through
        raise RuntimeError(f"{reads} from the store, but the store connection the search tool was opened on is "
                           "closed: keep it open while the tool searches") from e


class StorePassages:
    """The passages of index rows, fetched from the store per search (nothing held but the
    memory-mapped row -> passage_id map). Reads on its own cursor of ``con`` (so a server thread
    never shares the caller's connection); raises RuntimeError when a row's passage is gone (the
    store changed since the index was opened)."""

    def __init__(self, con, passage_ids: str | Path):
        self.ids = np.load(passage_ids, mmap_mode="r")
        self.cur = con.cursor()

    def __len__(self) -> int:
        return len(self.ids)

    def rows(self, rows) -> list[tuple]:
        """(passage_id, entity_id, title, text) of each index row, in the order given."""
        wanted = [int(self.ids[int(r)]) for r in rows]
        fetched = read_store(self.cur, _HITS_SQL, [sorted(set(wanted))], "search.mmap reads each hit's passage")
        found = {pid: (pid, ent, title, text) for pid, ent, title, text in fetched}
        missing = [pid for pid in wanted if pid not in found]
        if missing:
            raise RuntimeError(f"passage(s) {missing[:5]} of the index are no longer in the store: the store "
                               "changed after the search tool opened it; open the tool again")
        return [found[pid] for pid in wanted]

    def close(self) -> None:
        self.cur.close()


def open_mmap(con, kind: str = "bm25", model: str | None = None, e5: bool | None = None,
              root: Path | None = None, device: str = "cpu"):
    """(index, passages) of the store's corpus with the index memory-mapped and the passages in the
    store (:class:`StorePassages`); the index is built first (and persisted, as ``open_index``
    does) when the corpus's is missing. None for an in-memory store with no ``root`` (nothing to map).

    Example:
        >>> from workbench import store
        >>> open_mmap(store.connect(":memory:")) is None
        True
    """
    from workbench.search.index import (BM25Index, DenseIndex, Encoder, build_dense, db_file, index_root,
                                        load_corpus, open_index)
    from workbench.search.dense_stream import complete

    if kind not in ("bm25", "dense"):
        raise ValueError(f"index must be 'bm25' or 'dense', got {kind!r}")
    if root is None:
        db = db_file(con)
        if db is None:
            return None
        root = index_root(db)
    root = Path(root)
    record = corpus_record(con, root)
    passages = StorePassages(con, record["passage_ids"])
    if kind == "dense":
        encoder = Encoder(model, e5)
        folder = root / DenseIndex.key(record["digest"], encoder)
        if not complete(folder, record["passages"]):
            build_dense(con, encoder, root, digest=(record["digest"], record["passages"]))
        index = DenseIndex.load(folder, encoder, mmap=True)
        index.device = device
        return index, passages
    folder = root / ("bm25-" + record["digest"][:16])
    if not complete(folder, record["passages"]):  # BM25 is built from the corpus in memory, once
        corpus = load_corpus(con)
        if corpus.content_hash() != record["digest"]:
            raise RuntimeError("the store's passages changed while the search tool opened it: open it again")
        open_index(con, corpus, "bm25", root=root)
        del corpus
    return BM25Index.load(folder, mmap=True), passages
