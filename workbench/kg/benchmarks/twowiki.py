"""tw-2wiki: 2WikiMultiHopQA's four types on TinyWorld (card: data/benchmarks/tw-2wiki.md), a
quarter each, in 2Wiki's wording (Wikidata property names) rather than the seed pool's.

* ``compositional``: two hops spelled out, "What is the place of birth of the director of film
  The Velor Affair?"
* ``inference``: two hops under one derived relation the question names without its parts, as
  2Wiki's "paternal grandfather" = father's father: "Who is the boss of Kavimo Rutel?" (the
  founder of the company that employs them), "In which country was Kavimo Rutel born?" (the
  country of the birth city; the citizenship, which usually agrees, is not what is asked).
* ``comparison``: two named entities of one type, half "which is earlier" (a choice between the
  two names), half "the same ...?" (yes / no, balanced).
* ``bridge_comparison``: the same over a bridge each, "Which film has the director who was born
  earlier, A or B?" and "Are the directors of the films A and B citizens of the same country?"
  (the two bridges always differ).

No question repeats a chain or pair of the seed pool or validation.

Example:
    >>> from workbench.kg.tinyworld import generate_world
    >>> from workbench.kg import qa_sets
    >>> from workbench.kg.benchmarks.view import Held, WorldView
    >>> w = generate_world(400, 0); view = WorldView.from_world(w)
    >>> items = generate(view, Held.from_questions(qa_sets.generate_questions(w, 5, 0), view), 40,
    ...                  np.random.default_rng(0))
    >>> sorted({i.family for i in items})
    ['bridge_comparison', 'comparison', 'compositional', 'inference']
"""

from __future__ import annotations

import numpy as np

from workbench.kg.benchmarks.compare import choice, choice_pairs, pair_chain, same_pairs
from workbench.kg.benchmarks.view import YEAR_RELATION, Collector, Held, Item, WorldView, path_facts, round_robin

NAME = "tw-2wiki"
FAMILIES = ("compositional", "inference", "comparison", "bridge_comparison")
# Wikidata's property names (2Wiki's wording) and how a subject of each type is introduced.
PROPERTY = {
    "born in": "place of birth", "citizen of": "country of citizenship", "educated at": "alma mater",
    "member of": "band", "employed by": "employer", "located in": "country", "situated in": "location",
    "headquartered in": "headquarters location", "founded by": "founder", "directed by": "director",
    "produced by": "production company", "filmed in": "filming location", "written by": "author",
    "published by": "publisher", "set in": "narrative location", "formed in": "location of formation",
    "signed to": "record label", "born in year": "year of birth", "founded in year": "year of foundation",
    "established in year": "year of establishment", "released in year": "year of release",
    "published in year": "year of publication", "formed in year": "year of formation",
}
KIND = {"film": "film ", "book": "novel ", "band": "band ", "company": "company ", "university": "university ",
        "city": "city ", "country": "country ", "river": "river ", "person": ""}
COMPOSITIONAL = ("What is the {p2} of the {p1} of {kind}{x}?", "Which person is the {p2} of the {p1} of {kind}{x}?")
# inference: (path, question); the question names the derived relation only.
INFERENCE = (
    (("born in", "located in"), "In which country was {x} born?"),
    (("employed by", "founded by"), "Who is the boss of {x}?"),
    (("formed in", "located in"), "What is the country of origin of the band {x}?"),
    (("headquartered in", "located in"), "In which country does {x} have its headquarters?"),
    (("produced by", "founded by"), "Who is the studio boss behind the film {x}?"),
    (("set in", "located in"), "In which country is the novel {x} set?"),
    (("situated in", "located in"), "In which country is the university {x}?"),
    (("member of", "signed to"), "Which record label releases the music of {x}?"),
    (("educated at", "situated in"), "In which city did {x} go to university?"),
    (("filmed in", "located in"), "In which country was the film {x} shot?"),
    (("published by", "founded by"), "Who is the publishing boss behind the novel {x}?"),
    (("signed to", "founded by"), "Who is the label boss of the band {x}?"),
)
# comparison: (subject type, path, earlier form, later form) for choices; (type, path, form) for yes / no.
CHOICES = (
    ("person", ("born in year",), "Which person was born earlier, {a} or {b}?",
     "Which person was born more recently, {a} or {b}?"),
    ("company", ("founded in year",), "Which company was established earlier, {a} or {b}?",
     "Which company was established more recently, {a} or {b}?"),
    ("university", ("established in year",), "Which university was founded earlier, {a} or {b}?",
     "Which university was founded more recently, {a} or {b}?"),
    ("film", ("released in year",), "Which film came out earlier, {a} or {b}?",
     "Which film came out more recently, {a} or {b}?"),
    ("book", ("published in year",), "Which book came out earlier, {a} or {b}?",
     "Which book came out more recently, {a} or {b}?"),
    ("band", ("formed in year",), "Which band was formed earlier, {a} or {b}?",
     "Which band was formed more recently, {a} or {b}?"),
)
SAMES = (
    ("person", ("citizen of",), "Are {a} and {b} of the same nationality?"),
    ("person", ("born in",), "Were {a} and {b} born in the same city?"),
    ("film", ("directed by",), "Were the films {a} and {b} directed by the same person?"),
    ("film", ("produced by",), "Were the films {a} and {b} made by the same studio?"),
    ("book", ("written by",), "Were the novels {a} and {b} written by the same person?"),
    ("company", ("headquartered in",), "Are the companies {a} and {b} based in the same city?"),
    ("band", ("formed in",), "Were the bands {a} and {b} formed in the same city?"),
    ("band", ("signed to",), "Are the bands {a} and {b} signed to the same label?"),
)
BRIDGE_CHOICES = (
    ("film", ("directed by", "born in year"), "Which film has the director who was born earlier, {a} or {b}?",
     "Which film has the director who was born later, {a} or {b}?"),
    ("book", ("written by", "born in year"), "Which book has the author who was born earlier, {a} or {b}?",
     "Which book has the author who was born later, {a} or {b}?"),
    ("company", ("founded by", "born in year"), "Which company has the founder who was born earlier, {a} or {b}?",
     "Which company has the founder who was born later, {a} or {b}?"),
    ("film", ("produced by", "founded in year"),
     "Which film has the production company that was founded earlier, {a} or {b}?",
     "Which film has the production company that was founded later, {a} or {b}?"),
    ("band", ("signed to", "founded in year"), "Which band has the record label that was founded earlier, {a} or {b}?",
     "Which band has the record label that was founded later, {a} or {b}?"),
)
BRIDGE_SAMES = (
    ("film", ("directed by", "citizen of"), "Are the directors of the films {a} and {b} citizens of the same country?"),
    ("book", ("written by", "born in"), "Were the authors of the novels {a} and {b} born in the same city?"),
    ("company", ("founded by", "citizen of"), "Are the founders of {a} and {b} citizens of the same country?"),
    ("film", ("produced by", "headquartered in"), "Are the studios behind the films {a} and {b} based in the same city?"),
)
TEMPLATES = (COMPOSITIONAL + tuple(q for _, q in INFERENCE) + tuple(f for c in CHOICES + BRIDGE_CHOICES for f in c[2:])
             + tuple(s[2] for s in SAMES + BRIDGE_SAMES))


def compositional(view: WorldView, held: Held, n: int, rng) -> list[Item]:
    """Two hops spelled out with property names; a person-valued answer is asked "Which person ..."."""
    inner = [r for r in PROPERTY if not r.endswith("year")]
    paths = [p for p in view.paths(2, inner, last=list(PROPERTY)) if p not in {q for q, _ in INFERENCE}]
    keep = Collector(held, n)
    for gi, start in round_robin([np.flatnonzero(view.obj[p[0]] >= 0) for p in paths], rng, cap=n):
        p = paths[gi]
        chain = view.follow(int(start), p)
        if chain is None or tuple(chain) in held.chains:
            continue
        form = COMPOSITIONAL[1 if view.range[p[1]] == "person" else 0]
        q = form.format(p2=PROPERTY[p[1]], p1=PROPERTY[p[0]], kind=KIND.get(view.type[start], ""), x=view.title[start])
        keep.offer(Item(q, view.answers(chain[-1]), chain, 2, "compositional",
                        {"kind": "path", "start": chain[0], "relations": list(p)}, path_facts(chain)))
        if keep.full:
            break
    return keep.items


def inference(view: WorldView, held: Held, n: int, rng) -> list[Item]:
    """Two hops under one derived relation's name."""
    rules = [(p, q) for p, q in INFERENCE if all(r in view.obj for r in p)]
    keep = Collector(held, n)
    for gi, start in round_robin([np.flatnonzero(view.obj[p[0]] >= 0) for p, _ in rules], rng, cap=n):
        p, form = rules[gi]
        chain = view.follow(int(start), p)
        if chain is None or tuple(chain) in held.chains:
            continue
        keep.offer(Item(form.format(x=view.title[start]), view.answers(chain[-1]), chain, 2, "inference",
                        {"kind": "path", "start": chain[0], "relations": list(p)}, path_facts(chain)))
        if keep.full:
            break
    return keep.items


def _pairs(view: WorldView, held: Held, n: int, rng, family: str, choices, sames, hops: int) -> list[Item]:
    """Half choices (which is earlier / later), half yes / no (half of those yes), interleaved."""
    keep_c, keep_s = Collector(held, n - n // 2), Collector(held, n // 2)
    usable = [c for c in choices if all(r in view.obj for r in c[1])]
    for gi, (a, b) in round_robin([choice_pairs(view, t, p, n, rng) for t, p, *_ in usable], rng):
        t, p, earlier_form, later_form = usable[gi]
        a, b = (int(a), int(b)) if rng.random() < 0.5 else (int(b), int(a))
        if frozenset((a, b)) in held.chains:
            continue
        earlier = bool(rng.random() < 0.5)
        winner, spec = choice(view, a, b, p, earlier)
        chain, facts = pair_chain(view, a, b, p)
        q = (earlier_form if earlier else later_form).format(a=view.title[a], b=view.title[b])
        keep_c.offer(Item(q, view.answers(winner), chain, hops, family, spec, facts), choice=True)
        if keep_c.full:
            break
    usable = [s for s in sames if all(r in view.obj for r in s[1])]
    for same in (True, False):  # as many yes as no
        target = len(keep_s.items) + (keep_s.n - len(keep_s.items)) // (2 if same else 1)
        groups = [same_pairs(view, t, p, same, n, rng) for t, p, _ in usable]
        for gi, (a, b) in round_robin(groups, rng):
            if len(keep_s.items) >= target:
                break
            t, p, form = usable[gi]
            a, b = (int(a), int(b)) if rng.random() < 0.5 else (int(b), int(a))
            chain, facts = pair_chain(view, a, b, p)
            spec = {"kind": "same", "subjects": [a, b], "relations": list(p)}
            keep_s.offer(Item(form.format(a=view.title[a], b=view.title[b]), ["yes" if same else "no"], chain, hops,
                              family, spec, facts))
    s_items = [keep_s.items[i] for i in rng.permutation(len(keep_s.items))]  # yes and no mixed
    out = [x for pair in zip(keep_c.items, s_items) for x in pair]
    longer = keep_c.items if len(keep_c.items) > len(s_items) else s_items
    return out + longer[min(len(keep_c.items), len(s_items)):]


def generate(view: WorldView, held: Held, n: int, rng: np.random.Generator) -> list[Item]:
    """A quarter of ``n`` per type (the last types fill in where an earlier one runs short),
    interleaved type by type."""
    parts, left = [], n
    makers = (lambda k: compositional(view, held, k, rng), lambda k: inference(view, held, k, rng),
              lambda k: _pairs(view, held, k, rng, "comparison", CHOICES, SAMES, 2),
              lambda k: _pairs(view, held, k, rng, "bridge_comparison", BRIDGE_CHOICES, BRIDGE_SAMES, 4))
    for i, make in enumerate(makers):
        parts.append(make(left // (len(makers) - i)))
        left -= len(parts[-1])
    rows = [(k, i, item) for i, part in enumerate(parts) for k, item in enumerate(part)]
    return [item for _, _, item in sorted(rows, key=lambda t: (t[0], t[1]))]
