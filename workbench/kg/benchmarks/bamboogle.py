"""tw-bamboogle: 125 two-hop compositions over facts no seed or validation question uses, in plain
conversational wording (Bamboogle's analogue; card: data/benchmarks/tw-bamboogle.md).

Bamboogle's questions were written so that no search engine had the composed answer in one page.
Here both hops of every question are facts that no question of the seed pool or validation walks
(``Held.facts``; a test checks it), so a solver cannot have been trained on either half: "Who
started the studio that bankrolled Night of Velor?", "Which nation issued the passport of the
novelist who penned The Book of Dasu?".

Example:
    >>> from workbench.kg.tinyworld import generate_world
    >>> from workbench.kg import qa_sets
    >>> from workbench.kg.benchmarks.view import Held, WorldView
    >>> w = generate_world(300, 0); view = WorldView.from_world(w)
    >>> held = Held.from_questions(qa_sets.generate_questions(w, 5, 0), view)
    >>> items = generate(view, held, 10, np.random.default_rng(0))
    >>> len(items), sum(held.uses(i.facts) for i in items)
    (10, 0)
"""

from __future__ import annotations

import numpy as np

from workbench.kg.benchmarks.view import Collector, Held, Item, WorldView, capitalise, path_facts, round_robin

NAME = "tw-bamboogle"
SIZE_SHARE = 0.25  # Bamboogle has 125 questions where the other five have 500 (seed 000, section 4.1)
# The bridge, described from the named entity {x}.
BRIDGE = {
    "directed by": "the filmmaker who made {x}", "written by": "the novelist who penned {x}",
    "founded by": "the entrepreneur who started {x}", "produced by": "the studio that bankrolled {x}",
    "published by": "the house that printed {x}", "signed to": "the label that puts out records by {x}",
    "employed by": "the firm that pays {x}", "member of": "the group {x} performs with",
    "educated at": "the school {x} graduated from", "born in": "the town {x} comes from",
    "citizen of": "the nation whose passport {x} carries", "located in": "the nation that {x} belongs to",
    "situated in": "the town that hosts {x}", "headquartered in": "the town where {x} keeps its offices",
    "filmed in": "the town where the cameras rolled for {x}", "set in": "the town where the story of {x} unfolds",
    "formed in": "the town where {x} got going",
}
# What is asked about the bridge {b}.
ASK = {
    "born in": "Which town does {b} come from?", "born in year": "What year was {b} born in?",
    "citizen of": "Which nation's passport does {b} carry?", "educated at": "Which school did {b} graduate from?",
    "member of": "Which group does {b} perform with?", "employed by": "Which firm pays {b}?",
    "located in": "Which nation does {b} belong to?", "capital": "Which town is the seat of government of {b}?",
    "capital of": "Which nation is governed from {b}?", "situated in": "Which town hosts {b}?",
    "headquartered in": "In which town does {b} keep its offices?", "founded by": "Who started {b}?",
    "founded in year": "What year did {b} open for business?", "established in year": "What year did {b} open its doors?",
    "formed in": "In which town did {b} get going?", "formed in year": "What year did {b} get going?",
    "signed to": "Which label puts out records by {b}?",
}
TEMPLATES = tuple(a.replace("{b}", b) for a in ASK.values() for b in BRIDGE.values())


def generate(view: WorldView, held: Held, n: int, rng: np.random.Generator) -> list[Item]:
    """Up to ``n`` questions, relation paths in turn; a chain with a fact a training question uses is skipped."""
    paths = view.paths(2, BRIDGE, last=ASK)
    groups = [np.flatnonzero(view.obj[p[0]] >= 0) for p in paths]
    keep = Collector(held, n)
    for gi, start in round_robin(groups, rng):
        p = paths[gi]
        chain = view.follow(int(start), p)
        if chain is None or held.uses(path_facts(chain)):
            continue
        q = capitalise(ASK[p[1]].format(b=BRIDGE[p[0]].format(x=view.title[start])))
        keep.offer(Item(q, view.answers(chain[-1]), chain, 2, None,
                        {"kind": "path", "start": chain[0], "relations": list(p)}, path_facts(chain)))
        if keep.full:
            break
    return keep.items
