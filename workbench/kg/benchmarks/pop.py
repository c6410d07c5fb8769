"""tw-pop: single-hop questions about people and works across popularity, the tail first (PopQA's
analogue; card: data/benchmarks/tw-pop.md).

PopQA buckets its questions by the subject's monthly Wikipedia page views. A TinyWorld article
has no readers, so popularity here is the number of anchors in other articles that link to the
subject (``WorldView.inlinks``, Wikipedia's in-links). Subjects are people, films, books and bands
(places and companies are linked from many articles by construction, so they would fill the head
alone); each question's ``family`` is its subject's bucket (``BUCKETS``, doubling bounds as
PopQA's log scale), an equal share of questions per bucket where the world has them, so EM per
bucket has the same precision. Questions use possessive forms ("What is Kavimo Rutel's alma
mater?"), none of the seed pool's, and never repeat a single-hop fact the seed pool or
validation asks.

Example:
    >>> bucket_of(0), bucket_of(3), bucket_of(12)
    ('inlinks 0-1', 'inlinks 2-3', 'inlinks 8+')
"""

from __future__ import annotations

import numpy as np

from workbench.kg.benchmarks.view import Collector, Held, Item, WorldView, path_facts, pick, round_robin

NAME = "tw-pop"
SUBJECT_TYPES = ("person", "film", "book", "band")
BUCKETS = ((0, 1), (2, 3), (4, 7), (8, None))  # in-link counts, bounds doubling (ours)
FORMS = {
    "born in": ("What is {x}'s place of birth?", "Which city is {x}'s place of birth?"),
    "citizen of": ("What is {x}'s country of citizenship?",),
    "educated at": ("What is {x}'s alma mater?",),
    "member of": ("What is {x}'s band?", "Which group is {x}'s band?"),
    "employed by": ("Who is {x}'s employer?",),
    "born in year": ("What is {x}'s year of birth?",),
    "directed by": ("Who is {x}'s director?",),
    "produced by": ("What is {x}'s production company?",),
    "filmed in": ("What is {x}'s filming location?",),
    "released in year": ("What is {x}'s year of release?",),
    "written by": ("Who is {x}'s author?",),
    "published by": ("Who is {x}'s publisher?",),
    "set in": ("What is {x}'s setting?", "Which city is {x}'s setting?"),
    "published in year": ("What is {x}'s year of publication?",),
    "formed in": ("What is {x}'s city of origin?",),
    "signed to": ("What is {x}'s record label?",),
    "formed in year": ("What is {x}'s year of formation?",),
}
TEMPLATES = tuple(f for forms in FORMS.values() for f in forms)


def bucket_of(inlinks: int) -> str:
    """The family name of a subject with ``inlinks`` in-links."""
    for low, high in BUCKETS:
        if high is None or inlinks <= high:
            return f"inlinks {low}-{high}" if high is not None else f"inlinks {low}+"
    raise AssertionError("the last bucket is open")


BUCKET_NAMES = tuple(bucket_of(low) for low, _ in BUCKETS)


def generate(view: WorldView, held: Held, n: int, rng: np.random.Generator) -> list[Item]:
    """Up to ``n`` questions: ``n / len(BUCKETS)`` a bucket (the rest from the others where one has
    too few), within a bucket relation after relation."""
    per_bucket = {b: [] for b in BUCKET_NAMES}
    relations = [r for r in FORMS if r in view.obj and view.domain[r] in SUBJECT_TYPES]
    for r in relations:
        for s in np.flatnonzero(view.obj[r] >= 0):
            if (int(s), int(view.obj[r][s])) not in held.chains:
                per_bucket[bucket_of(int(view.inlinks[s]))].append((r, int(s)))
    kept = {}
    for b, candidates in per_bucket.items():
        by_relation = [[s for r2, s in candidates if r2 == r] for r in relations]
        keep = Collector(held, n)
        for gi, s in round_robin(by_relation, rng):
            r = relations[gi]
            chain = [s, int(view.obj[r][s])]
            keep.offer(Item(pick(rng, FORMS[r]).format(x=view.title[s]), view.answers(chain[1]), chain, 1, b,
                            {"kind": "path", "start": s, "relations": [r]}, path_facts(chain)))
        kept[b] = keep.items
    return _share(kept, n)


def _share(kept: dict[str, list[Item]], n: int) -> list[Item]:
    """``n`` items, as equal a share of each bucket as their sizes allow, interleaved bucket by bucket."""
    quota = {b: 0 for b in kept}
    while sum(quota.values()) < n and any(quota[b] < len(kept[b]) for b in kept):
        for b in kept:
            if quota[b] < len(kept[b]) and sum(quota.values()) < n:
                quota[b] += 1
    rows = [(i, k, item) for k, b in enumerate(kept) for i, item in enumerate(kept[b][:quota[b]])]
    return [item for _, _, item in sorted(rows, key=lambda t: (t[0], t[1]))]
