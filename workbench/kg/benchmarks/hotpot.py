"""tw-hotpot: bridge and comparison questions, HotpotQA's two types, in new wording (the in-domain
column; card: data/benchmarks/tw-hotpot.md).

The seed pool has both types, so this is the column closest to training; only the wording is new.

* ``bridge`` (half): the question starts from a named entity and describes the bridge by its
  relation to it, HotpotQA's way: "The Velor Affair was directed by someone born in which city?",
  "Kavimo Rutel plays in a band formed in what year?" (two functional hops; entity- or
  year-valued).
* ``comparison`` (half): which of two named entities of one type has the earlier or later year,
  asked "Between A and B, which ...?" The answer is one of the two names by design.

No question repeats a chain (bridge) or a pair (comparison) of the seed pool or validation.

Example:
    >>> from workbench.kg.tinyworld import generate_world
    >>> from workbench.kg import qa_sets
    >>> from workbench.kg.benchmarks.view import Held, WorldView
    >>> w = generate_world(300, 0); view = WorldView.from_world(w)
    >>> items = generate(view, Held.from_questions(qa_sets.generate_questions(w, 5, 0), view), 20,
    ...                  np.random.default_rng(0))
    >>> sorted({i.family for i in items})
    ['bridge', 'comparison']
"""

from __future__ import annotations

import numpy as np

from workbench.kg.benchmarks.compare import choice, choice_pairs, pair_chain
from workbench.kg.benchmarks.view import YEAR_RELATION, Collector, Held, Item, WorldView, capitalise, path_facts, round_robin

NAME = "tw-hotpot"
FAMILIES = ("bridge", "comparison")
# First hop: the named entity {x} and the bridge, described by its type ("someone", "a city").
ATTACH = {
    "born in": "{x} was born in a city", "citizen of": "{x} is a citizen of a country",
    "educated at": "{x} studied at a university", "member of": "{x} plays in a band",
    "employed by": "{x} works for a company", "located in": "{x} lies in a country",
    "situated in": "{x} is situated in a city", "headquartered in": "{x} is headquartered in a city",
    "founded by": "{x} was founded by someone", "directed by": "{x} was directed by someone",
    "produced by": "{x} was produced by a company", "filmed in": "{x} was filmed in a city",
    "written by": "{x} was written by someone", "published by": "{x} was published by a company",
    "set in": "{x} is set in a city", "formed in": "{x} was formed in a city", "signed to": "{x} is signed to a company",
}
# Second hop: what is asked about the bridge.
TAIL = {
    "born in": "born in which city", "born in year": "born in what year",
    "citizen of": "who is a citizen of which country", "educated at": "who studied at which university",
    "member of": "who plays in which band", "employed by": "who works for which company",
    "located in": "that lies in which country", "capital of": "that serves as the capital of which country",
    "capital": "whose capital is which city", "situated in": "situated in which city",
    "established in year": "established in what year", "headquartered in": "based in which city",
    "founded by": "started by whom", "founded in year": "founded in what year",
    "formed in": "formed in which city", "formed in year": "formed in what year", "signed to": "signed to which label",
}
# Comparison: (earlier wins, later wins) per answer type; {a}, {b} are the two titles.
COMPARE = {
    "person": ("Between {a} and {b}, who was born earlier?", "Between {a} and {b}, who was born later?"),
    "company": ("Between {a} and {b}, which company has existed longer?",
                "Between {a} and {b}, which company was founded later?"),
    "university": ("Between {a} and {b}, which university opened earlier?",
                   "Between {a} and {b}, which university opened later?"),
    "film": ("Between {a} and {b}, which film premiered earlier?", "Between {a} and {b}, which film premiered later?"),
    "book": ("Between {a} and {b}, which book appeared earlier?", "Between {a} and {b}, which book appeared later?"),
    "band": ("Between {a} and {b}, which band got together earlier?",
             "Between {a} and {b}, which band got together later?"),
}
TEMPLATES = (tuple(f"{a} {t}?" for a in ATTACH.values() for t in TAIL.values())
             + tuple(f for pair in COMPARE.values() for f in pair))


def bridges(view: WorldView, held: Held, n: int, rng) -> list[Item]:
    """Two-hop questions, each relation path in turn."""
    paths = view.paths(2, ATTACH, last=TAIL)
    groups = [np.flatnonzero(view.obj[p[0]] >= 0) for p in paths]
    keep = Collector(held, n)
    for gi, start in round_robin(groups, rng, cap=n):
        chain = view.follow(int(start), paths[gi])
        if chain is None or tuple(chain) in held.chains:
            continue
        q = capitalise(f"{ATTACH[paths[gi][0]].format(x=view.title[start])} {TAIL[paths[gi][1]]}?")
        keep.offer(Item(q, view.answers(chain[-1]), chain, 2, "bridge",
                        {"kind": "path", "start": chain[0], "relations": list(paths[gi])}, path_facts(chain)))
        if keep.full:
            break
    return keep.items


def comparisons(view: WorldView, held: Held, n: int, rng) -> list[Item]:
    """Which of two named entities of one type has the earlier (later) year."""
    types = [t for t in COMPARE if YEAR_RELATION[t] in view.obj]
    keep = Collector(held, n)
    for gi, (a, b) in round_robin([choice_pairs(view, t, [YEAR_RELATION[t]], n, rng) for t in types], rng):
        a, b, t = int(a), int(b), types[gi]
        if frozenset((a, b)) in held.chains:
            continue
        if rng.random() < 0.5:
            a, b = b, a  # the answer is not always named first
        earlier = bool(rng.random() < 0.5)
        winner, spec = choice(view, a, b, [YEAR_RELATION[t]], earlier)
        q = COMPARE[t][0 if earlier else 1].format(a=view.title[a], b=view.title[b])
        chain, facts = pair_chain(view, a, b, [YEAR_RELATION[t]])
        keep.offer(Item(q, view.answers(winner), chain, 2, "comparison", spec, facts), choice=True)
        if keep.full:
            break
    return keep.items


def generate(view: WorldView, held: Held, n: int, rng: np.random.Generator) -> list[Item]:
    """Half bridge, half comparison (the comparisons fill in where bridges run short), interleaved."""
    b = bridges(view, held, n - n // 2, rng)
    c = comparisons(view, held, n - len(b), rng)
    out = [x for pair in zip(b, c) for x in pair]
    longer = b if len(b) > len(c) else c
    return out + longer[min(len(b), len(c)):]
