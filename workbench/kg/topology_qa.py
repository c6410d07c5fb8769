"""A held-out question set of executed topology queries, for Hit@1 and set F1 (seed 004's metrics;
issue 19): dataset ``tinyworld_topology``, one family per pattern of Table 6.

EoG reports Hit@1 and F1 on KGQA benchmarks whose questions have answer SETS; TinyWorld's own
test questions have one answer entity each (their ``answers`` are its aliases), where Hit@1 and
set F1 both reduce to EM. This set gives the evaluation answer sets: queries sampled by
``topology.sample_queries`` (seed ``seed + 1_000``, ours), each asked by a fixed template per
pattern (ours; EoG's questions are written by its proposer) and answered by the titles of its
complete answer set. ``evaluate`` then scores EM against any member (= Hit@1) and
``evaluate.set_scores`` the set F1.

A query one of whose anchors is in its own answer set is left out (:func:`askable_queries`): its
question names that anchor, so a solver copying a name from the question scores a hit (on the tiny
world 9% of 2p, 29% of ip and 8% of pi draws: an inverse relation leads back to the anchor).

Another seed does not keep the sets apart: the query space of a small graph is finite, so
training's per-round draws can hit a test query. Training therefore leaves out every query the
store holds under :data:`DATASET` (:func:`held_out_keys`, matched by :func:`query_key`;
``eog.draw_queries`` redraws on a hit), and an EoG run builds this set before its first round.

Example:
    >>> from workbench.kg.topology import Query
    >>> question_text(Query("2p", (1,), ("born in", "located in"), (3,)), {1: "Ann"})
    'What is the thing that Ann is born in located in?'
"""

from __future__ import annotations

from workbench import store
from workbench.kg import topology

DATASET = "tinyworld_topology"
SEED_OFFSET = 1_000  # ours: the test set's seed, other than training's per-round seeds (overlap: held_out_keys)

TEMPLATES = {  # ours: one fixed wording per pattern, following the formula's variables
    "1p": "What is {a1} {r1}?",
    "2p": "What is the thing that {a1} is {r1} {r2}?",
    "3p": "What is the thing that the thing that {a1} is {r1} is {r2} {r3}?",
    "2i": "What is both {a1} {r1} and {a2} {r2}?",
    "ip": "What is the thing that both {a1} is {r1} and {a2} is {r2} {r3}?",
    "pi": "What is the thing that {a1} is {r1} {r2}, that {a2} is also {r3}?",
}


def question_text(query: topology.Query, titles: dict[int, str]) -> str:
    """The template of ``query``'s pattern filled with its anchors' titles and its relations.

    Example:
        >>> from workbench.kg.topology import Query
        >>> question_text(Query("2i", (1, 2), ("born in", "located in"), (3,)), {1: "Ann", 2: "Bo"})
        'What is both Ann born in and Bo located in?'
    """
    fields = {f"a{i + 1}": titles[a] for i, a in enumerate(query.anchors)}
    fields.update({f"r{i + 1}": r for i, r in enumerate(query.relations)})
    return TEMPLATES[query.pattern].format(**fields)


def askable_queries(graph: topology.TopologyGraph, pattern: str, n: int, seed: int,
                    max_answers: int = topology.MAX_ANSWERS) -> list[topology.Query]:
    """Up to ``n`` queries of ``pattern`` none of whose anchors is a member of its answer set: the
    first such of ``topology.sample_queries``' draws (which extend with ``n``, never reorder).

    Example:
        >>> from workbench.kg.walks import CSRGraph
        >>> g = topology.TopologyGraph.from_csr(CSRGraph.from_edges([0, 1, 1, 2], [1, 0, 2, 3], [0, 1, 1, 1], 4))
        >>> [(q.anchors, q.answers) for q in topology.sample_queries(g, "2p", 5, seed=0)]
        [((1,), (3,)), ((1,), (1,)), ((0,), (0, 2))]
        >>> [(q.anchors, q.answers) for q in askable_queries(g, "2p", 5, seed=0)]
        [((1,), (3,))]
    """
    k = n
    while True:
        drawn = topology.sample_queries(graph, pattern, k, seed=seed, max_answers=max_answers)
        kept = [q for q in drawn if not set(q.anchors) & set(q.answers)]
        if len(kept) >= n or len(drawn) < k:
            return kept[:n]
        k += n - len(kept)


def ensure_topology_questions(con, per_pattern: int = 100, seed: int = 0, split: str = "test",
                              max_answers: int = topology.MAX_ANSWERS) -> int:
    """Write ``per_pattern`` questions of each pattern (fewer where the graph has fewer) as
    ``questions`` rows of dataset :data:`DATASET`, split ``split``, family = the pattern, answers =
    the titles of the complete answer set, chain = anchors then answers; returns how many the store
    holds. A store that already holds the split is left as it is (deterministic by seed, so built
    once). One transaction.

    Example:
        >>> from workbench.kg.tinyworld import build_world
        >>> con = store.connect(":memory:"); _ = build_world(con, preset="smoke", seed=0)
        >>> ensure_topology_questions(con, per_pattern=2)
        12
    """
    if per_pattern < 1:
        raise ValueError(f"per_pattern: expected >= 1 questions per pattern, got {per_pattern}")
    have = con.execute("SELECT count(*) FROM questions WHERE dataset = ? AND split = ?", [DATASET, split]).fetchone()[0]
    if have:
        return int(have)
    graph = topology.TopologyGraph.from_store(con)
    titles = dict(con.execute("SELECT entity_id, title FROM entities").fetchall())
    queries = [q for p in topology.PATTERNS
               for q in askable_queries(graph, p, per_pattern, seed=seed + SEED_OFFSET, max_answers=max_answers)]
    if not queries:
        raise ValueError("the store's graph grounds no topology query: build a world first (workbench world)")
    with store.transaction(con):
        first = store.next_id(con, "questions", "question_id")
        con.executemany("INSERT INTO questions VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'topology')", [
            (first + i, DATASET, split, q.pattern, question_text(q, titles), [titles[a] for a in q.answers],
             [*q.anchors, *q.answers], topology.DEPTH[q.pattern]) for i, q in enumerate(queries)])
    return len(queries)


def query_key(query: topology.Query, titles: dict[int, str]) -> tuple[str, tuple[int, ...], str]:
    """What identifies a query as a held-out question: its pattern, its anchors and its question
    text (the template names the relations; the store keeps the text, not the labels).

    Example:
        >>> from workbench.kg.topology import Query
        >>> query_key(Query("1p", (1,), ("born in",), (3,)), {1: "Ann"})
        ('1p', (1,), 'What is Ann born in?')
    """
    return query.pattern, tuple(query.anchors), question_text(query, titles)


def held_out_keys(con) -> frozenset:
    """The :func:`query_key` of every question the store holds under :data:`DATASET` (any split):
    the queries training must not draw. Empty when the set was never built.

    Example:
        >>> from workbench.kg.tinyworld import build_world
        >>> con = store.connect(":memory:"); _ = build_world(con, preset="smoke", seed=0)
        >>> len(held_out_keys(con))
        0
        >>> n = ensure_topology_questions(con, per_pattern=2); 0 < len(held_out_keys(con)) <= n
        True
    """
    rows = con.execute("SELECT family, chain, question FROM questions WHERE dataset = ?", [DATASET]).fetchall()
    return frozenset((f, tuple(chain[:topology.N_ANCHORS[f]]), q) for f, chain, q in rows)
