"""What every TinyWorld benchmark generator reads: the world's functional facts, its titles, each
entity's popularity, and the facts and chains the seed pool and validation already ask about.

``WorldView`` is built from the world's tables (a ``World`` or a store's); ``Held`` from the
TinyWorld questions of the splits a solver trains and selects checkpoints on ('seed', 'val').
A *fact* is an (subject, object) entity pair joined by an edge (a year is an entity too); a seed
comparison question uses its two subjects' year facts.

Example:
    >>> from workbench.kg.tinyworld import generate_world
    >>> from workbench.kg import qa_sets
    >>> w = generate_world(200, 0)
    >>> view = WorldView.from_world(w)
    >>> held = Held.from_questions(qa_sets.generate_questions(w, 5, 0), view)
    >>> len(held.facts) > 0, bool(view.obj["born in"][view.ids("person")[0]] >= 0)
    (True, True)
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from workbench.kg import tinyworld
from workbench.scoring import normalize_answer

TRAIN_SPLITS = ("seed", "val")  # the splits a solver sees in training (seed fallback, checkpoint choice)
YEAR_RELATION = {"person": "born in year", "company": "founded in year", "university": "established in year",
                 "film": "released in year", "book": "published in year", "band": "formed in year"}
TABLES = ("entities", "edges", "relations", "aliases", "anchors")

# Words of TinyWorld's title patterns ("The {w} Affair", "University of {w}", "<w> Motors"): a
# question may share them with its answer without giving it away.
_PATTERN_TEXT = " ".join([*tinyworld.FILM_TITLES, *tinyworld.BOOK_TITLES, *tinyworld.BAND_TITLES,
                          *tinyworld.UNIVERSITY_TITLES, *tinyworld.COMPANY_SUFFIXES, *tinyworld.COUNTRY_FORMS,
                          "River", "List of films directed by"]).replace("{w}", " ")
GENERIC_WORDS = frozenset(normalize_answer(_PATTERN_TEXT).split())


@dataclass
class Item:
    """One generated question: text, gold answers (title, then alias), the entity chain it walks,
    hops, family (None where the benchmark has none), ``spec`` (what the answer is, re-checked
    against the world by the tests) and the facts it uses.

    ``spec["kind"]`` is ``path`` (start, relations), ``clues`` (type, [(relation, object)]),
    ``choice`` (relation path from each of two subjects to a year, earlier or later wins) or
    ``same`` (relation path from each of two subjects, yes when they reach one entity).
    """

    question: str
    answers: list[str]
    chain: list[int]
    hops: int
    family: str | None
    spec: dict
    facts: frozenset = field(default_factory=frozenset)


class WorldView:
    """Functional object maps of every functional relation, titles, types, aliases and in-links."""

    def __init__(self, tables: dict[str, pa.Table]):
        missing = [t for t in TABLES if t not in tables]
        if missing:
            raise ValueError(f"WorldView: missing world tables {missing}; expected {list(TABLES)}")
        ent = tables["entities"]
        if ent.num_rows == 0:
            raise ValueError("WorldView: the world has no entities (build one first: workbench world)")
        self.n = int(pc.max(ent["entity_id"]).as_py()) + 1
        ids = ent["entity_id"].to_numpy()
        self.title = np.empty(self.n, dtype=object)
        self.title[ids] = ent["title"].to_numpy(zero_copy_only=False)
        self.type = np.full(self.n, "", dtype=object)
        self.type[ids] = ent["type"].to_numpy(zero_copy_only=False)
        self.alias = dict(zip(tables["aliases"]["entity_id"].to_pylist(), tables["aliases"]["alias"].to_pylist()))
        rel = tables["relations"].to_pydict()
        self.domain = dict(zip(rel["label"], rel["domain"]))
        self.range = dict(zip(rel["label"], rel["range"]))
        self.functional = {lbl for lbl, f in zip(rel["label"], rel["functional"]) if f}
        edges = tables["edges"]
        src, dst = edges["src"].to_numpy(), edges["dst"].to_numpy()
        labels = edges["relation"].to_numpy(zero_copy_only=False)
        self.obj: dict[str, np.ndarray] = {}
        for label in sorted(self.functional):
            m = labels == label
            if not m.any():
                continue
            obj = np.full(self.n, -1, dtype=np.int64)
            obj[src[m]] = dst[m]
            self.obj[label] = obj
        a = tables["anchors"]
        a_src, a_dst = a["src_entity"].to_numpy(), a["dst_entity"].to_numpy()
        self.inlinks = np.bincount(a_dst[a_src != a_dst], minlength=self.n)[: self.n]
        self._ids = {t: np.flatnonzero(self.type == t) for t in set(self.type)}
        self._titles = {normalize_answer(t): i for i, t in enumerate(self.title) if t}

    @classmethod
    def from_world(cls, world) -> WorldView:
        return cls({t: getattr(world, t) for t in TABLES})

    @classmethod
    def from_store(cls, con) -> WorldView:
        return cls({t: con.sql(f"SELECT * FROM {t}").to_arrow_table() for t in TABLES})

    def ids(self, entity_type: str) -> np.ndarray:
        """Entity ids of one type (empty when the world has none)."""
        return self._ids.get(entity_type, np.empty(0, dtype=np.int64))

    def answers(self, entity: int) -> list[str]:
        """Gold answers for an entity: its title, then its alias where it has one."""
        alias = self.alias.get(int(entity))
        return [self.title[entity]] + ([alias] if alias else [])

    def subjects(self, relation: str, obj: int) -> np.ndarray:
        """Every subject whose (functional) ``relation`` points at ``obj``."""
        return np.flatnonzero(self.obj[relation] == obj)

    def follow(self, start: int, path) -> list[int] | None:
        """The chain from ``start`` along functional relations, or None where a hop is missing or the
        chain revisits an entity."""
        chain = [int(start)]
        for r in path:
            if r not in self.obj:
                return None
            nxt = int(self.obj[r][chain[-1]])
            if nxt < 0 or nxt in chain:
                return None
            chain.append(nxt)
        return chain

    def title_owner(self, text: str) -> int | None:
        """The entity whose title ``text`` is, after normalisation (None when none is)."""
        return self._titles.get(normalize_answer(text))

    def paths(self, length: int, relations, last=None) -> list[tuple[str, ...]]:
        """Type-compatible paths of ``length`` functional relations drawn from ``relations`` (the last
        hop from ``last`` when given)."""
        rels = [r for r in relations if r in self.obj]
        lasts = [r for r in (last or relations) if r in self.obj]
        out = [(r,) for r in lasts] if length == 1 else []
        if length >= 2:
            for prefix in self.paths(length - 1, rels):
                out += [prefix + (r,) for r in lasts if self.range[prefix[-1]] == self.domain[r]]
        return out


@dataclass
class Held:
    """What the training splits' questions use: their chains (as asked) and their facts."""

    chains: set = field(default_factory=set)
    facts: set = field(default_factory=set)
    texts: set = field(default_factory=set)

    @classmethod
    def from_questions(cls, questions: pa.Table, view: WorldView, splits=TRAIN_SPLITS) -> Held:
        """From TinyWorld question rows (``qa_sets.generate_questions`` or the store's), splits ``splits``."""
        held = cls()
        for family, chain, split, text in zip(questions["family"].to_pylist(), questions["chain"].to_pylist(),
                                              questions["split"].to_pylist(), questions["question"].to_pylist()):
            if split not in splits or not chain:
                continue
            held.texts.add(text)
            if family == "comparison":
                held.chains.add(frozenset(chain))
                for e in chain:
                    year = view.obj.get(YEAR_RELATION.get(view.type[e], ""), None)
                    if year is not None and year[e] >= 0:
                        held.facts.add((int(e), int(year[e])))
            else:
                held.chains.add(tuple(chain))
                held.facts.update(zip(map(int, chain), map(int, chain[1:])))
        return held

    @classmethod
    def from_store(cls, con, view: WorldView, dataset: str = "tinyworld") -> Held:
        found = con.execute("SELECT family, chain, split, question FROM questions WHERE dataset = ? AND split IN "
                            "(SELECT unnest(?)) ORDER BY question_id", [dataset, list(TRAIN_SPLITS)]).fetchall()
        rows = pa.table(dict(zip(("family", "chain", "split", "question"), map(list, zip(*found))))) if found else None
        if rows is None:
            raise ValueError(f"the store holds no {dataset} questions of splits {list(TRAIN_SPLITS)}: the suite is "
                             "built against TinyWorld's seed pool and validation (build a world: workbench world)")
        return cls.from_questions(rows, view)

    def uses(self, facts) -> int:
        """How many of ``facts`` a training question uses."""
        return sum(f in self.facts for f in facts)


def path_facts(chain) -> frozenset:
    """The facts of a path chain: its consecutive pairs."""
    return frozenset(zip(map(int, chain), map(int, chain[1:])))


def leaks(question: str, answers, exempt_choice: bool = False) -> bool:
    """Whether the question gives its answer away: a gold answer appears in it as whole words, or a
    distinctive word of one does (a name word other than TinyWorld's title-pattern words, e.g.
    "Rutel" of "Rutel Motors"). ``exempt_choice``: a choice between named options (the answer is
    one of them by design) is not a leak.

    Example:
        >>> leaks("Who founded the firm of Kavimo Rutel?", ["Rutel Motors"])
        True
        >>> leaks("Is it so?", ["no"]), leaks("Which film is it?", ["The Velor Affair"])
        (False, False)
    """
    if exempt_choice:
        return False
    words = normalize_answer(question).split()
    text = f" {' '.join(words)} "
    for a in answers:
        gold = normalize_answer(a)
        if gold and f" {gold} " in text:
            return True
        if any(w in words for w in gold.split() if w not in GENERIC_WORDS and (len(w) > 2 or w.isdigit())):
            return True
    return False


def round_robin(groups: list, rng: np.random.Generator, cap: int | None = None) -> list[tuple[int, object]]:
    """Interleave each group's items, shuffled, so the first questions cover every group:
    (group index, item) in rank order, ties in random order (``qa_sets._round_robin``, whose
    draws these are; ``cap`` None keeps every item).

    Example:
        >>> sorted(g for g, _ in round_robin([[1, 2], [3]], np.random.default_rng(0))[:2])
        [0, 1]
    """
    from workbench.kg.qa_sets import _round_robin

    return _round_robin(groups, max(map(len, groups), default=0) if cap is None else cap, rng)


def pick(rng: np.random.Generator, options) -> str:
    """One of ``options``, drawn by ``rng``."""
    return options[int(rng.integers(len(options)))]


def capitalise(text: str) -> str:
    return text[:1].upper() + text[1:]


def template_regex(template: str) -> re.Pattern:
    """A template as a full-match, case-insensitive pattern, each ``{field}`` any text.

    Example:
        >>> bool(template_regex("Where was {x} born?").match("where was the director of X born?"))
        True
    """
    parts = re.split(r"\{[a-z]+\}", template)
    return re.compile("^" + "(.+)".join(re.escape(p) for p in parts) + "$", re.IGNORECASE)


class Collector:
    """Keeps up to ``n`` items: each question text once, none a training question's text, none that
    gives its answer away (:func:`leaks`; a choice between named options is exempt)."""

    def __init__(self, held: Held, n: int):
        self.held, self.n, self.items, self._texts = held, n, [], set()

    @property
    def full(self) -> bool:
        return len(self.items) >= self.n

    def offer(self, item: Item, choice: bool = False) -> bool:
        """Keep ``item`` when there is room and it passes the checks; return whether it was kept."""
        if self.full or item.question in self._texts or item.question in self.held.texts:
            return False
        if leaks(item.question, item.answers, exempt_choice=choice):
            return False
        self._texts.add(item.question)
        self.items.append(item)
        return True
