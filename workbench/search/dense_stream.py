"""The dense index built in constant memory: passages streamed from DuckDB, encoded chunk by chunk,
appended to the FAISS file on disk (issue 16: wiki-18's 21M passages do not fit in memory at once).

``search.index.open_index`` used to read every passage into Python, encode them all and hand the
whole (passages, dim) matrix to ``faiss.IndexFlatIP``: for wiki-18 with E5-base that is ~15 GB of
text plus 64 GB of float32 vectors, twice (the encoder's output and FAISS's copy). Here:

* :func:`passage_chunks` streams the corpus (the same query and order as ``load_corpus``) through
  DuckDB's Arrow reader, at most ``chunk`` rows at a time; DuckDB sorts by passage_id under its own
  memory limit (spilling to disk), so Python never holds more than one chunk;
* :class:`FlatIPFile` appends each chunk's vectors to ``index.faiss`` in FAISS's own
  ``IndexFlatIP`` layout (header, then the float32 rows), checked against ``faiss.serialize_index``
  of a small index before anything is written, so ``faiss.read_index`` (every existing reader)
  loads it as if FAISS had written it. We keep the exact flat index rather than FAISS's on-disk IVF
  lists: IVF is approximate (its hits would differ from the in-memory build's) and needs a
  training pass over a sample first; the flat file is exact and needs one pass;
* :func:`build_flat_index` writes into a hidden ``.KEY.partial`` folder next to the final one,
  records after each chunk how many rows are safely on disk (``progress.json``, fsynced after the
  vectors), and renames the folder to ``KEY`` only once ``meta.json`` is written: a build killed at
  any point leaves no ``KEY`` folder a search would read, and the next build resumes after the last
  recorded chunk. A lock file (``.KEY.lock``) keeps two builders of one index apart.

Example:
    >>> import duckdb, hashlib
    >>> from workbench import store
    >>> con = store.connect(":memory:")
    >>> _ = con.execute("INSERT INTO passages VALUES (2, NULL, 0, 'b'), (1, NULL, 0, 'a'), (3, NULL, 0, 'c')")
    >>> [[r[0] for r in rows] for rows in passage_chunks(con, chunk=2)]
    [[1, 2], [3]]
    >>> corpus_digest(con, chunk=2)[1]
    3
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import struct
import time
from pathlib import Path
from typing import Callable, Iterator

import numpy as np

# The corpus in index order (row i of an index is the i-th row here); ``load_corpus`` reads it too.
CORPUS_SQL = ("SELECT p.passage_id, p.entity_id, coalesce(e.title, ''), coalesce(p.text, '') "
              "FROM passages p LEFT JOIN entities e USING (entity_id) ORDER BY p.passage_id")
DENSE_CHUNK = 8192  # ours: passages encoded and written per step (~25 MB of E5-base vectors)
LOG_EVERY_S = 10.0  # ours: at most one progress line per this many seconds (and the last chunk)


def hash_row(h, row) -> None:
    """Feed one (passage_id, entity_id, title, text) row to the corpus hash ``h`` (``Corpus.content_hash``)."""
    h.update(json.dumps(row, ensure_ascii=False).encode())
    h.update(b"\n")


def passage_chunks(con, chunk: int = DENSE_CHUNK) -> Iterator[list[tuple]]:
    """The store's (passage_id, entity_id, title, text) rows in passage_id order, ``chunk`` rows
    per list (the last fewer), streamed from DuckDB: each list is one Arrow batch of DuckDB's
    reader, the only rows in Python at a time (the whole corpus never is)."""
    if int(chunk) < 1:
        raise ValueError(f"chunk must be at least 1 passage, got {chunk!r}")
    for batch in con.sql(CORPUS_SQL).to_arrow_reader(int(chunk)):
        yield list(zip(*(batch.column(i).to_pylist() for i in range(4))))


def corpus_digest(con, chunk: int = DENSE_CHUNK, each=None) -> tuple[str, int]:
    """(``Corpus.content_hash``, number of passages) of the store's corpus, streamed; ``each(rows)``
    sees every chunk of rows on the way (``search.on_disk`` writes their passage ids)."""
    h, n = hashlib.sha256(), 0
    for rows in passage_chunks(con, chunk):
        for row in rows:
            hash_row(h, row)
        if each is not None:
            each(rows)
        n += len(rows)
    return h.hexdigest(), n


def _flat_header(dim: int, ntotal: int) -> bytes:
    """FAISS's serialisation of an ``IndexFlatIP`` up to its vectors: the header of an empty index
    with ``ntotal`` patched in, then the vector count as FAISS writes it (floats, size_t)."""
    import faiss

    empty = bytes(faiss.serialize_index(faiss.IndexFlatIP(dim)))
    return empty[:8] + struct.pack("<q", ntotal) + empty[16:-8] + struct.pack("<Q", ntotal * dim)


def check_flat_layout(dim: int) -> None:
    """Raise RuntimeError unless :func:`_flat_header` plus the raw rows is byte-for-byte what this
    FAISS writes for an ``IndexFlatIP`` (so a FAISS with another layout fails before any encoding)."""
    import faiss

    rows = np.random.default_rng(0).standard_normal((3, dim)).astype(np.float32)
    index = faiss.IndexFlatIP(dim)
    index.add(rows)
    if bytes(faiss.serialize_index(index)) != _flat_header(dim, 3) + rows.tobytes():
        raise RuntimeError(f"FAISS {faiss.__version__} does not write IndexFlatIP as this streaming writer "
                           "expects (header, count, float32 rows): the dense index cannot be streamed to disk")


class FlatIPFile:
    """``index.faiss`` of an ``IndexFlatIP`` written row chunk by row chunk.

    ``rows`` rows already on disk (a resumed build) are kept; anything after them (a chunk whose
    progress was never recorded) is cut off. ``close()`` writes the final count into the header.
    """

    def __init__(self, path: Path, dim: int, rows: int = 0):
        check_flat_layout(dim)
        self.path, self.dim, self.rows = Path(path), int(dim), int(rows)
        self.head = len(_flat_header(dim, 0))
        if rows and self.path.exists() and self.path.stat().st_size >= self.head + rows * dim * 4:
            self.file = open(self.path, "r+b")
            self.file.truncate(self.head + rows * dim * 4)
        else:
            self.rows = 0
            self.file = open(self.path, "w+b")
            self.file.write(_flat_header(dim, 0))
        self.file.seek(0, os.SEEK_END)

    def append(self, vectors: np.ndarray) -> None:
        """Add (n, dim) vectors after the rows written so far, durably (fsynced)."""
        vectors = np.ascontiguousarray(vectors, dtype="<f4")
        if vectors.ndim != 2 or vectors.shape[1] != self.dim:
            raise ValueError(f"vectors must have shape (n, {self.dim}), got {vectors.shape}")
        self.file.write(vectors.tobytes())
        self.file.flush()
        os.fsync(self.file.fileno())
        self.rows += len(vectors)

    def close(self) -> None:
        """Write the header with the final count, fsync, close."""
        self.file.seek(0)
        self.file.write(_flat_header(self.dim, self.rows))
        self.file.flush()
        os.fsync(self.file.fileno())
        self.file.close()


def _write_json(path: Path, data: dict) -> None:
    """``data`` to ``path`` through a renamed temporary file (never half written)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2))
    with open(tmp, "rb") as f:
        os.fsync(f.fileno())
    os.replace(tmp, path)


def complete(folder: Path, passages: int | None = None) -> dict | None:
    """The ``meta.json`` of a finished index folder (with ``passages`` rows when given), else None."""
    meta_path = Path(folder) / "meta.json"
    if not meta_path.exists():
        return None
    meta = json.loads(meta_path.read_text())
    return meta if passages is None or meta.get("passages") == passages else None


def build_flat_index(con, encode: Callable[[list[tuple]], np.ndarray], folder: Path, meta: dict, digest: str,
                     chunk: int = DENSE_CHUNK, progress: Callable[[str], None] | None = None) -> dict:
    """Stream the corpus, ``encode(rows)`` each chunk and write ``folder`` (``index.faiss`` +
    ``meta.json``, ``meta`` plus the dimension) atomically; resume a killed build's partial folder.

    ``digest`` is the corpus hash the index is keyed by: the rows streamed are hashed again and a
    mismatch (the store changed meanwhile) is a RuntimeError, the partial build discarded. Returns
    the written meta. Blocks while another process builds the same folder, then returns its meta.
    """
    folder = Path(folder)
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(folder.parent / f".{folder.name}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes (or the process dies)
        done = complete(folder, meta["passages"])
        if done:
            return done
        partial = folder.parent / f".{folder.name}.partial"
        try:  # a build killed after its meta.json but before the rename only needs the rename
            written = complete(partial, meta["passages"]) or _stream_into(con, encode, partial, meta, digest, chunk,
                                                                          progress)
        except RuntimeError:
            shutil.rmtree(partial, ignore_errors=True)
            raise
        if folder.exists():  # an older, incomplete copy (no meta.json): never read, replaced
            shutil.rmtree(folder)
        os.rename(partial, folder)
        return written


def _stream_into(con, encode, partial: Path, meta: dict, digest: str, chunk: int, progress) -> dict:
    """The encoding loop of :func:`build_flat_index` in ``partial``; returns the meta it wrote."""
    partial.mkdir(exist_ok=True)
    state_path = partial / "progress.json"
    state = json.loads(state_path.read_text()) if state_path.exists() else {}
    if state.get("key") != meta["key"] or state.get("chunk") != chunk:
        state = {"key": meta["key"], "chunk": chunk, "rows": 0, "dim": None}
    resume, total = state["rows"], int(meta["passages"])
    out, h, seen, started = None, hashlib.sha256(), 0, time.perf_counter()
    if state["dim"]:
        out = FlatIPFile(partial / "index.faiss", state["dim"], resume)
        resume = out.rows
    last_log, chunks = 0.0, -(-total // chunk)
    for i, rows in enumerate(passage_chunks(con, chunk)):
        for row in rows:
            hash_row(h, row)
        seen += len(rows)
        if seen <= resume:
            continue
        rows = rows[len(rows) - (seen - max(resume, seen - len(rows))):]
        vectors = encode(rows)
        if out is None:
            out = FlatIPFile(partial / "index.faiss", vectors.shape[1])
            state["dim"] = out.dim
        out.append(vectors)
        _write_json(state_path, {**state, "rows": out.rows})  # after the fsynced vectors
        now = time.perf_counter()
        if progress and (now - last_log >= LOG_EVERY_S or seen == total):
            rate = (out.rows - resume) / max(now - started, 1e-9)
            progress(f"chunk {i + 1:,}/{chunks:,} ({out.rows:,}/{total:,} passages, {rate:,.0f} passages/s"
                     + (f", resumed after {resume:,}" if resume else "") + ")")
            last_log = now
    if h.hexdigest() != digest or seen != total or out is None:
        raise RuntimeError(f"the store's passages changed while the dense index was built ({seen:,} streamed, "
                           f"{total:,} expected): build it again")
    out.close()
    written = {**meta, "dim": out.dim}
    state_path.unlink()
    _write_json(partial / "meta.json", written)  # written last: marks the folder complete
    return written
