"""The solver's search tool T (seed 000, sections 3.3 and 4.1): batched top-k search with a cache.

``SearchTool`` searches the store's passages with BM25, a dense FAISS index or both fused (hybrid);
``workbench.search.client.RemoteRetriever`` searches any Search-R1-compatible retrieval server.
Both share ``Retriever``: batched ``search(queries, k)`` returning ``Hit`` lists, a query cache
whose hit rate the loop reports per round, and ``render`` in Search-R1's exact format.

Determinism: the same queries give the same hits. Each query is searched in its whitespace-
normalised form (the form the cache is keyed by), so a cache hit returns exactly what a fresh
search would. BM25 drops passages scoring 0 (they share no term with the query: their order
would be arbitrary), so a query with no known term returns no hits; dense search always returns
``k``. Ties are broken by passage order (passage_id).

Example:
    >>> from workbench import store
    >>> con = store.connect(":memory:")
    >>> _ = con.execute("INSERT INTO entities VALUES (1, 'Paris', 'city', 'entity', 't'), (2, 'Oslo', 'city', 'entity', 't')")
    >>> _ = con.execute("INSERT INTO passages VALUES (1, 1, 0, 'Paris is in France.'), (2, 2, 0, 'Oslo is in Norway.')")
    >>> tool = SearchTool(con, index="bm25", topk=1)
    >>> print(tool.render(tool.search(["Where is Oslo?"])[0]))
    Doc 1(Title: "Oslo") Oslo is in Norway.
    <BLANKLINE>
    >>> tool.search(["where is  Oslo?", "Where is Oslo?"])[1][0].title
    'Oslo'
    >>> tool.cache_stats()
    {'hits': 1, 'misses': 2, 'hit_rate': 0.3333333333333333}
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from cachetools import LRUCache

from workbench.search.index import (FUSION, FUSION_WEIGHT, HYBRID_DEPTH, RRF_K, Corpus, HybridIndex, contents, fuse,
                                   load_corpus, open_index)

INDEX_KINDS = ("bm25", "dense", "hybrid")  # search.index (config.INDEXES, tested equal)


@dataclass(frozen=True)
class Hit:
    """One retrieved passage. ``score`` is BM25's score or the cosine similarity (dense)."""

    passage_id: int | str
    entity_id: int | None
    title: str
    text: str
    score: float

    @property
    def contents(self) -> str:
        """The wiki-18 ``contents`` string (``"Title"\\ntext``) a Search-R1 server returns."""
        return contents(self.title, self.text)


def render(hits: list[Hit]) -> str:
    """Passages as Search-R1 shows them to the model (its ``_passages2string``), one line each:
    ``Doc i(Title: <first line of contents>) <rest of contents>``, each ending in a newline.

    The first line of wiki-18 contents is the title in double quotes, so the model sees
    ``Doc 1(Title: "Paris") ...`` exactly as a Search-R1 pipeline over wiki-18 would show it.

    Example:
        >>> render([Hit(7, 3, "Paris", "Paris is in France.", 1.0), Hit(8, 4, "Oslo", "Oslo is cold.", 0.5)])
        'Doc 1(Title: "Paris") Paris is in France.\\nDoc 2(Title: "Oslo") Oslo is cold.\\n'
        >>> render([])
        ''
    """
    out = ""
    for i, hit in enumerate(hits):
        lines = hit.contents.split("\n")
        out += f"Doc {i + 1}(Title: {lines[0]}) " + "\n".join(lines[1:]) + "\n"
    return out


def normalize_query(query: str) -> str:
    """The cache key and the string actually searched: stripped, inner whitespace collapsed.

    Example:
        >>> normalize_query("  who  founded\\tOslo? ")
        'who founded Oslo?'
    """
    return " ".join(query.split())


class CacheCounters:
    """Hits and misses of a search cache, counted per round (``Retriever``, ``KGSearch``)."""

    hits = misses = 0

    def cache_stats(self) -> dict:
        """Cache hits, misses and hit rate since the last ``reset_cache_stats`` (per round)."""
        total = self.hits + self.misses
        return {"hits": self.hits, "misses": self.misses, "hit_rate": self.hits / total if total else 0.0}

    def reset_cache_stats(self) -> None:
        """Zero the counters (the cached results stay)."""
        self.hits = self.misses = 0


# Ours: what a search cache may hold, in (estimated) bytes; the least recently used results go
# first. A count of entries was no bound: one 2,048-query x topk-1000 request left ~0.3 GB (issue 39).
CACHE_BYTES = 256 * 1024 * 1024
_HIT_BYTES = 480  # a Hit, its attribute dict, ids, score and two str headers (measured: ~350 with its own strings)
_KEY_BYTES = 160  # the (query, k) key tuple, the query's str header and the LRU's bookkeeping


def cached_bytes(hits: tuple[Hit, ...]) -> int:
    """The bytes a cached result is counted at: an upper estimate (a title or text the corpus
    also holds is counted again), so the cache never holds more than its limit says.

    Example:
        >>> cached_bytes((Hit(1, 2, "Oslo", "Oslo is cold.", 1.0),))
        657
    """
    return _KEY_BYTES + sum(_HIT_BYTES + len(h.title) + len(h.text) for h in hits)


class Retriever(CacheCounters):
    """Batched search with a query cache; subclasses implement ``_search(queries, k)``.

    ``search`` is thread-safe (one lock), so the retrieval server can share one tool. The cache
    keeps at most ``cache_bytes`` (each result counted at ``cached_bytes`` plus its query's length),
    the least recently used leaving first; a single result larger than that is returned, not kept.
    """

    def __init__(self, topk: int = 3, cache: bool = True, cache_bytes: int = CACHE_BYTES):
        if int(topk) < 1:
            raise ValueError(f"topk must be at least 1, got {topk!r}")
        if isinstance(cache_bytes, bool) or not isinstance(cache_bytes, int) or cache_bytes < 1:
            raise ValueError(f"cache_bytes must be a positive number of bytes, got {cache_bytes!r}")
        self.topk = int(topk)
        self.use_cache = cache
        # Values are (query length, hits): the key's text counts too (a query may be long).
        self._cache = LRUCache(cache_bytes, getsizeof=lambda entry: entry[0] + cached_bytes(entry[1]))
        self._lock = threading.Lock()
        self.hits = self.misses = 0

    @property
    def cache_bytes(self) -> tuple[int, int]:
        """(bytes held, the limit) of the result cache, as ``cached_bytes`` counts them."""
        return self._cache.currsize, self._cache.maxsize

    def _search(self, queries: list[str], k: int) -> list[list[Hit]]:
        raise NotImplementedError

    def clear_cache(self) -> None:
        """Forget every cached result, so the next searches run as a fresh tool's (the counts stay)."""
        with self._lock:
            self._cache.clear()

    def close(self) -> None:
        """Release what the retriever holds open (nothing here; ``SearchTool``'s mapped store)."""

    def __enter__(self) -> "Retriever":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def search(self, queries: list[str], k: int | None = None) -> list[list[Hit]]:
        """Top-``k`` (default ``topk``) hits for every query; all misses go in one backend call.

        A repeated query (in the cache, or earlier in the same batch) counts as a cache hit.
        """
        if isinstance(queries, str) or not all(isinstance(q, str) for q in queries):
            raise ValueError("queries must be a list of strings (wrap a single query in a list)")
        k = self.topk if k is None else int(k)
        if k < 1:
            raise ValueError(f"k must be at least 1, got {k!r}")
        keys = [(normalize_query(q), k) for q in queries]
        with self._lock:
            # Reading an entry makes it the most recently used.
            known = {key: self._cache[key][1] for key in keys if self.use_cache and key in self._cache}
            todo = list(dict.fromkeys(key for key in keys if key not in known))
            self.misses += len(todo)
            self.hits += len(keys) - len(todo)
            if todo:
                found = dict(zip(todo, map(tuple, self._search([q for q, _ in todo], k))))
                known.update(found)
                if self.use_cache:
                    for key, hits in found.items():
                        if len(key[0]) + cached_bytes(hits) <= self._cache.maxsize:  # else not kept
                            self._cache[key] = (len(key[0]), hits)
            return [list(known[key]) for key in keys]

    render = staticmethod(render)


class SearchTool(Retriever):
    """Search over a store's passages with BM25 (bm25s), dense retrieval (FAISS) or both fused
    (``index='hybrid'``: ``search.index.HybridIndex``, each one's top ``hybrid_depth`` fused by
    ``search.index.fuse`` with ``fusion``, BM25's weight ``fusion_weight`` and ``rrf_k``).

    ``db_or_con`` is a store path or an open DuckDB connection. ``model`` picks the dense encoder
    (default: the packaged all-MiniLM-L6-v2; any sentence-transformers or E5 path); ``e5``
    forces E5 prefixes on or off (default: detected from the model name). ``index_dir`` moves
    the persisted indexes (default: beside the store); ``device`` is where dense search runs
    (``search.device``: 'cpu' with FAISS, 'cuda' with an exact top-k on the GPU). ``mmap``
    (``search.mmap``): the index memory-mapped and each hit's passage read from the store
    (``search.on_disk``; ``corpus`` is then None); a store given by path is then opened read-only
    and stays open until :meth:`close` (or the end of a ``with`` block), which DuckDB's file lock
    needs before another process, or this one read-write, opens that store. ``cache_bytes``: the
    result cache's limit (``Retriever``).

    Example:
        >>> from workbench import store
        >>> con = store.connect(":memory:")
        >>> _ = con.execute("INSERT INTO passages VALUES (5, NULL, 0, 'Tea grows in Assam.')")
        >>> SearchTool(con).search(["tea"])[0][0].passage_id
        5
    """

    def __init__(self, db_or_con, index: str = "bm25", topk: int = 3, model: str | None = None,
                 e5: bool | None = None, cache: bool = True, index_dir: str | Path | None = None,
                 device: str = "cpu", mmap: bool = False, cache_bytes: int = CACHE_BYTES, rrf_k: float = RRF_K,
                 hybrid_depth: int = HYBRID_DEPTH, fusion: str = FUSION, fusion_weight: float = FUSION_WEIGHT):
        super().__init__(topk=topk, cache=cache, cache_bytes=cache_bytes)
        if index not in INDEX_KINDS:
            raise ValueError(f"index must be one of {list(INDEX_KINDS)}, got {index!r}")
        fuse([], [], 1, fusion, fusion_weight)  # search.fusion and search.fusion_weight checked before any index loads
        self.kind = index
        self.fusion = (rrf_k, hybrid_depth, fusion, fusion_weight)
        self.corpus, self.passages, self._own = None, None, None
        if isinstance(db_or_con, (str, Path)):
            if not Path(db_or_con).exists():
                raise FileNotFoundError(f"no store at {db_or_con}")
            import duckdb

            from workbench import store

            # mmap: passages are read per search, so the (read-only) connection stays open
            try:
                con = store.connect(db_or_con, read_only=mmap)
            except duckdb.ConnectionException as e:
                raise RuntimeError(f"search.mmap opens {db_or_con} read-only, but this process holds it open "
                                   "read-write: pass that open connection to SearchTool instead of the path") from e
            try:
                self._open(con, index, model, e5, index_dir, device, mmap)
            finally:
                if self.passages is None:
                    con.close()
                else:
                    self._own = con
        else:
            self._open(db_or_con, index, model, e5, index_dir, device, mmap)

    def close(self) -> None:
        """Release the store: the passages' cursor, and the connection the tool opened itself."""
        if self.passages is not None:
            self.passages.close()
        if self._own is not None:
            self._own.close()
            self._own = None

    def _open(self, con, index, model, e5, index_dir, device, mmap: bool) -> None:
        """The index and the passages: memory-mapped and from the store (``mmap``: ``search.on_disk``;
        an in-memory store has nothing to map and loads as without it), else both in memory.
        ``hybrid``: the BM25 and the dense index, each opened as on its own, fused (``HybridIndex``)."""
        if index == "hybrid":
            bm25 = self._open_one(con, "bm25", model, e5, index_dir, device, mmap)
            dense = self._open_one(con, "dense", model, e5, index_dir, device, mmap)
            self.index = HybridIndex(bm25, dense, self.n_passages, *self.fusion)
        else:
            self.index = self._open_one(con, index, model, e5, index_dir, device, mmap)

    def _open_one(self, con, index, model, e5, index_dir, device, mmap: bool):
        """One index (``bm25`` or ``dense``); the passages too, the first time."""
        if mmap:
            from workbench.search.on_disk import open_mmap

            opened = open_mmap(con, index, model, e5, index_dir, device)
            if opened is not None:
                found, passages = opened
                if self.passages is None:
                    self.passages = passages
                else:  # the hybrid's second index: the first one's reader serves both
                    passages.close()
                return found
        if self.corpus is None:
            self.corpus = load_corpus(con)
        return open_index(con, self.corpus, index, model, e5, index_dir, device)

    @property
    def n_passages(self) -> int:
        """The number of passages searched."""
        return len(self.corpus) if self.corpus is not None else len(self.passages)

    def _rows(self, rows: list[int]) -> list[tuple]:
        """(passage_id, entity_id, title, text) of index rows: from the corpus, or read from the store."""
        if self.passages is not None:
            return self.passages.rows(rows)
        c: Corpus = self.corpus
        return [(c.passage_ids[r], c.entity_ids[r], c.titles[r], c.texts[r]) for r in rows]

    def _search(self, queries: list[str], k: int) -> list[list[Hit]]:
        rows, scores = self.index.search(queries, min(k, self.n_passages))
        kept = []
        for row, score in zip(rows, scores):
            # Canonical order: score descending, then passage order, so ties never depend on
            # the backend's partial sort.
            order = sorted((i for i in range(len(row)) if row[i] >= 0), key=lambda i: (-float(score[i]), int(row[i])))
            # BM25: a passage scoring 0 shares no term with the query
            kept.append([(int(row[i]), float(np.float32(score[i]))) for i in order
                         if not (self.kind == "bm25" and score[i] <= 0)])
        fetched = iter(self._rows([r for hits in kept for r, _ in hits]))  # one store read per batch
        return [[Hit(*next(fetched), score) for _, score in hits] for hits in kept]
