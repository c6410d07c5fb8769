"""DynaSearcher's KG search tool (seed 003, "KG Search Tool"): fuzzy entity linking, the entity's
triples from the store's ``edges``, and a relevance filter ("KG Filter Module").

A solver that may use it writes ``<kg_search> entity </kg_search>`` (``policy/protocol.py``); the
environment answers inside ``<information>`` with the matched entity's ``(head, relation, tail)``
triples, at most ``max_triples`` of them after the filter.

* Entity linking (the paper: fuzzy matching on Wikidata5M): :class:`EntityMatcher` over every
  entity title and alias. An exact match of the normalised name wins (a title before an alias,
  then the lowest id); otherwise the names sharing the most character trigrams with the query are
  ranked by difflib's similarity ratio, accepted from ``min_similarity`` on (ours, 0.75). No
  library beyond the standard one: the workbench has no fuzzy-matching dependency, and this one
  is deterministic.
* Triples: the entity's outgoing edges, then its incoming ones (each sorted by relation, then
  the other entity's id), at most ``MAX_CANDIDATES`` (ours) before the filter.
* Filter (``method.kg_filter``): ``overlap`` (ours, the tiny tier: triples ranked by how many
  content words of the question their relation and other entity share, ties in triple order),
  ``llm`` (the paper's filter module: a judge -- the loaded policy on a capable backbone -- is shown
  the numbered triples and names the relevant ones) or ``none`` (the first ``max_triples``).

Example:
    >>> from workbench import store
    >>> con = store.connect(":memory:")
    >>> _ = con.execute("INSERT INTO entities VALUES (1, 'Kavimo Rutel', 'person', 'entity', 't'), "
    ...                 "(2, 'Dagiju', 'city', 'entity', 't'), (3, 'Pebun', 'country', 'entity', 't')")
    >>> _ = con.execute("INSERT INTO edges VALUES (1, 2, 'born in', 't'), (1, 3, 'citizen of', 't'), "
    ...                 "(2, 3, 'located in', 't')")
    >>> kg = KGSearch(con, max_triples=1)
    >>> hit = kg.search(["Kavimo Rutell"], ["Where was Kavimo Rutel born?"])[0]
    >>> print(kg.render(hit))
    Entity: Kavimo Rutel
    (Kavimo Rutel, born in, Dagiju)
    <BLANKLINE>
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import re
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from workbench.config import KG_FILTERS as FILTERS
from workbench.config import MethodConfig
from workbench.scoring import normalize_answer
from cachetools import LRUCache

from workbench.search.tool import CACHE_BYTES, CacheCounters

# The KG tool's settings, mapped once: KGSearch keyword (and attribute) -> (MethodConfig field, type).
# make_kg_tool, a run's workbench.json, `workbench eval`'s rebuilt tool, the KG warm start's key,
# `serve-retriever --kg` and the remote client's check all go through it, so a new setting is a
# line here, its config field and its use in KGSearch.
SETTINGS = {"max_triples": ("kg_max_triples", int), "min_similarity": ("kg_min_similarity", float),
            "filter": ("kg_filter", str)}
MAX_CANDIDATES = 256  # ours: triples of one entity the filter sees (a Wikidata hub has thousands)
SHORTLIST = 32  # ours: names sharing the most trigrams that the similarity ratio ranks
# ours: words that say nothing about which triple is relevant (question words, copulas, prepositions)
STOPWORDS = frozenset("in of by is was were are what which who whom whose where when did does do to for at on "
                      "from with and or as how many much it its this that".split())


@dataclass(frozen=True)
class Triple:
    """One edge as the solver reads it, with the ids behind the names."""

    head: str
    relation: str
    tail: str
    head_id: int
    tail_id: int

    def __str__(self) -> str:
        return f"({self.head}, {self.relation}, {self.tail})"


@dataclass(frozen=True)
class KGHit:
    """What one KG search returned: the linked entity (None: no name close enough) and its triples."""

    query: str
    entity_id: int | None
    title: str | None
    score: float
    triples: tuple[Triple, ...] = ()


def render(hit: KGHit) -> str:
    """The KG answer as the solver sees it inside ``<information>``: the linked entity, then one
    triple a line.

    Example:
        >>> render(KGHit("x", None, None, 0.0))
        'No entity matches "x".\\n'
    """
    if hit.entity_id is None:
        return f'No entity matches "{hit.query}".\n'
    return f"Entity: {hit.title}\n" + "".join(f"{t}\n" for t in hit.triples)


def tool_settings(method_cfg) -> dict:
    """The KG tool's settings (``KGSearch`` keywords) of a ``MethodConfig`` (``method.kg_*``).

    Example:
        >>> tool_settings(MethodConfig(kg_max_triples=2))
        {'max_triples': 2, 'min_similarity': 0.75, 'filter': 'overlap'}
    """
    return settings_of(method_cfg, SETTINGS)


def settings_of(method_cfg, table: dict) -> dict:
    """A tool's settings from a ``MethodConfig`` by its ``table`` (keyword -> (field, type)); the KG
    tool's and EoG's graph tools' alike."""
    return {key: cast(getattr(method_cfg, field)) for key, (field, cast) in table.items()}


def config_of(settings: dict, table: dict, what: str) -> MethodConfig:
    """A ``MethodConfig`` with a tool's ``settings`` by its ``table``; a setting left out keeps its
    default, an unknown one is refused naming ``what`` ("KG tool", "graph tool")."""
    unknown = sorted(set(settings) - set(table))
    if unknown:
        raise ValueError(f"{what} settings {unknown}: unknown; expected some of {list(table)}")
    return dataclasses.replace(MethodConfig(), **{table[k][0]: table[k][1](v) for k, v in settings.items()})


def settings_config(settings: dict) -> MethodConfig:
    """A ``MethodConfig`` with the KG tool's ``settings`` (as :func:`tool_settings` gives them, e.g.
    a run's ``workbench.json``); a setting left out keeps its default, an unknown one is refused.

    Example:
        >>> settings_config({"max_triples": "3"}).kg_max_triples
        3
    """
    return config_of(settings, SETTINGS, "KG tool")


def _grams(name: str) -> set[str]:
    padded = f"  {name} "
    return {padded[i:i + 3] for i in range(len(padded) - 2)}


class EntityMatcher:
    """Fuzzy entity linking over names (titles and aliases), deterministic.

    Example:
        >>> m = EntityMatcher([(1, "Kavimo Rutel", True), (2, "Dagiju", True), (2, "City of Dagiju", False)])
        >>> m.match("the kavimo rutel"), m.match("Dagijo"), m.match("Lorentia")
        ((1, 1.0), (2, 0.833333), None)
    """

    def __init__(self, names: Sequence[tuple[int, str, bool]], min_similarity: float = 0.75):
        if not 0.0 <= min_similarity <= 1.0:
            raise ValueError(f"min_similarity must lie in [0, 1], got {min_similarity!r}")
        self.min_similarity = min_similarity
        # (normalised name, is a title, entity id), in a fixed order: titles first, then ids
        rows = sorted({(normalize_answer(n), bool(t), int(e)) for e, n, t in names if normalize_answer(n)},
                      key=lambda r: (not r[1], r[2], r[0]))
        self.names = [r[0] for r in rows]
        self.ids = np.asarray([r[2] for r in rows], dtype=np.int64)
        self.exact: dict[str, int] = {}
        for i, name in enumerate(self.names):
            self.exact.setdefault(name, i)
        self.index: dict[str, list[int]] = {}
        for i, name in enumerate(self.names):
            for g in _grams(name):
                self.index.setdefault(g, []).append(i)

    def match(self, query: str) -> tuple[int, float] | None:
        """(entity id, similarity rounded to 6 digits) of the best name, or None below ``min_similarity``."""
        q = normalize_answer(query)
        if not q:
            return None
        if q in self.exact:
            return int(self.ids[self.exact[q]]), 1.0
        shared: dict[int, int] = {}
        for g in _grams(q):
            for i in self.index.get(g, ()):
                shared[i] = shared.get(i, 0) + 1
        if not shared:
            return None
        shortlist = sorted(shared, key=lambda i: (-shared[i], i))[:SHORTLIST]
        best, best_score = None, -1.0
        matcher = difflib.SequenceMatcher(None, autojunk=False)
        matcher.set_seq2(q)  # difflib caches what it learns about seq2: the query, fixed here
        for i in sorted(shortlist):  # name order, so a tie keeps the first: titles before aliases, lower ids
            matcher.set_seq1(self.names[i])
            if matcher.real_quick_ratio() <= best_score or matcher.quick_ratio() <= best_score:
                continue  # upper bounds of ratio(): this name cannot beat the best so far
            score = matcher.ratio()
            if score > best_score:
                best, best_score = i, score
        if best_score < self.min_similarity:
            return None
        return int(self.ids[best]), round(best_score, 6)


_TRIPLE_BYTES = 400  # a Triple, its attribute dict, ids and three str headers (as tool._HIT_BYTES)


def kg_cached_bytes(entry: tuple[tuple, KGHit]) -> int:
    """The bytes a cached KG result (its key and hit) is counted at: an upper estimate, as
    ``tool.cached_bytes`` (a count of entries was no bound: a key holds the rollout's question).

    Example:
        >>> kg_cached_bytes((("Oslo", None, 4), KGHit("Oslo", 1, "Oslo", 1.0, (Triple("Oslo", "in", "Norway", 1, 2),))))
        1060
    """
    (query, question, _), hit = entry
    return (640 + len(query) + len(question or "") + len(hit.title or "")
            + sum(_TRIPLE_BYTES + len(t.head) + len(t.relation) + len(t.tail) for t in hit.triples))


@functools.lru_cache(maxsize=65536)
def content_words(text: str) -> frozenset[str]:
    """Normalised words of ``text`` less :data:`STOPWORDS` (cached: relation labels and names recur).

    Example:
        >>> sorted(content_words("In which year was Kavimo Rutel born?"))
        ['born', 'kavimo', 'rutel', 'year']
    """
    return frozenset(normalize_answer(text).split()) - STOPWORDS


def overlap_filter(triples: Sequence[Triple], question: str | None, entity_id: int, k: int) -> list[Triple]:
    """The deterministic filter (ours): the ``k`` triples whose relation and other entity share the
    most content words with the question, ties in triple order; no question keeps the first ``k``.

    Example:
        >>> ts = [Triple("A", "citizen of", "P", 1, 3), Triple("A", "born in", "D", 1, 2)]
        >>> [t.relation for t in overlap_filter(ts, "Where was A born?", 1, 1)]
        ['born in']
    """
    if not question:
        return list(triples[:k])
    words = content_words(question)

    def score(t: Triple) -> int:
        other = t.tail if t.head_id == entity_id else t.head
        return len(words & (content_words(t.relation) | content_words(other)))
    order = sorted(range(len(triples)), key=lambda i: (-score(triples[i]), i))
    return [triples[i] for i in order[:k]]


LLM_FILTER_PROMPT = (
    "Question: {question}\nTriples about {entity}:\n{triples}\n"
    "Which triples help answer the question? Write their numbers, comma-separated, or none.\n"
)


def llm_filter_prompt(triples: Sequence[Triple], question: str, entity: str) -> str:
    """The filter module's prompt (wording ours): the question and the numbered triples."""
    listed = "\n".join(f"{i + 1}. {t}" for i, t in enumerate(triples))
    return LLM_FILTER_PROMPT.format(question=question, entity=entity, triples=listed)


def parse_selection(text: str, n: int, k: int) -> list[int]:
    """The 0-based triple indices a judge named (1..n, first mention order, at most ``k``).

    Example:
        >>> parse_selection("3, 1 and 3; 9", n=4, k=5)
        [2, 0]
    """
    out: list[int] = []
    for number in re.findall(r"\d+", text or ""):
        i = int(number) - 1
        if 0 <= i < n and i not in out:
            out.append(i)
    return out[:k]


class KGSearch(CacheCounters):
    """The KG search tool over a store's entities, aliases and edges (loaded once, in memory).

    ``judge`` (for ``filter='llm'``) maps a list of prompts to a list of texts, e.g. the policy's
    greedy generation. ``search`` is thread-safe (one lock), so the retrieval server can share it.
    """

    def __init__(self, db_or_con, max_triples: int = 4, min_similarity: float = 0.75, filter: str = "overlap",
                 judge: Callable[[list[str]], list[str]] | None = None, cache: bool = True):
        if filter not in FILTERS:
            raise ValueError(f"method.kg_filter: unknown filter {filter!r}; expected one of {list(FILTERS)}")
        if filter == "llm" and judge is None:
            raise ValueError("method.kg_filter='llm' needs a judge (a loaded policy that generates)")
        if int(max_triples) < 1:
            raise ValueError(f"method.kg_max_triples must be >= 1, got {max_triples!r}")
        self.max_triples, self.filter, self.judge, self.use_cache = int(max_triples), filter, judge, cache
        self.min_similarity = float(min_similarity)
        own = isinstance(db_or_con, (str, Path))
        if own and not Path(db_or_con).exists():
            raise FileNotFoundError(f"no store at {db_or_con}")
        from workbench import store

        con = store.connect(db_or_con, read_only=True) if own else db_or_con
        try:
            self._load(con, min_similarity)
        finally:
            if own:
                con.close()
        # (key, hit) by key, at most CACHE_BYTES (kg_cached_bytes each), the least recently used out first
        self._cache = LRUCache(CACHE_BYTES, getsizeof=kg_cached_bytes)
        self._lock = threading.Lock()
        self.hits = self.misses = 0

    @property
    def settings(self) -> dict:
        """This tool's settings, as :func:`tool_settings` names them."""
        return {key: getattr(self, key) for key in SETTINGS}

    def _load(self, con, min_similarity: float) -> None:
        self.titles = dict(con.execute("SELECT entity_id, title FROM entities").fetchall())
        aliases = con.execute("SELECT entity_id, alias FROM aliases WHERE alias IS NOT NULL").fetchall()
        self.matcher = EntityMatcher([(e, t, True) for e, t in self.titles.items()]
                                     + [(e, a, False) for e, a in aliases if e in self.titles], min_similarity)
        edges = con.execute("SELECT src, dst, relation FROM edges WHERE relation IS NOT NULL "
                            "ORDER BY src, relation, dst").fetchnumpy()
        self.n_edges = len(edges["src"])
        self.relations, codes = np.unique(np.asarray(edges["relation"], dtype=object), return_inverse=True)
        self.src, self.dst, self.rel = (np.asarray(edges["src"], dtype=np.int64),
                                        np.asarray(edges["dst"], dtype=np.int64), codes.astype(np.int32))
        # incoming edges: the same rows sorted by (dst, relation, src)
        self.by_dst = np.lexsort((self.src, self.rel, self.dst)) if self.n_edges else np.zeros(0, dtype=np.int64)
        self.dst_sorted = self.dst[self.by_dst]

    def triples(self, entity_id: int) -> list[Triple]:
        """The entity's outgoing then incoming triples, at most ``MAX_CANDIDATES``."""
        lo, hi = np.searchsorted(self.src, [entity_id, entity_id + 1])
        rows = list(range(lo, hi))
        lo, hi = np.searchsorted(self.dst_sorted, [entity_id, entity_id + 1])
        rows += [int(i) for i in self.by_dst[lo:hi] if self.src[i] != entity_id]  # a self-loop once
        return [Triple(self.titles.get(int(self.src[i]), str(self.src[i])), str(self.relations[self.rel[i]]),
                       self.titles.get(int(self.dst[i]), str(self.dst[i])), int(self.src[i]), int(self.dst[i]))
                for i in rows[:MAX_CANDIDATES]]

    def _lookup(self, query: str) -> KGHit:
        found = self.matcher.match(query)
        if found is None:
            return KGHit(query, None, None, 0.0)
        entity, score = found
        return KGHit(query, entity, self.titles[entity], score, tuple(self.triples(entity)))

    def search(self, queries: list[str], questions: Sequence[str | None] | None = None,
               k: int | None = None) -> list[KGHit]:
        """One :class:`KGHit` per query: the linked entity and its ``k`` (default ``max_triples``)
        filtered triples; ``questions`` (one per query, or None) are what the filter judges against."""
        if isinstance(queries, str) or not all(isinstance(q, str) for q in queries):
            raise ValueError("queries must be a list of strings (wrap a single entity in a list)")
        questions = list(questions) if questions is not None else [None] * len(queries)
        if len(questions) != len(queries):
            raise ValueError(f"questions: expected one per query ({len(queries)}), got {len(questions)}")
        k = self.max_triples if k is None else int(k)
        if k < 1:
            raise ValueError(f"k must be at least 1, got {k!r}")
        with self._lock:
            keys = [(" ".join(q.split()), question if self.filter != "none" else None, k)
                    for q, question in zip(queries, questions)]
            todo = list(dict.fromkeys(key for key in keys if not (self.use_cache and key in self._cache)))
            self.misses += len(todo)
            self.hits += len(keys) - len(todo)
            found = dict(zip(todo, self._filtered([self._lookup(q) for q, _, _ in todo], [t[1] for t in todo], k)))
            known = {key: self._cache[key][1] for key in keys if key not in found}  # refreshes their recency
            if self.use_cache:
                for key, hit in found.items():
                    if kg_cached_bytes((key, hit)) <= self._cache.maxsize:
                        self._cache[key] = (key, hit)
            return [found[key] if key in found else known[key] for key in keys]

    def _filtered(self, hits: list[KGHit], questions: list[str | None], k: int) -> list[KGHit]:
        if self.filter == "none":
            return [KGHit(h.query, h.entity_id, h.title, h.score, h.triples[:k]) for h in hits]
        if self.filter == "overlap":
            return [KGHit(h.query, h.entity_id, h.title, h.score,
                          tuple(overlap_filter(h.triples, q, h.entity_id, k)) if h.entity_id is not None else ())
                    for h, q in zip(hits, questions)]
        asks = [i for i, h in enumerate(hits) if h.triples]
        answers = self.judge([llm_filter_prompt(hits[i].triples, questions[i] or hits[i].query, hits[i].title)
                              for i in asks]) if asks else []
        out = list(hits)
        for i, text in zip(asks, answers):
            h = hits[i]
            out[i] = KGHit(h.query, h.entity_id, h.title, h.score,
                           tuple(h.triples[j] for j in parse_selection(text, len(h.triples), k)))
        return out

    render = staticmethod(render)


# ------------------------------------------------------------- a hit as /kg_search sends it

def hit_json(hit: KGHit) -> dict:
    """A KGHit as ``/kg_search`` sends it (triples as [head, relation, tail, head_id, tail_id])."""
    return {"query": hit.query, "entity_id": hit.entity_id, "title": hit.title, "score": hit.score,
            "triples": [[t.head, t.relation, t.tail, t.head_id, t.tail_id] for t in hit.triples]}


def hit_of_json(item: dict) -> KGHit:
    """The inverse of :func:`hit_json`.

    Example:
        >>> h = KGHit("A", 1, "A", 1.0, (Triple("A", "born in", "B", 1, 2),))
        >>> hit_of_json(hit_json(h)) == h
        True
    """
    if not isinstance(item, dict) or "triples" not in item or "query" not in item:
        raise ValueError(f"expected a KG hit with 'query' and 'triples', got {str(item)[:200]!r}")
    entity = item.get("entity_id")
    return KGHit(item["query"], None if entity is None else int(entity), item.get("title"), float(item.get("score", 0.0)),
                 tuple(Triple(str(h), str(r), str(t), int(hi), int(ti)) for h, r, t, hi, ti in item["triples"]))
