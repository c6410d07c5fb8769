"""tw-nq: single-hop questions phrased the way people type them (NQ's analogue; card:
data/benchmarks/tw-nq.md).

Every functional relation of the world, entity- and year-valued, asked in lower case without a
question mark, in words none of the seed pool's templates uses (``SEED_WORDS`` minus function
words; a test checks each form): "who penned The Book of Dasu", "Kavimo Rutel hometown". A
question never repeats a (subject, object) pair the seed pool or validation asks as a single hop;
the subject's other facts may appear inside training questions (the card gives the share).

Example:
    >>> from workbench.kg.tinyworld import generate_world
    >>> from workbench.kg import qa_sets
    >>> from workbench.kg.benchmarks.view import Held, WorldView
    >>> w = generate_world(300, 0); view = WorldView.from_world(w)
    >>> items = generate(view, Held.from_questions(qa_sets.generate_questions(w, 5, 0), view), 20,
    ...                  np.random.default_rng(0))
    >>> len(items), any(i.question.endswith("?") for i in items)
    (20, False)
"""

from __future__ import annotations

import numpy as np

from workbench.kg.benchmarks.view import Collector, Held, Item, WorldView, path_facts, pick, round_robin

NAME = "tw-nq"
# {x} is the subject's title; forms are lower case and end without "?", as NQ's questions do.
FORMS = {
    "born in": ("what town is {x} from originally", "{x} hometown", "what is the hometown of {x}"),
    "citizen of": ("{x} passport is from what nation", "what nation issued the passport of {x}"),
    "educated at": ("what college did {x} go to", "where did {x} go to college"),
    "member of": ("what group is {x} in", "which group does {x} perform with"),
    "employed by": ("who does {x} have a job with", "what firm is {x} on the payroll of"),
    "located in": ("{x} is in what nation", "what nation is {x} part of"),
    "capital of": ("{x} is the seat of government for what nation", "what nation is governed from {x}"),
    "capital": ("what is the seat of government of {x}", "where does the government of {x} sit"),
    "rises in": ("where does {x} begin", "in what nation are the headwaters of {x}"),
    "situated in": ("what town is {x} in", "where is the campus of {x}"),
    "headquartered in": ("where is {x} based", "what town is the main office of {x} in"),
    "founded by": ("who started {x}", "who created the firm {x}"),
    "directed by": ("who made the movie {x}", "who was behind the camera on {x}"),
    "produced by": ("what studio financed {x}", "which studio backed the movie {x}"),
    "filmed in": ("what town did the cameras roll in for {x}", "what town was the movie {x} made in"),
    "written by": ("who penned {x}", "who is the writer of the novel {x}"),
    "published by": ("who printed the novel {x}", "which house printed {x}"),
    "set in": ("where does the story of {x} happen", "in what town does the story of {x} unfold"),
    "formed in": ("what town did the group {x} start in", "where did the group {x} get started"),
    "signed to": ("who distributes the music of {x}", "who distributes the songs of {x}"),
    "born in year": ("{x} date of birth", "what is the birth date of {x}"),
    "founded in year": ("when did {x} open for business", "{x} opening date"),
    "established in year": ("when did {x} open its doors", "when did {x} open its gates"),
    "released in year": ("when did the movie {x} hit theaters", "{x} movie premiere date"),
    "published in year": ("when did the novel {x} hit the shelves", "when did {x} go on sale"),
    "formed in year": ("when did the group {x} get together", "when did the group {x} get started"),
}
TEMPLATES = tuple(f for forms in FORMS.values() for f in forms)


def generate(view: WorldView, held: Held, n: int, rng: np.random.Generator) -> list[Item]:
    """Up to ``n`` questions, one relation after another (round robin), subjects shuffled."""
    relations = [r for r in FORMS if r in view.obj]
    groups = [np.flatnonzero(view.obj[r] >= 0) for r in relations]
    keep = Collector(held, n)
    for gi, subject in round_robin(groups, rng):
        r = relations[gi]
        chain = [int(subject), int(view.obj[r][subject])]
        if tuple(chain) in held.chains:  # the seed pool or validation asks this very fact
            continue
        q = pick(rng, FORMS[r]).format(x=view.title[subject])
        keep.offer(Item(q, view.answers(chain[1]), chain, 1, None, {"kind": "path", "start": chain[0],
                                                                   "relations": [r]}, path_facts(chain)))
        if keep.full:
            break
    return keep.items
