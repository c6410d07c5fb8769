"""tw-trivia: single-hop questions that describe the answer by clues instead of naming the subject
(TriviaQA's analogue; card: data/benchmarks/tw-trivia.md).

"Which film was made by director Kavimo Rutel and premiered in 1987?": the answer is the one
entity of its type that every clue (a functional fact of it: its director, its year, its city,
...) fits, checked over the whole world. Two clues, three where two fit several entities; at least
one clue names an entity a search can start from (not only a year or a nationality). The answer
is never named: a question that contains the answer or a distinctive word of it ("Dasu" for
"University of Dasu") is dropped.

Example:
    >>> from workbench.kg.tinyworld import generate_world
    >>> from workbench.kg import qa_sets
    >>> from workbench.kg.benchmarks.view import Held, WorldView
    >>> w = generate_world(300, 0); view = WorldView.from_world(w)
    >>> items = generate(view, Held.from_questions(qa_sets.generate_questions(w, 5, 0), view), 10,
    ...                  np.random.default_rng(0))
    >>> len(items), all(i.spec["kind"] == "clues" for i in items)
    (10, True)
"""

from __future__ import annotations

import itertools

import numpy as np

from workbench.kg.benchmarks.view import Collector, Held, Item, WorldView, pick, round_robin

NAME = "tw-trivia"
# Per answer type: its nouns, then each clue relation's predicate ({o}: the object's title).
CLUES = {
    "film": (("film", "movie"), {
        "directed by": "was made by director {o}", "produced by": "was a {o} production",
        "filmed in": "was shot on location in {o}", "released in year": "premiered in {o}"}),
    "book": (("novel", "book"), {
        "written by": "was penned by {o}", "published by": "was printed by {o}", "set in": "unfolds in {o}",
        "published in year": "first appeared in {o}"}),
    "person": (("person",), {
        "born in": "is a native of {o}", "born in year": "was born in {o}", "nationality": "is a {o} national",
        "educated at": "graduated from {o}", "member of": "plays with {o}", "employed by": "works at {o}"}),
    "company": (("company", "firm"), {
        "headquartered in": "has its head office in {o}", "founded by": "was started by {o}",
        "founded in year": "opened for business in {o}"}),
    "band": (("band", "group"), {
        "formed in": "got its start in {o}", "formed in year": "got together in {o}", "signed to": "records for {o}"}),
    "university": (("university", "institution"), {
        "situated in": "has its campus in {o}", "established in year": "opened its doors in {o}"}),
}
FRAMES = ("Which {noun} {clues}?", "What {noun} {clues}?", "Can you name the {noun} {who} {clues}?")
TEMPLATES = tuple(f.replace("{clues}", p).replace("{who}", w) for f in FRAMES for t, (_, preds) in CLUES.items()
                  for p in preds.values() for w in (("who",) if t == "person" else ("that",)))
WEAK_TYPES = ("year", "nationality")  # a clue naming only these gives a search nothing to start from


def _clue_text(predicates: list[str]) -> str:
    return predicates[0] if len(predicates) == 1 else ", ".join(predicates[:-1]) + " and " + predicates[-1]


def fitting(view: WorldView, entity_type: str, clues) -> np.ndarray:
    """Entities of ``entity_type`` that every (relation, object) clue fits."""
    ids = view.ids(entity_type)
    ok = np.ones(len(ids), dtype=bool)
    for r, o in clues:
        ok &= view.obj[r][ids] == o
    return ids[ok]


def identifying_clues(view: WorldView, target: int, relations, rng) -> list[tuple[str, int]] | None:
    """The first set of two (else three) of ``target``'s facts, in random order, that only
    ``target`` fits and that names at least one searchable entity; None when none does."""
    facts = [(r, int(view.obj[r][target])) for r in relations if r in view.obj and view.obj[r][target] >= 0]
    facts = [facts[i] for i in rng.permutation(len(facts))]
    for size in (2, 3):
        for clues in itertools.combinations(facts, size):
            if all(view.type[o] in WEAK_TYPES for _, o in clues):
                continue
            if list(fitting(view, view.type[target], clues)) == [target]:
                return list(clues)
    return None


def generate(view: WorldView, held: Held, n: int, rng: np.random.Generator) -> list[Item]:
    """Up to ``n`` questions, answer types in turn (round robin), targets shuffled."""
    types = [t for t in CLUES if len(view.ids(t))]
    keep = Collector(held, n)
    for gi, target in round_robin([view.ids(t) for t in types], rng):
        nouns, predicates = CLUES[types[gi]]
        clues = identifying_clues(view, int(target), list(predicates), rng)
        if clues is None:
            continue
        text = _clue_text([predicates[r].format(o=view.title[o]) for r, o in clues])
        who = "who" if types[gi] == "person" else "that"
        q = pick(rng, FRAMES).format(noun=pick(rng, nouns), who=who, clues=text)
        spec = {"kind": "clues", "type": types[gi], "clues": [[r, o] for r, o in clues]}
        keep.offer(Item(q, view.answers(target), [o for _, o in clues] + [int(target)], 1, None, spec,
                        frozenset((int(target), o) for _, o in clues)))
        if keep.full:
            break
    return keep.items
