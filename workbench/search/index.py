"""BM25 and dense (FAISS) indexes over the store's passages, persisted beside the store, and their
hybrid (``HybridIndex``: the two fused by ``fuse``).

The corpus is the ``passages`` table joined with ``entities.title``, ordered by ``passage_id``.
Each passage is indexed as its wiki-18 ``contents`` string, ``"Title"\\ntext`` (the title in
double quotes on the first line, as in Search-R1's wiki-18 corpus), so a dense encoder sees the
same kind of string Search-R1's E5 index saw.

Indexes persist in a folder next to the ``.duckdb`` file (``data/tiny.duckdb`` ->
``data/tiny.index/bm25-<hash>/`` or ``dense-<hash>/``), keyed by a content hash of the passages
(and, for dense, of the encoder), and are rebuilt only when that hash changes. In-memory stores
get in-memory indexes. Older index folders are kept (they are small and another process may be
loading one); delete the ``.index`` folder to reclaim the space.

Example:
    >>> from workbench import store
    >>> con = store.connect(":memory:")
    >>> _ = con.execute("INSERT INTO entities VALUES (1, 'Paris', 'city', 'entity', 'test')")
    >>> _ = con.execute("INSERT INTO passages VALUES (10, 1, 0, 'Paris is the capital of France.')")
    >>> corpus = load_corpus(con)
    >>> corpus.contents[0]
    '"Paris"\\nParis is the capital of France.'
    >>> idx = BM25Index.build(corpus)
    >>> rows, scores = idx.search(["capital of France"], k=1)
    >>> int(rows[0][0])
    0
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from workbench.search.dense_stream import (CORPUS_SQL, DENSE_CHUNK, build_flat_index, complete,
                                           corpus_digest, hash_row)
from workbench.search.encoder import Encoder


def contents(title: str, text: str) -> str:
    """The wiki-18 ``contents`` string of a passage: the quoted title, a newline, the text.

    Example:
        >>> contents("Paris", "Paris is a city.")
        '"Paris"\\nParis is a city.'
    """
    return f'"{title}"\n{text}'


@dataclass(frozen=True)
class Corpus:
    """The store's passages in index order (row ``i`` of every index is passage ``i`` here)."""

    passage_ids: list[int]
    entity_ids: list[int | None]
    titles: list[str]
    texts: list[str]

    @property
    def contents(self) -> list[str]:
        return [contents(t, x) for t, x in zip(self.titles, self.texts)]

    def __len__(self) -> int:
        return len(self.passage_ids)

    def content_hash(self) -> str:
        """sha256 over every (passage_id, entity_id, title, text), in order."""
        h = hashlib.sha256()
        for row in zip(self.passage_ids, self.entity_ids, self.titles, self.texts):
            hash_row(h, row)
        return h.hexdigest()


def load_corpus(con) -> Corpus:
    """Read ``passages`` joined with ``entities.title`` (ordered by passage_id) from the store.

    A passage whose entity is missing gets the empty title; NULL text reads as "".
    Raises ValueError when the store holds no passages.
    """
    rows = con.execute(CORPUS_SQL).fetchall()
    if not rows:
        raise ValueError(EMPTY)
    ids, ents, titles, texts = (list(col) for col in zip(*rows))
    return Corpus([int(i) for i in ids], [None if e is None else int(e) for e in ents], titles, texts)


EMPTY = ("the store's passages table is empty: build or import a world first "
         "(e.g. `workbench world`)")


def db_file(con) -> Path | None:
    """The file behind a DuckDB connection, or None for an in-memory database."""
    # fetchall, not fetchone: a half-read result would block the streamed reads of the dense build
    [(path,)] = con.execute("SELECT path FROM duckdb_databases() WHERE database_name = current_database()").fetchall()
    return Path(path) if path else None


def index_root(db: Path) -> Path:
    """The folder beside the store where its indexes live (``data/tiny.duckdb`` -> ``data/tiny.index``)."""
    return db.with_suffix(".index")


def _atomic_dir(final: Path, write) -> None:
    """Write a folder through a temporary sibling and rename it into place, so a reader never
    sees a half-written index (and two concurrent builders do not corrupt each other)."""
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=final.name + ".tmp-", dir=final.parent))
    try:
        write(tmp)
        try:
            os.rename(tmp, final)
        except OSError:  # another process finished the same index first: theirs is identical
            if not final.exists():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


class BM25Index:
    """BM25 (bm25s, Lucene variant, English stopwords, lowercase) over a corpus's contents."""

    kind = "bm25"

    def __init__(self, retriever):
        self.retriever = retriever

    @staticmethod
    def key(corpus: Corpus) -> str:
        return "bm25-" + corpus.content_hash()[:16]

    @classmethod
    def build(cls, corpus: Corpus) -> "BM25Index":
        import bm25s

        retriever = bm25s.BM25()
        retriever.index(bm25s.tokenize(corpus.contents, show_progress=False), show_progress=False)
        return cls(retriever)

    def save(self, folder: Path) -> None:
        self.retriever.save(str(folder), show_progress=False)

    @classmethod
    def load(cls, folder: Path, mmap: bool = False) -> "BM25Index":
        """The saved index; ``mmap``: its score arrays memory-mapped (``search.mmap``), not read."""
        import bm25s

        return cls(bm25s.BM25.load(str(folder), show_progress=False, mmap=mmap))

    def search(self, queries: list[str], k: int) -> tuple[np.ndarray, np.ndarray]:
        """Row indices and scores, shape (len(queries), k), for the whole batch in one bm25s call.

        A passage scoring 0 shares no term with the query; callers drop those rows.
        """
        import bm25s

        tokens = bm25s.tokenize(queries, show_progress=False, return_ids=False)
        rows, scores = self.retriever.retrieve(tokens, k=k, show_progress=False)
        return np.asarray(rows), np.asarray(scores, dtype=np.float32)


def exact_topk(matrix, queries, k: int, chunk: int = 1 << 21):
    """Exact inner-product top-``k`` of each query (torch tensors) against ``matrix``'s rows, on
    the matrix's device: (rows, scores) as numpy arrays, scores descending. The matrix is scored in chunks of ``chunk``
    rows (a batch of 256 queries against 2M rows holds 2 GiB of float32 scores), each chunk's top-k
    merged into the running top-k. What ``DenseIndex`` does on a GPU instead of FAISS's CPU scan.

    Example:
        >>> import torch
        >>> m = torch.tensor([[1.0, 0.0], [0.0, 1.0], [0.7, 0.7]])
        >>> rows, scores = exact_topk(m, torch.tensor([[1.0, 0.1]]), k=2, chunk=2)
        >>> rows.tolist(), [round(float(x), 2) for x in scores[0]]
        ([[0, 2]], [1.0, 0.77])
    """
    import torch

    k = min(k, matrix.shape[0])
    queries = queries.to(matrix.device, matrix.dtype)
    best_scores = best_rows = None
    for start in range(0, matrix.shape[0], chunk):
        scores = (queries @ matrix[start:start + chunk].T).float()
        top = scores.topk(min(k, scores.shape[1]), dim=1)
        rows = top.indices + start
        if best_scores is not None:
            both = torch.cat([best_scores, top.values], 1)
            merged = both.topk(min(k, both.shape[1]), dim=1)
            rows = torch.cat([best_rows, rows], 1).gather(1, merged.indices)
            top = merged
        best_scores, best_rows = top.values, rows
    return best_rows.cpu().numpy(), best_scores.cpu().numpy()


class DenseIndex:
    """FAISS ``IndexFlatIP`` over normalised passage embeddings (inner product = cosine).

    ``device`` (``search.device``): 'cpu' searches with FAISS; 'cuda' (or 'cuda:N') copies the
    vectors to that GPU once, in float16, and searches exactly with :func:`exact_topk` (the
    persisted index stays FAISS's, so both read one file).
    """

    kind = "dense"

    def __init__(self, index, encoder: Encoder, device: str = "cpu"):
        self.index = index
        self.encoder = encoder
        self.device = device
        self._matrix = None  # the vectors on ``device`` (torch), copied at the first search

    @staticmethod
    def key(corpus: Corpus | str, encoder: Encoder) -> str:
        """The folder name: a hash of the corpus (a ``Corpus`` or its ``content_hash``) and the encoder."""
        digest = corpus if isinstance(corpus, str) else corpus.content_hash()
        return "dense-" + hashlib.sha256((digest + encoder.fingerprint()).encode()).hexdigest()[:16]

    @classmethod
    def build(cls, corpus: Corpus, encoder: Encoder) -> "DenseIndex":
        import faiss

        emb = encoder.passages(corpus.contents)
        index = faiss.IndexFlatIP(emb.shape[1])
        index.add(emb)
        return cls(index, encoder)

    def save(self, folder: Path) -> None:
        import faiss

        faiss.write_index(self.index, str(folder / "index.faiss"))

    @classmethod
    def load(cls, folder: Path, encoder: Encoder, mmap: bool = False) -> "DenseIndex":
        """The saved index; ``mmap`` (``search.mmap``): its vectors a shared read-only mapping of the
        file (``IO_FLAG_MMAP_IFC``), paged in by the OS, searched by the same FAISS kernel."""
        import faiss

        flags = faiss.IO_FLAG_MMAP_IFC | faiss.IO_FLAG_READ_ONLY if mmap else 0
        return cls(faiss.read_index(str(folder / "index.faiss"), flags), encoder)

    def search(self, queries: list[str], k: int) -> tuple[np.ndarray, np.ndarray]:
        """Row indices and cosine scores for the whole batch: one encoder call, one FAISS call
        (or one chunked top-k on the GPU)."""
        embedded = self.encoder.queries(queries)
        if self.device == "cpu":
            scores, rows = self.index.search(embedded, k)
            return rows, scores
        import torch

        if self._matrix is None:
            self._matrix = to_device(self.vectors(copy=False), self.device)
        return exact_topk(self._matrix, torch.from_numpy(embedded), k)

    def vectors(self, copy: bool = True) -> np.ndarray:
        """The indexed passage embeddings, (passages, dim) float32, read from the FAISS index;
        ``copy=False``: a view of FAISS's own buffer (a memory-mapped index's file pages)."""
        import faiss

        flat = faiss.rev_swig_ptr(self.index.get_xb(), self.index.ntotal * self.index.d)
        view = flat.view(np.float32).reshape(self.index.ntotal, self.index.d)
        return np.array(view) if copy else view


RRF_K = 60  # the constant of reciprocal rank fusion (Cormack, Clarke and Buettcher, SIGIR 2009), search.rrf_k
# ours, the three chosen together on a development set of 4,000 synthetic queries, not on the
# hand-written test questions (scripts/hybrid_dev.py; 50, rrf and 0.5 before 2026-12-04)
HYBRID_DEPTH = 100  # hits of each retriever fused (search.hybrid_depth)
FUSIONS = ("rrf", "minmax", "zscore")  # search.fusion (config.FUSIONS, tested equal)
FUSION = "zscore"  # search.fusion
FUSION_WEIGHT = 0.7  # search.fusion_weight: BM25's weight (dense's 0.3)


def rrf(rankings, k: int, c: float = RRF_K) -> list[tuple[int, float]]:
    """Reciprocal rank fusion: each row's score is the sum, over the rankings it is in, of
    1 / (c + its 1-based rank there); the top ``k`` rows by that score, ties by row (passage order).

    Example:
        >>> [(r, round(s, 4)) for r, s in rrf([[3, 1, 2], [1, 4]], k=3, c=60)]
        [(1, 0.0325), (3, 0.0164), (4, 0.0161)]
    """
    scores: dict[int, float] = {}
    for ranking in rankings:
        for rank, row in enumerate(ranking, start=1):
            scores[int(row)] = scores.get(int(row), 0.0) + 1.0 / (c + rank)
    return sorted(scores.items(), key=lambda item: (-item[1], item[0]))[:k]


def _normalised(scores: list[float], fusion: str, c: float) -> tuple[list[float], float]:
    """One retriever's hits' values under ``fusion`` (in rank order) and the value of a hit it does not list."""
    if fusion == "rrf":
        return [1.0 / (c + rank) for rank in range(1, len(scores) + 1)], 0.0
    s = np.asarray(scores, dtype=np.float64)
    if fusion == "minmax":
        span = s.max() - s.min() if len(s) else 0.0
        return ((s - s.min()) / span if span > 0 else np.ones_like(s)).tolist(), 0.0
    sd = s.std() if len(s) else 0.0
    z = (s - s.mean()) / sd if sd > 0 else np.zeros_like(s)
    return z.tolist(), float(z.min()) if len(z) else 0.0


def fuse(lexical, dense, k: int, fusion: str = FUSION, weight: float = FUSION_WEIGHT,
         c: float = RRF_K) -> list[tuple[int, float]]:
    """The top ``k`` of two ranked hit lists fused: score = ``weight`` x BM25's value + (1 - ``weight``)
    x dense's value (ours: one convex combination for the three standard fusions).

    ``lexical``, ``dense``: (row, score) pairs, best first. A hit's value in a list, by ``fusion``:
    ``rrf``: 1 / (``c`` + its rank) (reciprocal rank fusion, Cormack et al. 2009; weight 0.5 is their
    unweighted sum, halved); ``minmax``: its score min-max normalised over the list (all 1 when the
    list's scores are equal); ``zscore``: its score's z-score over the list (0 when equal). A hit the
    list lacks takes the list's lowest value (0 for ``rrf`` and ``minmax``, the least z-score for
    ``zscore``). Ties go to the better rank in the list weighted more (BM25's at 0.5), then in the
    other, then to the lower row, so ``weight`` 1 keeps BM25's order and 0 dense's.

    Example:
        >>> [(r, round(s, 4)) for r, s in fuse([(3, 9.0), (1, 5.0)], [(1, 0.8), (4, 0.6)], k=3, fusion="rrf", weight=0.5)]
        [(1, 0.0163), (3, 0.0082), (4, 0.0081)]
        >>> [(r, round(s, 4)) for r, s in fuse([(3, 9.0), (1, 5.0)], [(1, 0.8), (4, 0.6)], k=3)]  # zscore, 0.7
        [(3, 0.4), (1, -0.4), (4, -1.0)]
        >>> [r for r, _ in fuse([(3, 9.0), (1, 5.0)], [(1, 0.8), (4, 0.6)], k=3, fusion="minmax", weight=0.3)]
        [1, 3, 4]
    """
    if fusion not in FUSIONS:
        raise ValueError(f"search.fusion must be one of {list(FUSIONS)}, got {fusion!r}")
    if not 0 <= weight <= 1:
        raise ValueError(f"search.fusion_weight must be a number in [0, 1], got {weight!r}")
    ranks: tuple[dict[int, int], dict[int, int]] = ({}, {})
    values: tuple[dict[int, float], dict[int, float]] = ({}, {})
    missing = [0.0, 0.0]
    for j, hits in enumerate((lexical, dense)):
        rows = [int(r) for r, _ in hits]
        normalised, missing[j] = _normalised([float(s) for _, s in hits], fusion, c)
        for rank, (row, value) in enumerate(zip(rows, normalised), start=1):
            if row not in ranks[j]:  # a row listed twice counts at its better rank
                ranks[j][row], values[j][row] = rank, value
    first = 0 if weight >= 0.5 else 1
    scored = []
    for row in set(ranks[0]) | set(ranks[1]):
        score = weight * values[0].get(row, missing[0]) + (1 - weight) * values[1].get(row, missing[1])
        scored.append((-score, ranks[first].get(row, np.inf), ranks[1 - first].get(row, np.inf), row))
    return [(row, -neg) for neg, _, _, row in sorted(scored)[:k]]


class HybridIndex:
    """BM25 and dense retrieval fused (``search.index=hybrid``; ours): :func:`fuse` of each query's top
    ``depth`` hits of each index (BM25's with a score above 0: the others share no term with the
    query), by ``fusion`` with BM25's ``weight`` (and ``rrf_k`` for ``rrf``); the score of a hit is
    its fused score. Both indexes are the ones ``bm25`` and ``dense`` open on their own (persisted, shared).

    Example:
        >>> from workbench import store
        >>> con = store.connect(":memory:")
        >>> _ = con.execute("INSERT INTO passages VALUES (1, NULL, 0, 'Tea grows in Assam.'), (2, NULL, 0, 'Coffee.')")
        >>> corpus = load_corpus(con)
        >>> idx = HybridIndex(BM25Index.build(corpus), DenseIndex.build(corpus, Encoder()), len(corpus))
        >>> rows, scores = idx.search(["where does tea grow"], k=2)
        >>> rows[0].tolist(), round(float(scores[0][0]), 4)
        ([0, 1], 0.3)
    """

    kind = "hybrid"

    def __init__(self, bm25: BM25Index, dense: DenseIndex, n: int, rrf_k: float = RRF_K, depth: int = HYBRID_DEPTH,
                 fusion: str = FUSION, weight: float = FUSION_WEIGHT):
        if not rrf_k >= 0 or int(depth) < 1:
            raise ValueError(f"search.rrf_k must be >= 0 and search.hybrid_depth >= 1, got {rrf_k!r} and {depth!r}")
        fuse([], [], 1, fusion, weight)  # the same checks as at search time, now
        self.bm25, self.dense, self.n, self.rrf_k, self.depth = bm25, dense, int(n), float(rrf_k), int(depth)
        self.fusion, self.weight = fusion, float(weight)

    @property
    def device(self) -> str:
        return self.dense.device

    @device.setter
    def device(self, value: str) -> None:
        self.dense.device = value

    def search(self, queries: list[str], k: int) -> tuple[np.ndarray, np.ndarray]:
        """Row indices and fused scores, shape (len(queries), k): rows past the fused hits are -1."""
        depth = min(max(k, self.depth), self.n)
        brows, bscores = self.bm25.search(queries, depth)
        drows, dscores = self.dense.search(queries, depth)
        rows = np.full((len(queries), k), -1, dtype=np.int64)
        scores = np.zeros((len(queries), k), dtype=np.float32)
        for i in range(len(queries)):
            lexical = [(r, s) for r, s in zip(brows[i], bscores[i]) if s > 0 and r >= 0]
            semantic = [(r, s) for r, s in zip(drows[i], dscores[i]) if r >= 0]
            fused = fuse(lexical, semantic, k, self.fusion, self.weight, self.rrf_k)
            rows[i, :len(fused)] = [r for r, _ in fused]
            scores[i, :len(fused)] = [s for _, s in fused]
        return rows, scores


def to_device(vectors: np.ndarray, device: str, chunk: int = 1 << 18):
    """``vectors`` as a float16 torch tensor on ``device``, copied ``chunk`` rows at a time, so no
    second host copy of the whole matrix is made (a memory-mapped index stays in the page cache).

    Example:
        >>> import torch
        >>> v = np.arange(6, dtype=np.float32).reshape(3, 2) / 3
        >>> bool((to_device(v, "cpu", chunk=2) == torch.from_numpy(v).to(torch.float16)).all())
        True
    """
    import torch

    out = torch.empty(vectors.shape, dtype=torch.float16, device=device)
    for start in range(0, len(vectors), chunk):
        out[start:start + chunk] = torch.from_numpy(np.ascontiguousarray(vectors[start:start + chunk])).to(
            device, torch.float16)
    return out


def open_index(con, corpus: Corpus, kind: str = "bm25", model: str | None = None, e5: bool | None = None,
               root: Path | None = None, device: str = "cpu"):
    """Load the persisted index of ``corpus`` or build (and persist) it when its hash is new.

    ``root`` defaults to the folder beside the store's file; an in-memory store with no ``root``
    builds in memory every time. ``device`` is where a dense index searches (``DenseIndex``).

    Example:
        >>> from workbench import store
        >>> con = store.connect(":memory:")
        >>> _ = con.execute("INSERT INTO passages VALUES (1, NULL, 0, 'a short passage')")
        >>> open_index(con, load_corpus(con), "bm25").kind
        'bm25'
    """
    if kind not in ("bm25", "dense"):
        raise ValueError(f"index must be 'bm25' or 'dense', got {kind!r}")
    encoder = Encoder(model, e5) if kind == "dense" else None
    key = BM25Index.key(corpus) if kind == "bm25" else DenseIndex.key(corpus, encoder)
    if root is None:
        db = db_file(con)
        root = index_root(db) if db is not None else None

    def build():
        return BM25Index.build(corpus) if kind == "bm25" else DenseIndex.build(corpus, encoder)

    if root is None:
        return _on(build(), device)
    folder = Path(root) / key
    if complete(folder, len(corpus)):
        index = BM25Index.load(folder) if kind == "bm25" else DenseIndex.load(folder, encoder)
        return _on(index, device)
    if kind == "dense":  # streamed to disk in chunks (constant memory), then read back
        build_dense(con, encoder, root, digest=(corpus.content_hash(), len(corpus)))
        return _on(DenseIndex.load(folder, encoder), device)
    index = build()

    def write(tmp: Path) -> None:
        index.save(tmp)
        meta = {"kind": kind, "key": key, "passages": len(corpus),
                "encoder": encoder.name if encoder else None, "e5": encoder.e5 if encoder else None}
        (tmp / "meta.json").write_text(json.dumps(meta, indent=2))  # written last: marks it complete

    _atomic_dir(folder, write)
    return _on(index, device)


def build_dense(con, encoder: Encoder, root: Path, digest: tuple[str, int] | None = None,
                chunk: int = DENSE_CHUNK, progress=None) -> dict:
    """Build (or find) the dense index of the store's corpus in ``root`` in constant memory
    (``search.dense_stream``: passages streamed ``chunk`` at a time, vectors appended on disk, a
    killed build resumed); returns its ``meta.json``. ``digest``: the corpus's (content_hash,
    passages) when known, else streamed from the store. ``progress`` gets one line per chunk (at
    most every 10 s). The folder is what :func:`open_index` loads for the same corpus and encoder.

    Example:
        >>> import tempfile
        >>> from workbench import store
        >>> con = store.connect(":memory:")
        >>> _ = con.execute("INSERT INTO passages VALUES (1, NULL, 0, 'tea'), (2, NULL, 0, 'coffee')")
        >>> meta = build_dense(con, Encoder(), Path(tempfile.mkdtemp()), chunk=1)
        >>> meta["passages"], meta["dim"], meta["kind"]
        (2, 384, 'dense')
    """
    digest, passages = digest or corpus_digest(con, chunk)
    if not passages:
        raise ValueError(EMPTY)
    key = DenseIndex.key(digest, encoder)
    meta = {"kind": "dense", "key": key, "passages": passages, "encoder": encoder.name, "e5": encoder.e5}
    return build_flat_index(con, lambda rows: encoder.passages([contents(t, x) for _, _, t, x in rows]),
                            Path(root) / key, meta, digest, chunk, progress)


def _on(index, device: str):
    if device != "cpu" and index.kind == "dense":
        index.device = device
    return index
