"""TinyWorld: a seeded fictional encyclopedia, the embedded knowledge source (issue 2).

Everything runs offline and no pretrained model can answer from memory: entity names are invented
from syllables (``workbench.kg.names``). ``generate_world(n, seed)`` draws

* entities of nine types (country, city, river, university, company, person, film, book, band)
  plus the noise the paper's chain filters reject (seed 000, section 3.2): year pages ("1987"),
  list pages ("List of films directed by X"), nationality adjectives ("Velorian") and bands with
  very short names ("Zu"); every noise page is reachable by labelled edges;
* typed facts for the relations in ``RELATIONS`` (label, domain, range, functional); functional
  relations have exactly one object per subject and facts are consistent (a capital lies in its
  country, a river flows through cities of the country it rises in, ...);
* a Wikipedia-style article per entity: paragraph 0 opens with a lead sentence stating the type,
  then one sentence per fact in varied phrasing (several templates per relation), distractor and
  filler sentences; every mention of another entity is an anchor ``[start, stop)`` into the
  paragraph, exactly as KILT records hyperlinks. A fact sentence's anchor is also an edge with the
  relation label; a distractor mention is an anchor only.

Search strategy matters: people share given names and surnames ("Kavimo Rutel", "Kavimo Dasen"),
rivers and universities borrow city names ("Dasu River", "University of Dasu"), companies borrow
founders' surnames, and distractor sentences mention unrelated entities of the answer's type.

Articles are built column-wise (Arrow string kernels, numpy offsets, one string pool indexed by
every template field). Measured on this 2-core machine while shared (load 6-10): 200 entities
0.09 s, 2,000 entities 0.10 s, 1,000,000 entities 36-70 s wall (16 CPU-seconds); writing the
million-entity world into DuckDB adds about 32 s wall (14 CPU-seconds).

Example:
    >>> w = generate_world(200, seed=0)
    >>> w.counts()["entities"] >= 190, w.relations.num_rows >= 20
    (True, True)
    >>> a = w.anchors.slice(0, 1).to_pylist()[0]
    >>> text = w.passage_text(a["src_entity"], a["paragraph"])
    >>> text[a["start"]:a["stop"]] == a["text"]
    True
"""

from __future__ import annotations

import string
import time
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from workbench.kg import names
from workbench.limits import WORLD_BYTES_PER_ENTITY, available_memory, check_memory, check_seed

SOURCE = "tinyworld"

# Entity types in id order (ids are contiguous per type); noise types last.
TYPES = ("country", "nationality", "city", "river", "university", "company", "person", "film",
         "book", "band", "year", "list")
KINDS = ("entity", "year", "list", "nationality", "short")  # entities.kind
REAL_TYPES = ("country", "city", "river", "university", "company", "person", "film", "book", "band")
# Share of the entity budget per type (normalised; years are counted apart).  # ours
TYPE_SHARES = {"country": 0.012, "nationality": 0.012, "city": 0.08, "river": 0.03,
               "university": 0.03, "company": 0.06, "person": 0.40, "film": 0.13, "book": 0.11,
               "band": 0.05, "list": 0.015}
MIN_COUNTS = {"country": 3, "city": 6, "river": 2, "university": 2, "company": 3, "person": 20,
              "film": 4, "book": 3, "band": 2, "list": 1}
MIN_ENTITIES = 100

OCCUPATIONS = ("director", "actor", "writer", "musician", "entrepreneur", "scientist", "athlete")
OCCUPATION_P = (0.10, 0.20, 0.15, 0.20, 0.10, 0.15, 0.10)  # ours
OCCUPATION_WORDS = {
    "director": ("film director", "filmmaker"), "actor": ("actor", "film actor"),
    "writer": ("novelist", "writer"), "musician": ("musician", "singer"),
    "entrepreneur": ("entrepreneur", "businessperson"),
    "scientist": ("physicist", "chemist", "biologist"), "athlete": ("athlete", "footballer")}

# Noise and ambiguity knobs (ours; exposed through generate_world keyword arguments).
DEFAULTS = dict(
    short_band_rate=0.15,      # bands with a very short name (kind 'short')
    city_river_rate=0.25,      # rivers named after a city they flow through ("Dasu River")
    city_university_rate=0.3,  # "University of <city>"
    founder_company_rate=0.3,  # "<founder surname> Motors"
    alias_mention_rate=0.25,   # a mention uses the alias instead of the title
    confusion_rate=0.5,        # "X is not to be confused with Y" (a namesake where one exists)
    comparison_rate=0.6,       # a distractor mention of an unrelated entity
)

_REF = {"country": "The country", "city": "The city", "river": "The river",
        "university": "The university", "company": "The company", "film": "The film",
        "book": "The book", "band": "The band"}


@dataclass(frozen=True)
class Relation:
    """A typed relation; its sentences sit in the article of the subject (the edge's ``src``).

    Templates use ``{S}`` (sentence-initial reference to the subject: its title, or "The film",
    or a person's surname), ``{T}`` (the subject's title) and ``{O}`` (the object, an anchor).
    ``more`` phrases the second and later objects of a non-functional relation.
    """

    label: str
    domain: str
    range: str
    functional: bool
    templates: tuple[str, ...]
    paragraph: int = 0
    more: tuple[str, ...] = ()


def _r(label, domain, range_, functional, templates, paragraph=0, more=()):
    return Relation(label, domain, range_, functional, tuple(templates), paragraph, tuple(more))


RELATIONS: tuple[Relation, ...] = (
    # country
    _r("capital", "country", "city", True, (
        "The capital of {T} is {O}.", "Its capital and largest city is {O}.",
        "{O} serves as the capital of {T}.")),
    _r("demonym", "country", "nationality", True, (
        "People from {T} are called {O}.", "The demonym of {T} is {O}.")),
    _r("borders", "country", "country", False, (
        "{S} shares a border with {O}.", "{S} borders {O}."), 1,
        ("It also borders {O}.", "{O} lies along its frontier as well.")),
    _r("contains", "country", "city", False, (
        "{O} is one of the major cities of {T}.", "Other cities in {T} include {O}."), 1,
        ("{O} is another city of the country.", "It also contains {O}.")),
    # nationality and list pages (their lead sentences state these)
    _r("demonym of", "nationality", "country", True, (
        "{T} refers to people or things from {O}.", "{T} is the adjective for people from {O}.")),
    _r("filmography of", "list", "person", True, (
        "This is a list of films directed by {O}.", "The following films were directed by {O}.")),
    _r("includes", "list", "film", False, ("It includes {O}.", "Entries include {O}."), 0,
       ("It also includes {O}.", "{O} is listed as well.")),
    # city
    _r("located in", "city", "country", True, (
        "{S} is located in {O}.", "{S} lies in {O}.", "It is a city in {O}.")),
    _r("capital of", "city", "country", True, (
        "{S} is the capital of {O}.", "It has long been the capital of {O}.")),
    _r("birthplace of", "city", "person", False, (
        "{O} was born in {T}.", "Notable natives of {T} include {O}."), 1,
        ("{O} was also born there.", "Another native of the city is {O}.")),
    # river
    _r("rises in", "river", "country", True, (
        "{S} rises in {O}.", "The source of the river lies in {O}.")),
    _r("flows through", "river", "city", False, (
        "{S} flows through {O}.", "The river passes through {O}."), 1,
        ("It also flows through {O}.", "Further on, it passes {O}.")),
    # university
    _r("situated in", "university", "city", True, (
        "{S} is situated in {O}.", "The university's campus is in {O}.",
        "It is based in the city of {O}.")),
    _r("established in year", "university", "year", True, (
        "{S} was established in {O}.", "The university was founded in {O}.")),
    # company
    _r("headquartered in", "company", "city", True, (
        "{S} is headquartered in {O}.", "Its headquarters are in {O}.",
        "The company is based in {O}.")),
    _r("founded by", "company", "person", True, (
        "{S} was founded by {O}.", "The company was started by {O}.", "Its founder is {O}.")),
    _r("founded in year", "company", "year", True, (
        "{S} was founded in {O}.", "The company was established in {O}.")),
    # person
    _r("nationality", "person", "nationality", True, (
        "{T} is a {O} {occ}.", "{T} was a {O} {occ}.")),
    _r("born in", "person", "city", True, (
        "{S} was born in the city of {O}.", "{S} is a native of {O}.", "{S} was born in {O}.")),
    _r("born in year", "person", "year", True, (
        "{S} was born in the year {O}.", "{S} was born in {O}.")),
    _r("citizen of", "person", "country", True, (
        "{S} is a citizen of {O}.", "{S} holds citizenship of {O}.")),
    _r("educated at", "person", "university", True, (
        "{S} studied at {O}.", "{S} was educated at {O}.", "{S} graduated from {O}.")),
    _r("member of", "person", "band", True, (
        "{S} is a member of the band {O}.", "{S} plays in {O}.", "{S} joined {O}.")),
    _r("employed by", "person", "company", True, (
        "{S} works for {O}.", "{S} is employed by {O}.", "{S} took a position at {O}."), 1),
    _r("director of", "person", "film", False, (
        "{S} directed {O}.", "Films directed by {S} include {O}."), 1,
        ("{S} also directed {O}.", "Another film by {T} is {O}.")),
    _r("filmography", "person", "list", True, (
        "A complete list is given in {O}.", "See also {O}."), 1),
    _r("author of", "person", "book", False, (
        "{S} wrote {O}.", "The books of {T} include {O}."), 1,
        ("{S} also wrote {O}.", "Another book by {T} is {O}.")),
    _r("founder of", "person", "company", False, (
        "{S} founded {O}.", "{S} is the founder of {O}."), 1,
        ("{S} also founded {O}.",)),
    _r("acted in", "person", "film", False, (
        "{S} appeared in {O}.", "{S} played a leading role in {O}."), 1,
        ("{S} also appeared in {O}.",)),
    # film
    _r("directed by", "film", "person", True, (
        "{S} was directed by {O}.", "It is directed by {O}.", "The film's director is {O}.")),
    _r("produced by", "film", "company", True, (
        "{S} was produced by {O}.", "The film was a production of {O}.")),
    _r("released in year", "film", "year", True, (
        "{S} was released in {O}.", "The film premiered in {O}.", "It came out in {O}.")),
    _r("starring", "film", "person", False, (
        "{S} stars {O}.", "The cast of {T} includes {O}."), 1,
        ("{O} also appears in the film.", "The cast also includes {O}.")),
    _r("filmed in", "film", "city", True, (
        "{S} was shot in {O}.", "Filming took place in {O}."), 1),
    _r("listed in", "film", "list", True, ("It is included in the {O}.", "See also {O}."), 1),
    # book
    _r("written by", "book", "person", True, (
        "{S} was written by {O}.", "It is a novel by {O}.", "The author of the book is {O}.")),
    _r("published by", "book", "company", True, (
        "{S} was published by {O}.", "Its publisher is {O}.")),
    _r("published in year", "book", "year", True, (
        "{S} was published in {O}.", "The book first appeared in {O}.")),
    _r("set in", "book", "city", True, (
        "{S} is set in {O}.", "The story takes place in {O}."), 1),
    # band
    _r("formed in", "band", "city", True, (
        "{S} was formed in the city of {O}.", "The band comes from {O}.")),
    _r("formed in year", "band", "year", True, (
        "{S} was formed in {O}.", "The band got together in {O}.")),
    _r("signed to", "band", "company", True, (
        "{S} is signed to {O}.", "The band records for {O}."), 1),
    _r("has member", "band", "person", False, (
        "Its members include {O}.", "{O} is a member of the band."), 1,
        ("{O} also plays in the band.", "Another member is {O}.")),
)
RELATION_INDEX = {r.label: i for i, r in enumerate(RELATIONS)}
# Relations stated inside a type's lead sentence (one object per subject).
LEAD_RELATION = {"person": "nationality", "list": "filmography of", "nationality": "demonym of"}

LEADS = {
    "country": ("{T} is a country.", "{T} is a sovereign state.", "{T} is a small country."),
    "city": ("{T} is a city.", "{T} is a historic city.", "{T} is a city and regional centre."),
    "river": ("{T} is a river.", "{T} is a long river."),
    "university": ("{T} is a public university.", "{T} is a research university."),
    "company": ("{T} is a company.", "{T} is a private company."),
    "film": ("{T} is a film.", "{T} is a feature film.", "{T} is a drama film."),
    "book": ("{T} is a novel.", "{T} is a book.", "{T} is a historical novel."),
    "band": ("{T} is a band.", "{T} is a rock band.", "{T} is a musical group."),
    "year": ("{T} was a year.", "{T} was a year of the common era."),
}
LEADS_WITH_ALIAS = {
    "country": ("{T}, officially the {A}, is a country.", "{T}, or the {A}, is a sovereign state."),
    "company": ("{T} (commonly {A}) is a company.", "{T}, known as {A}, is a private company."),
    "person": ("{T} (also credited as {A}) is a {O} {occ}.",),
}
YEAR_EVENTS = ("In {T}, {O} was released.", "{O} premiered in {T}.")
CONFUSIONS = ("{S} is not to be confused with {O}.", "Not to be confused with {O}.")
COMPARISONS = ("{S} is often compared with {O}.", "A later survey discusses {T} together with {O}.",
               "{O} is mentioned in some accounts of {T}.")
FILLERS = ("{S} has been the subject of several studies.", "Little is recorded about the early history of {T}.",
           "{S} has received wide attention in recent decades.", "Opinions about {T} remain divided.")
FILM_TITLES = ("{w}", "The {w}", "The {w} Affair", "Return to {w}", "{w} Rising", "Night of {w}",
               "The Last {w}")
BOOK_TITLES = ("{w}", "The Book of {w}", "{w} and the Sea", "The {w} Letters", "A Winter in {w}",
               "The House of {w}", "Songs of {w}")
BAND_TITLES = ("The {w}", "{w}", "{w} Collective")
UNIVERSITY_TITLES = ("{w} University", "University of {w}", "{w} Institute of Technology")
COMPANY_SUFFIXES = ("Industries", "Motors", "Pictures", "Press", "Records", "Group", "Systems", "Labs")
COUNTRY_FORMS = ("Republic", "Kingdom", "Federation")
ALIAS_MENTION_TYPES = ("person", "company")  # types whose alias may stand for the title in a mention


@dataclass
class World:
    """A generated world: Arrow tables with exactly the store's columns (see ``workbench.store``)."""

    seed: int
    entities: pa.Table   # entity_id, title, type, kind, source
    passages: pa.Table   # passage_id, entity_id, paragraph, text
    anchors: pa.Table    # src_entity, paragraph, start, stop, text, dst_entity
    relations: pa.Table  # label, domain, range, functional
    edges: pa.Table      # src, dst, relation, source
    aliases: pa.Table    # entity_id, alias
    seconds: float = 0.0

    def counts(self) -> dict:
        """Row counts per table, e.g. ``{"entities": 201, "passages": 380, ...}``."""
        return {name: getattr(self, name).num_rows for name in
                ("entities", "passages", "anchors", "relations", "edges", "aliases")}

    def passage_text(self, entity_id: int, paragraph: int) -> str:
        """The text of one paragraph (slow path for tests and notebooks)."""
        p = self.passages
        mask = pc.and_(pc.equal(p["entity_id"], entity_id), pc.equal(p["paragraph"], paragraph))
        return p.filter(mask)["text"][0].as_py()


# ----------------------------------------------------------------------------- helpers

def _counts(n: int) -> dict[str, int]:
    n_years = int(np.clip(n // 40, 10, 224))
    base = n - n_years
    total = sum(TYPE_SHARES.values())
    counts = {t: max(MIN_COUNTS.get(t, 0), int(round(base * s / total))) for t, s in TYPE_SHARES.items()}
    counts["nationality"] = counts["country"]
    counts["city"] = max(counts["city"], 2 * counts["country"])
    counts["year"] = n_years
    return counts


def _pick_in_group(groups: np.ndarray, n_groups: int, query: np.ndarray, rng) -> np.ndarray:
    """For each query group, a uniformly random item index whose group it is (-1 if none)."""
    order = np.argsort(groups, kind="stable")
    sizes = np.bincount(groups, minlength=n_groups)
    starts = np.cumsum(sizes) - sizes
    size = sizes[query]
    pos = starts[query] + (rng.random(len(query)) * np.maximum(size, 1)).astype(np.int64)
    return np.where(size > 0, order[np.minimum(pos, len(order) - 1)], -1)


def _rank_in_group(keys: np.ndarray, rng) -> np.ndarray:
    """A random rank 0, 1, ... of each row among the rows sharing its key."""
    order = np.lexsort((rng.random(len(keys)), keys))
    sk = keys[order]
    new = np.ones(len(sk), dtype=bool)
    new[1:] = sk[1:] != sk[:-1]
    first = np.maximum.accumulate(np.where(new, np.arange(len(sk)), 0))
    rank = np.empty(len(keys), dtype=np.int64)
    rank[order] = np.arange(len(sk)) - first
    return rank


def _dedupe_pairs(src: np.ndarray, dst: np.ndarray, n: int):
    _, keep = np.unique(src.astype(np.int64) * n + dst, return_index=True)
    keep.sort()
    return src[keep], dst[keep]


def _first_unique(titles: list[str], fallback: list[str], taken: set[str]) -> list[str]:
    """Keep each preferred title unless it is already taken; else use the fallback title."""
    out = []
    for t, f in zip(titles, fallback):
        t = f if t is None or t in taken else t
        taken.add(t)
        out.append(t)
    return out


@lru_cache(maxsize=None)
def _parse(template: str) -> tuple[tuple[str, str | None], ...]:
    return tuple((lit, field) for lit, field, _, _ in string.Formatter().parse(template))


class _Doc:
    """Accumulates sentences column-wise: (article, paragraph, order, text) and their mentions.

    Template fields are integer indices into one string ``pool`` (titles, aliases, ...), so each
    field costs one Arrow ``take`` and its lengths come from a precomputed table.
    """

    ORDER_BITS = 13  # sentence order keys stay below 2**13

    def __init__(self, rng: np.random.Generator, pool: pa.Array):
        self.rng, self.pool = rng, pool
        self.pool_len = pc.binary_length(pool).to_numpy(zero_copy_only=False).astype(np.int64)
        self.rows = 0
        self.key, self.text = [], []
        self.m_row, self.m_start, self.m_len, self.m_dst, self.m_pool, self.m_rel = [], [], [], [], [], []

    def add(self, templates, ent, para, order, fields: dict, dst=None, rel: int = -1):
        """One sentence per row of ``ent``, each from a template drawn by the seed.

        ``fields`` maps template fields to pool indices aligned with ``ent``; ``{O}`` is a mention
        of ``dst`` (an anchor, and an edge labelled with relation ``rel`` when ``rel >= 0``).
        """
        n = len(ent)
        if n == 0:
            return
        choice = self.rng.integers(0, len(templates), n)
        key = (np.asarray(ent, np.int64) * 4 + para) << self.ORDER_BITS
        key = key + np.broadcast_to(np.asarray(order, dtype=np.int64), (n,))
        for t, template in enumerate(templates):
            idx = np.flatnonzero(choice == t)
            if len(idx) == 0:
                continue
            parts, cur, o_start = [], np.zeros(len(idx), dtype=np.int64), None
            for lit, field in _parse(template):
                if lit:
                    parts.append(pa.scalar(lit))
                    cur += len(lit)
                if field:
                    at = fields[field][idx]
                    if field == "O":
                        o_start, o_at = cur.copy(), at
                    parts.append(self.pool.take(pa.array(at)))
                    cur += self.pool_len[at]
            self.text.append(pc.binary_join_element_wise(*parts, pa.scalar("")))
            self.key.append(key[idx])
            if o_start is not None:
                self.m_row.append(self.rows + np.arange(len(idx)))
                self.m_start.append(o_start)
                self.m_len.append(self.pool_len[o_at])
                self.m_pool.append(o_at)
                self.m_dst.append(dst[idx])
                self.m_rel.append(np.full(len(idx), rel, dtype=np.int16))
            self.rows += len(idx)

    def assemble(self):
        """Sort sentences into paragraphs; return (passages parts, anchors parts, edge parts)."""
        key = np.concatenate(self.key)
        perm = np.argsort(key, kind="stable")
        key = key[perm]
        ent, para = key >> (self.ORDER_BITS + 2), (key >> self.ORDER_BITS) & 3
        text = pa.chunked_array(self.text, pa.string()).cast(pa.large_string()).combine_chunks()
        text = text.take(pa.array(perm))
        lengths = pc.binary_length(text).to_numpy(zero_copy_only=False).astype(np.int64)
        para_key = key >> self.ORDER_BITS
        new = np.ones(len(key), dtype=bool)
        new[1:] = para_key[1:] != para_key[:-1]
        starts = np.flatnonzero(new)
        group = np.cumsum(new) - 1
        excl = np.cumsum(lengths + 1) - (lengths + 1)  # +1: the space between sentences
        offset = excl - excl[starts][group]
        lists = pa.LargeListArray.from_arrays(pa.array(np.append(starts, len(key)), pa.int64()), text)
        passage_text = pc.binary_join(lists, pa.scalar(" ", pa.large_string()))

        pos = np.empty(len(perm), dtype=np.int64)
        pos[perm] = np.arange(len(perm))
        m_pos = pos[np.concatenate(self.m_row)]
        a_order = np.argsort(m_pos, kind="stable")  # at most one mention per sentence
        m_pos = m_pos[a_order]
        m_start = offset[m_pos] + np.concatenate(self.m_start)[a_order]
        m_stop = m_start + np.concatenate(self.m_len)[a_order]
        m_dst = np.concatenate(self.m_dst)[a_order]
        m_rel = np.concatenate(self.m_rel)[a_order]
        m_text = self.pool.take(pa.array(np.concatenate(self.m_pool)[a_order]))
        anchors = dict(src_entity=ent[m_pos], paragraph=para[m_pos].astype(np.int32),
                       start=m_start.astype(np.int32), stop=m_stop.astype(np.int32),
                       text=m_text, dst_entity=m_dst.astype(np.int64))
        passages = dict(entity_id=ent[starts], paragraph=para[starts].astype(np.int32), text=passage_text)
        is_edge = m_rel >= 0
        edges = (ent[m_pos][is_edge], m_dst[is_edge], m_rel[is_edge])
        return passages, anchors, edges


# ----------------------------------------------------------------------------- generation
#
# One generator draws everything, in a fixed order: years; facts (geography, people,
# organisations and works, list pages, inverse mentions); names; article sentences (leads, facts,
# year pages, distractors). The steps below share that generator, so moving a single draw changes
# every world: tests/test_tinyworld.py pins the smoke world's content hash.

def generate_world(n_entities: int, seed: int, **knobs) -> World:
    """Generate a TinyWorld of about ``n_entities`` entities, deterministically from ``seed``.

    ``knobs`` override the noise/ambiguity rates in ``DEFAULTS`` (e.g. ``short_band_rate=0.2``).

    Example:
        >>> w1, w2 = generate_world(150, 3), generate_world(150, 3)
        >>> w1.passages.equals(w2.passages) and w1.anchors.equals(w2.anchors)
        True
    """
    if not isinstance(n_entities, (int, np.integer)) or n_entities < MIN_ENTITIES:
        raise ValueError(f"generate_world: n_entities must be an integer >= {MIN_ENTITIES}, got {n_entities!r}")
    check_seed(seed, "--seed / world.seed")
    check_memory(int(n_entities) * WORLD_BYTES_PER_ENTITY, f"--entities / world.n_entities {int(n_entities):,}",
                 f"ask for at most about {available_memory() // WORLD_BYTES_PER_ENTITY:,} entities")
    unknown = set(knobs) - set(DEFAULTS)
    if unknown:
        raise ValueError(f"generate_world: unknown knob(s) {sorted(unknown)}; expected some of {sorted(DEFAULTS)}")
    k = {**DEFAULTS, **knobs}
    t0 = time.perf_counter()
    rng = np.random.default_rng(seed)
    cnt = _counts(int(n_entities))
    years = np.sort(rng.choice(np.arange(1800, 2024), cnt["year"], replace=False))
    facts, occ = _draw_facts(rng, cnt)
    cnt = {**cnt, "list": len(facts.dst("filmography of"))}  # only prolific directors get a list page
    named = _draw_names(rng, k, cnt, facts, years)
    layout = _lay_out(cnt, named, facts)
    doc = _write_articles(rng, k, layout, occ, named)
    return World(seed, **_tables(layout, doc), seconds=time.perf_counter() - t0)


# ----- facts (local indices per type; global ids are assigned once the list pages are known)

class _Facts(dict):
    """Drawn facts: relation label -> (domain type, src, range type, dst), local indices per type."""

    def add(self, label: str, src, dst) -> None:
        rel = RELATIONS[RELATION_INDEX[label]]
        self[label] = (rel.domain, np.asarray(src, np.int64), rel.range, np.asarray(dst, np.int64))

    def src(self, label: str) -> np.ndarray:
        return self[label][1]

    def dst(self, label: str) -> np.ndarray:
        return self[label][3]


# Inverse relations, stated in the object's article and capped per object as an article would
# (ours): (label, the relation it inverts, at most this many mentions per object).
INVERSE_MENTIONS = (("director of", "directed by", 3), ("author of", "written by", 3),
                    ("founder of", "founded by", 3), ("acted in", "starring", 3),
                    ("birthplace of", "born in", 2), ("has member", "member of", 4))


def _draw_facts(rng, cnt: dict) -> tuple[_Facts, np.ndarray]:
    """Every fact of the world and each person's occupation (an index into ``OCCUPATIONS``)."""
    facts = _Facts()
    city_country = _draw_geography(rng, cnt, facts)
    occ, birth_year = _draw_people(rng, cnt, facts, city_country)
    _draw_organisations_and_works(rng, cnt, facts, occ, birth_year)
    _draw_list_pages(rng, cnt, facts)
    for label, of, cap in INVERSE_MENTIONS:
        keep = _rank_in_group(facts.dst(of), rng) < cap
        facts.add(label, facts.dst(of)[keep], facts.src(of)[keep])
    return facts, occ


def _draw_geography(rng, cnt: dict, facts: _Facts) -> np.ndarray:
    """Countries, cities, rivers and universities; returns each city's country."""
    C, Ci, R, U, Y = (cnt[t] for t in ("country", "city", "river", "university", "year"))
    city_country = np.concatenate([np.arange(C), rng.integers(0, C, Ci - C)])
    rng.shuffle(city_country)
    per_country = np.bincount(city_country, minlength=C)
    capital = np.argsort(city_country, kind="stable")[np.cumsum(per_country) - per_country]  # first city
    facts.add("located in", np.arange(Ci), city_country)
    facts.add("capital of", capital, np.arange(C))
    facts.add("capital", np.arange(C), capital)
    facts.add("demonym", np.arange(C), np.arange(C))
    facts.add("demonym of", np.arange(C), np.arange(C))
    non_capital = np.setdiff1d(np.arange(Ci), capital)
    keep = _rank_in_group(city_country[non_capital], rng) < 3
    facts.add("contains", city_country[non_capital][keep], non_capital[keep])
    b_src = np.repeat(np.arange(C), rng.integers(1, 3, C))
    b_dst = (b_src + 1 + rng.integers(0, C - 1, len(b_src))) % C
    facts.add("borders", *_dedupe_pairs(b_src, b_dst, C))
    river_country = rng.integers(0, C, R)
    r_src = np.repeat(np.arange(R), rng.integers(1, 4, R))
    r_dst = _pick_in_group(city_country, C, river_country[r_src], rng)
    facts.add("rises in", np.arange(R), river_country)
    facts.add("flows through", *_dedupe_pairs(r_src, r_dst, Ci))
    facts.add("situated in", np.arange(U), rng.integers(0, Ci, U))
    facts.add("established in year", np.arange(U), rng.integers(0, Y, U))
    return city_country


def _draw_people(rng, cnt: dict, facts: _Facts, city_country: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """People's occupations, births, citizenship, schools, bands and employers; returns each
    person's (occupation index, birth year as an index into the sorted years)."""
    C, Ci, U, K, P, Bd, Y = (cnt[t] for t in ("country", "city", "university", "company", "person", "band", "year"))
    occ = np.concatenate([np.arange(len(OCCUPATIONS)), rng.choice(len(OCCUPATIONS), P - len(OCCUPATIONS),
                                                                  p=OCCUPATION_P)])
    rng.shuffle(occ)
    by_occ = _by_occupation(occ)
    birth_city = rng.integers(0, Ci, P)
    citizen = np.where(rng.random(P) < 0.85, city_country[birth_city], rng.integers(0, C, P))
    birth_year = rng.integers(0, max(1, int(Y * 0.75)), P)
    facts.add("born in", np.arange(P), birth_city)
    facts.add("born in year", np.arange(P), birth_year)
    facts.add("citizen of", np.arange(P), citizen)
    facts.add("nationality", np.arange(P), citizen)
    edu = np.flatnonzero(rng.random(P) < 0.6)
    facts.add("educated at", edu, rng.integers(0, U, len(edu)))
    mus = by_occ["musician"]
    band_of = rng.integers(0, Bd, len(mus))
    band_of[: min(Bd, len(mus))] = rng.permutation(Bd)[: min(Bd, len(mus))]  # most bands get members
    facts.add("member of", mus, band_of)
    emp = np.concatenate([by_occ["scientist"], by_occ["actor"][rng.random(len(by_occ["actor"])) < 0.3]])
    emp.sort()
    facts.add("employed by", emp, rng.integers(0, K, len(emp)))
    return occ, birth_year


def _draw_organisations_and_works(rng, cnt: dict, facts: _Facts, occ: np.ndarray, birth_year: np.ndarray) -> None:
    """Companies, films, books and bands, each made by a person of the fitting occupation."""
    Ci, K, P, F, B, Bd, Y = (cnt[t] for t in ("city", "company", "person", "film", "book", "band", "year"))
    by_occ = _by_occupation(occ)
    facts.add("headquartered in", np.arange(K), rng.integers(0, Ci, K))
    founders = _pick(rng, by_occ["entrepreneur"], K)
    facts.add("founded by", np.arange(K), founders)
    facts.add("founded in year", np.arange(K), _year_after(rng, birth_year[founders], Y))
    film_dir = _pick(rng, by_occ["director"], F)
    facts.add("directed by", np.arange(F), film_dir)
    facts.add("produced by", np.arange(F), rng.integers(0, K, F))
    facts.add("released in year", np.arange(F), _year_after(rng, birth_year[film_dir], Y))
    facts.add("filmed in", np.arange(F), rng.integers(0, Ci, F))
    s_src = np.repeat(np.arange(F), rng.integers(1, 4, F))
    s_dst = _pick(rng, by_occ["actor"], len(s_src))
    facts.add("starring", *_dedupe_pairs(s_src, s_dst, P))
    book_author = _pick(rng, by_occ["writer"], B)
    facts.add("written by", np.arange(B), book_author)
    facts.add("published by", np.arange(B), rng.integers(0, K, B))
    facts.add("published in year", np.arange(B), _year_after(rng, birth_year[book_author], Y))
    facts.add("set in", np.arange(B), rng.integers(0, Ci, B))
    facts.add("formed in", np.arange(Bd), rng.integers(0, Ci, Bd))
    facts.add("formed in year", np.arange(Bd), rng.integers(0, Y, Bd))
    facts.add("signed to", np.arange(Bd), rng.integers(0, K, Bd))


def _draw_list_pages(rng, cnt: dict, facts: _Facts) -> None:
    """List pages ("List of films directed by X") for directors with at least two films, at most
    the planned number of lists, and the edges between lists, directors and films."""
    film_dir, P = facts.dst("directed by"), cnt["person"]
    prolific = np.flatnonzero(np.bincount(film_dir, minlength=P) >= 2)
    listed = np.sort(rng.permutation(prolific)[: cnt["list"]])
    L = len(listed)
    list_of = np.full(P, -1)
    list_of[listed] = np.arange(L)
    facts.add("filmography of", np.arange(L), listed)
    facts.add("filmography", listed, np.arange(L))
    in_list = np.flatnonzero(list_of[film_dir] >= 0)
    facts.add("listed in", in_list, list_of[film_dir[in_list]])
    facts.add("includes", list_of[film_dir[in_list]], in_list)


def _by_occupation(occ: np.ndarray) -> dict[str, np.ndarray]:
    """Occupation name -> the people (local indices) who have it."""
    return {o: np.flatnonzero(occ == i) for i, o in enumerate(OCCUPATIONS)}


def _pick(rng, items: np.ndarray, n: int) -> np.ndarray:
    """``n`` items drawn uniformly with replacement."""
    return items[rng.integers(0, len(items), n)]


def _year_after(rng, born: np.ndarray, n_years: int) -> np.ndarray:
    """A year index after each birth-year index: a work or company postdates its creator's birth."""
    return born + 1 + (rng.random(len(born)) * (n_years - 1 - born)).astype(np.int64)


# ----- names

@dataclass
class _Names:
    """Titles, aliases ('' for none) and sentence-initial references per type, local indices."""

    titles: dict[str, list[str]]
    alias: dict[str, list[str]]
    ref: dict[str, list[str]]
    given: np.ndarray | None = None  # each person's given-name index: people sharing one are namesakes
    n_given: int = 0


WORD_TYPES = ("country", "city", "river", "university", "company", "film", "book", "band")


def _draw_names(rng, k: dict, cnt: dict, facts: _Facts, years: np.ndarray) -> _Names:
    """Every entity's title (unique across the world), aliases and references."""
    words = _draw_words(rng, cnt)
    named, taken = _Names({}, {}, {}), set()
    _name_places(rng, k, cnt, words, facts, named, taken)
    _name_people(rng, cnt["person"], words, named, taken)
    _name_companies(rng, k, cnt["company"], words, facts, named, taken)
    _name_works(rng, k, cnt, words, named)
    named.titles["year"] = [str(y) for y in years]
    named.titles["list"] = [f"List of films directed by {named.titles['person'][p]}"
                            for p in facts.dst("filmography of")]
    return named


def _draw_words(rng, cnt: dict) -> dict[str, list[str]]:
    """Invented words, in one draw: one per entity of each ``WORD_TYPES`` type, then given names
    and surnames for the people."""
    P = cnt["person"]
    sizes = [cnt[t] for t in WORD_TYPES] + [max(10, int(1.5 * P ** 0.5)), max(20, P // 4)]
    words = names.make_words(sum(sizes), rng)
    parts = np.split(np.array(words, dtype=object), np.cumsum(sizes[:-1]))
    return dict(zip(WORD_TYPES + ("given", "surname"), (list(x) for x in parts)))


def _name_places(rng, k: dict, cnt: dict, words: dict, facts: _Facts, named: _Names, taken: set) -> None:
    """Countries (with an official-form alias), nationalities, cities, rivers and universities;
    rivers and universities may borrow a city's name."""
    C, R, U = cnt["country"], cnt["river"], cnt["university"]
    country_w, city_w = words["country"], words["city"]
    named.titles["country"] = country_w
    named.alias["country"] = [f"{COUNTRY_FORMS[i]} of {c}" for i, c in zip(rng.integers(0, 3, C), country_w)]
    named.titles["nationality"] = [names.demonym(c) for c in country_w]
    named.titles["city"] = city_w
    taken.update(country_w, named.titles["nationality"], city_w, named.alias["country"])

    r_src, r_dst = facts.src("flows through"), facts.dst("flows through")
    first_city = np.full(R, -1)
    fr = _rank_in_group(r_src, rng) == 0
    first_city[r_src[fr]] = r_dst[fr]
    pref = [f"{city_w[c]} River" if c >= 0 and u < k["city_river_rate"] else None
            for c, u in zip(first_city, rng.random(R))]
    named.titles["river"] = _first_unique(pref, [f"{x} River" for x in words["river"]], taken)
    pref = [f"University of {city_w[c]}" if u < k["city_university_rate"] else None
            for c, u in zip(facts.dst("situated in"), rng.random(U))]
    fallback = [UNIVERSITY_TITLES[i].format(w=x) for i, x in zip(rng.integers(0, 3, U), words["university"])]
    named.titles["university"] = _first_unique(pref, fallback, taken)


def _name_people(rng, n_people: int, words: dict, named: _Names, taken: set) -> None:
    """Distinct (given name, surname) pairs; the initialled form is an alias where unambiguous."""
    given_w, sur_w = words["given"], words["surname"]
    codes = _unique_draws(rng, n_people, len(given_w) * len(sur_w))
    given, sur = codes // len(sur_w), codes % len(sur_w)
    named.titles["person"] = [f"{given_w[g]} {sur_w[s]}" for g, s in zip(given, sur)]
    initials = [f"{given_w[g][0]}. {sur_w[s]}" for g, s in zip(given, sur)]
    named.alias["person"] = ["" if d else a for a, d in zip(initials, _duplicated(initials))]
    named.ref["person"] = [sur_w[s] for s in sur]
    named.given, named.n_given = given, len(given_w)
    taken.update(named.titles["person"])


def _name_companies(rng, k: dict, n_companies: int, words: dict, facts: _Facts, named: _Names,
                    taken: set) -> None:
    """"<word> <suffix>", or "<founder's surname> <suffix>" with the word as the alias."""
    suffix = rng.integers(0, len(COMPANY_SUFFIXES), n_companies)
    pref = [f"{named.ref['person'][f]} {COMPANY_SUFFIXES[s]}" if u < k["founder_company_rate"] else None
            for f, s, u in zip(facts.dst("founded by"), suffix, rng.random(n_companies))]
    fallback = [f"{x} {COMPANY_SUFFIXES[s]}" for x, s in zip(words["company"], suffix)]
    named.titles["company"] = _first_unique(pref, fallback, taken)
    named.alias["company"] = [x if t == f else "" for x, t, f in zip(words["company"], named.titles["company"],
                                                                     fallback)]


def _name_works(rng, k: dict, cnt: dict, words: dict, named: _Names) -> None:
    """Films, books and bands from title patterns; some bands get a very short name."""
    F, B, Bd = cnt["film"], cnt["book"], cnt["band"]
    named.titles["film"] = [FILM_TITLES[i].format(w=x)
                            for i, x in zip(rng.integers(0, len(FILM_TITLES), F), words["film"])]
    named.titles["book"] = [BOOK_TITLES[i].format(w=x)
                            for i, x in zip(rng.integers(0, len(BOOK_TITLES), B), words["book"])]
    short = rng.random(Bd) < k["short_band_rate"]
    short[0] = True  # at least one very short name in every world
    short_w = iter(names.short_names(int(short.sum()), rng))
    band_t = [BAND_TITLES[i].format(w=x) for i, x in zip(rng.integers(0, len(BAND_TITLES), Bd), words["band"])]
    named.titles["band"] = [next(short_w, t) if s else t for t, s in zip(band_t, short)]


# ----- global ids and the string pool

@dataclass
class _Layout:
    """Global ids (contiguous per type, in ``TYPES`` order) and one string pool indexed by every
    template field: titles [0, N), aliases [N, 2N), subject references [2N, 3N), occupation words."""

    cnt: dict[str, int]
    offset: dict[str, int]
    n: int
    pool: pa.Array
    has_alias: np.ndarray
    alias_mentionable: np.ndarray  # the alias may stand for the title in a mention
    type_code: np.ndarray  # index into TYPES per entity
    kind_code: np.ndarray  # index into KINDS per entity
    gid: dict[str, tuple[np.ndarray, np.ndarray]]  # relation label -> (global src, global dst)

    def ids(self, t: str) -> np.ndarray:
        """The global ids of one type."""
        return np.arange(self.offset[t], self.offset[t] + self.cnt[t])


def _lay_out(cnt: dict, named: _Names, facts: _Facts) -> _Layout:
    """Number the entities type by type and build the string pool; raises RuntimeError on a
    duplicate title."""
    offset, start = {}, 0
    for t in TYPES:
        offset[t] = start
        start += cnt[t]
    N = start
    all_titles = [x for t in TYPES for x in named.titles[t]]
    if len(set(all_titles)) != N:
        raise RuntimeError("TinyWorld: duplicate titles generated (a bug in the name scheme)")
    alias_list = [a for t in TYPES for a in named.alias.get(t, [""] * cnt[t])]
    ref_list = [r for t in TYPES for r in (named.ref["person"] if t == "person" else [_REF.get(t, "")] * cnt[t])]
    occ_words = [w_ for o in OCCUPATIONS for w_ in OCCUPATION_WORDS[o]]
    pool = pa.array(all_titles + alias_list + ref_list + occ_words, pa.string())
    has_alias = np.array([a != "" for a in alias_list])
    type_code = np.repeat(np.arange(len(TYPES)), [cnt[t] for t in TYPES])
    # "lies in Republic of Velor" reads wrong without an article; countries keep their alias for leads
    alias_types = np.isin(np.arange(len(TYPES)), [TYPES.index(t) for t in ALIAS_MENTION_TYPES])
    kind_code = np.zeros(N, dtype=np.int8)
    for t in ("year", "list", "nationality"):
        kind_code[offset[t]:offset[t] + cnt[t]] = KINDS.index(t)
    short_kind = np.array([len(t) <= 3 for t in named.titles["band"]])
    kind_code[offset["band"]:offset["band"] + cnt["band"]][short_kind] = KINDS.index("short")
    gid = {lbl: (src + offset[dt], dst + offset[rt]) for lbl, (dt, src, rt, dst) in facts.items()}
    return _Layout(cnt, offset, N, pool, has_alias, has_alias & alias_types[type_code], type_code, kind_code, gid)


# ----- articles (template fields are indices into the layout's pool)

class _Writer:
    """Adds sentences to a ``_Doc``, drawing how each names its subject and the entity it mentions."""

    def __init__(self, rng: np.random.Generator, layout: _Layout, alias_mention_rate: float):
        self.rng, self.layout, self.alias_mention_rate = rng, layout, alias_mention_rate
        self.doc = _Doc(rng, layout.pool)

    def subject(self, src: np.ndarray) -> np.ndarray:
        """The subject's title or its reference ("The film", a person's surname), half and half."""
        return np.where(self.rng.random(len(src)) < 0.5, src, 2 * self.layout.n + src)

    def mention(self, dst: np.ndarray) -> np.ndarray:
        """A mention of ``dst``: its title, or at ``alias_mention_rate`` its alias where one may stand in."""
        use_alias = (self.rng.random(len(dst)) < self.alias_mention_rate) & self.layout.alias_mentionable[dst]
        return np.where(use_alias, self.layout.n + dst, dst)


def _write_articles(rng, k: dict, layout: _Layout, occ: np.ndarray, named: _Names) -> _Doc:
    """Every sentence of every article: leads, fact sentences, year pages, distractors."""
    w = _Writer(rng, layout, k["alias_mention_rate"])
    occ_at = _occupation_words(rng, occ, layout.n)
    _write_leads(w, occ_at)
    _write_fact_sentences(w)
    _write_year_pages(w)
    _write_distractors(w, k, named)
    return w.doc


def _occupation_words(rng, occ: np.ndarray, n: int) -> np.ndarray:
    """Pool index of one word for each person's occupation ("novelist" or "writer" for a writer)."""
    n_words = np.array([len(OCCUPATION_WORDS[o]) for o in OCCUPATIONS])
    first = np.cumsum(np.append(0, n_words))[:-1]
    return 3 * n + first[occ] + (rng.random(len(occ)) * n_words[occ]).astype(np.int64)


def _write_leads(w: _Writer, occ_at: np.ndarray) -> None:
    """Paragraph 0's opening sentence, stating the type (and the lead relation, for the types with one)."""
    lay = w.layout
    for t in TYPES:
        ids = lay.ids(t)
        if len(ids) == 0:
            continue
        fields = {"T": ids, "A": lay.n + ids, "occ": occ_at if t == "person" else None}
        lead_rel = LEAD_RELATION.get(t)
        dst = None
        if lead_rel:
            src, dst = lay.gid[lead_rel]
            assert np.array_equal(src, ids)  # lead relations are functional and total
            fields["O"] = w.mention(dst)
        rel = RELATION_INDEX[lead_rel] if lead_rel else -1
        templates = RELATIONS[rel].templates if lead_rel else LEADS[t]
        with_alias = lay.has_alias[ids] & (t in LEADS_WITH_ALIAS)
        for mask, tpl in ((~with_alias, templates), (with_alias, LEADS_WITH_ALIAS.get(t, ()))):
            idx = np.flatnonzero(mask)
            if len(idx):
                sub = {f: v[idx] for f, v in fields.items() if v is not None}
                w.doc.add(tpl, ids[idx], 0, 0, sub, None if dst is None else dst[idx], rel)


def _write_fact_sentences(w: _Writer) -> None:
    """One sentence per fact in its subject's article; later objects of a relation use ``more``."""
    for i, r in enumerate(RELATIONS):
        if r.label in LEAD_RELATION.values():
            continue
        src, dst = w.layout.gid[r.label]
        rank = _rank_in_group(src, w.rng) if not r.functional else np.zeros(len(src), np.int64)
        for first, tpl in ((True, r.templates), (False, r.more or r.templates)):
            idx = np.flatnonzero((rank == 0) == first)
            if len(idx) == 0:
                continue
            s, d = src[idx], dst[idx]
            fields = {"S": w.subject(s), "T": s, "O": w.mention(d)}
            w.doc.add(tpl, s, r.paragraph, 10 * (i + 1) + np.minimum(rank[idx], 9), fields, d, i)


def _write_year_pages(w: _Writer) -> None:
    """Year pages mention the first films released that year, without a labelled edge."""
    f_src, f_year = w.layout.gid["released in year"]
    keep = _rank_in_group(f_year, w.rng) < 2
    w.doc.add(YEAR_EVENTS, f_year[keep], 0, 1000, {"T": f_year[keep], "O": w.mention(f_src[keep])}, f_src[keep])


def _write_distractors(w: _Writer, k: dict, named: _Names) -> None:
    """On real articles: a namesake or same-type look-alike, an unrelated mention, a filler."""
    lay, rng = w.layout, w.rng
    real = np.concatenate([lay.ids(t) for t in REAL_TYPES])
    other = _pick_in_group(lay.type_code, len(TYPES), lay.type_code[real], rng)
    is_person = (real >= lay.offset["person"]) & (real < lay.offset["person"] + lay.cnt["person"])
    people = real[is_person] - lay.offset["person"]
    other[is_person] = _pick_in_group(named.given, named.n_given, named.given[people], rng) + lay.offset["person"]
    ok = (other != real) & (rng.random(len(real)) < k["confusion_rate"])
    s, d = real[ok], other[ok]
    w.doc.add(CONFUSIONS, s, 1, 5000, {"S": w.subject(s), "O": w.mention(d)}, d)
    pick = real[rng.integers(0, len(real), len(real))]
    ok = (pick != real) & (rng.random(len(real)) < k["comparison_rate"])
    s, d = real[ok], pick[ok]
    w.doc.add(COMPARISONS, s, 1, 5001, {"S": w.subject(s), "T": s, "O": w.mention(d)}, d)
    w.doc.add(FILLERS, real, 1, 5002, {"S": w.subject(real), "T": real})


# ----- tables

def _tables(lay: _Layout, doc: _Doc) -> dict[str, pa.Table]:
    """The World's tables from the laid-out entities and the written articles."""
    passages, anchors, (e_src, e_dst, e_rel) = doc.assemble()
    N, pool = lay.n, lay.pool
    with_alias = np.flatnonzero(lay.has_alias)
    return {
        "entities": pa.table({
            "entity_id": np.arange(N, dtype=np.int64), "title": pool.slice(0, N),
            "type": pa.array(TYPES).take(pa.array(lay.type_code)),
            "kind": pa.array(KINDS).take(pa.array(lay.kind_code)),
            "source": pa.repeat(pa.scalar(SOURCE), N)}),
        "passages": pa.table({"passage_id": np.arange(len(passages["entity_id"]), dtype=np.int64),
                              "entity_id": passages["entity_id"], "paragraph": passages["paragraph"],
                              "text": passages["text"]}),
        "anchors": pa.table(anchors),
        "relations": pa.table({"label": [r.label for r in RELATIONS], "domain": [r.domain for r in RELATIONS],
                               "range": [r.range for r in RELATIONS],
                               "functional": [r.functional for r in RELATIONS]}),
        "edges": _edge_table(e_src, e_dst, e_rel, N),
        "aliases": pa.table({"entity_id": with_alias.astype(np.int64),
                             "alias": pool.take(pa.array(N + with_alias))}),
    }


def _edge_table(src: np.ndarray, dst: np.ndarray, rel: np.ndarray, n: int) -> pa.Table:
    """One edge per (src, dst, relation), sorted by src, dst, relation index."""
    key = np.sort((src * n + dst) * len(RELATIONS) + rel)
    key = key[np.append(True, key[1:] != key[:-1])]
    rel, rest = key % len(RELATIONS), key // len(RELATIONS)
    labels = pa.array([r.label for r in RELATIONS], pa.string())
    return pa.table({"src": rest // n, "dst": rest % n, "relation": labels.take(pa.array(rel)),
                     "source": pa.repeat(pa.scalar(SOURCE), len(key))})


def _unique_draws(rng: np.random.Generator, n: int, high: int) -> np.ndarray:
    """``n`` distinct integers in ``[0, high)``, in draw order (no O(high) permutation)."""
    if n > high:
        raise ValueError(f"cannot draw {n} distinct values below {high}")
    out = np.empty(0, dtype=np.int64)
    while len(out) < n:
        merged = np.concatenate([out, rng.integers(0, high, int((n - len(out)) * 1.3) + 16)])
        _, first = np.unique(merged, return_index=True)
        out = merged[np.sort(first)]
    return out[:n]


def _duplicated(items: list[str]) -> list[bool]:
    """True for every item that occurs more than once."""
    seen, dup = set(), set()
    for x in items:
        (dup if x in seen else seen).add(x)
    return [x in dup for x in items]


# ----------------------------------------------------------------------------- store

WORLD_TABLES = ("entities", "passages", "anchors", "relations", "edges", "aliases")


def write_world(con, world: World) -> None:
    """Replace the store's world (and its pool and questions) with ``world``, in one transaction.

    Example:
        >>> from workbench import store
        >>> con = store.connect(":memory:")
        >>> write_world(con, generate_world(150, 0))
        >>> con.execute("SELECT count(*) > 0 FROM anchors").fetchone()
        (True,)
    """
    from workbench import store

    with store.transaction(con):
        store.clear_world(con)
        _insert_all(con, world)


def build_world(db_or_con, preset: str = "tiny", seed: int = 0, n_entities: int | None = None,
                force: bool = False) -> dict:
    """Generate a world, write it and its question sets to the store; return a summary.

    ``db_or_con`` is a store path or an open connection; sizes come from the preset's
    ``WorldConfig`` unless ``n_entities`` is given. Everything is one transaction.

    A store that already holds this very world (same entity and question ids and texts) is kept
    as it is (``summary["kept"]``), pool and runs included. Replacing a different world that runs,
    evaluations or imports use would restart the ids their rows point at: refused (ValueError
    naming them) unless ``force``, which deletes those rows too (``store.clear_world``).

    Example:
        >>> s = build_world(":memory:", preset="smoke", seed=0)
        >>> s["entities"] > 0 and s["questions"] > 0, s["kept"]
        (True, False)
    """
    from workbench import config, store
    from workbench.kg import qa_sets

    cfg = config.preset(preset).world
    n = cfg.n_entities if n_entities is None else n_entities
    t0 = time.perf_counter()
    world = generate_world(n, seed)
    t_gen = time.perf_counter() - t0
    questions = qa_sets.generate_questions(world, cfg.questions_per_family, seed)
    t_q = time.perf_counter() - t0 - t_gen
    own = isinstance(db_or_con, str) or hasattr(db_or_con, "__fspath__")
    con = store.connect(db_or_con) if own else db_or_con
    try:
        with store.transaction(con):
            kept = not force and _holds(con, world, questions)
            if not kept:
                users = store.world_users(con)
                if users and not force:
                    raise ValueError(
                        f"the store's world is in use by {'; '.join(users)}: a different world (preset {preset}, "
                        f"seed {seed}, {n} entities) would restart the entity and question ids their rows point "
                        "at; pass --force (force=True) to replace it anyway, deleting those rows (run folders "
                        "are kept)")
                store.clear_world(con)
                _insert_all(con, world)
                qa_sets.write_questions(con, questions)
    finally:
        if own:
            con.close()
    summary = {**world.counts(), "questions": questions.num_rows, "seed": seed, "preset": preset, "kept": kept,
               "generate_s": round(t_gen, 2), "questions_s": round(t_q, 2),
               "seconds": round(time.perf_counter() - t0, 2)}
    return summary


def _holds(con, world: World, questions: pa.Table) -> bool:
    """Whether the store's entities and TinyWorld questions are exactly ``world``'s (ids and texts).

    The generator is deterministic, so equal titles and questions under equal ids mean the same
    world; TinyWorld questions take ids from 0 in a store the world was written to (``clear_world``).
    """
    from workbench import store

    generated = questions.select(["dataset", "question", "split"]).append_column(
        "question_id", pa.array(np.arange(questions.num_rows), pa.int64()))
    with store.registered(con, "_tw_entities", world.entities.select(["entity_id", "title"])), \
            store.registered(con, "_tw_questions", generated):
        (differ,) = con.execute("""
            WITH stored AS (SELECT * FROM questions WHERE dataset IN (SELECT dataset FROM _tw_questions))
            SELECT (SELECT count(*) FROM entities e FULL JOIN _tw_entities g USING (entity_id)
                    WHERE e.title IS DISTINCT FROM g.title)
                 + (SELECT count(*) FROM stored q FULL JOIN _tw_questions g USING (question_id)
                    WHERE q.question IS DISTINCT FROM g.question OR q.split IS DISTINCT FROM g.split)
            """).fetchall()[0]
    return differ == 0 and world.entities.num_rows > 0


def _insert_all(con, world: World) -> None:
    from workbench import store

    for name in WORLD_TABLES:
        table = getattr(world, name)
        cols = ", ".join(f'"{c}"' for c in table.column_names)
        with store.registered(con, "_tw_insert", table):
            con.execute(f"INSERT INTO {name} ({cols}) SELECT {cols} FROM _tw_insert")
