"""EoG's topology tasks as a task source of the round (seed 004, Symbolically Verifiable Topology
Synthesis; ``MethodSpec.task_source = 'kg_topology'``).

Each task is one query of Table 6 (``kg.topology``: 1p 2p 3p 2i ip pi) executed on the KG, so it
comes with its complete answer set. The proposer reads the query's skeleton (pattern, formula,
anchors with their passages, relations, and the answer set) and writes one question with one
answer; the gate (:func:`topology_gate`) admits it when the answer is a member of the set, the
question names no non-anchor entity of the query (no answer-set member), is one wh-question, and
the verifier's Q (Eq. 6's aggregation, :func:`gate.quality`) clears the threshold. The solver then
explores the KG with EoG's graph tools (``search/graph_tools.py``; ``MethodSpec.graph_tools``),
answers a ``;``-separated set, and is scored against the whole set
(``rewards.SOLVER_REWARDS['eog_hit1' | 'eog_f1']``); the proposer by the variance of those scores
(``eog_variance``). The proposer's prompt is ``method.topology_prompt``: ``query``, the skeleton
(:func:`render_query`, seed 004's "guided by a skeleton"; the default), or ``witness`` (ours).

Ours, where EoG is silent: the prompts' wording (the skeleton also shows each anchor's first
passage); a task's pattern drawn uniformly from ``method.topology_patterns`` each slot; the answer
set bounded by ``method.topology_max_answers``;
a hit names an answer entity's title (aliases not counted); the verifier below; tasks are never
written back (their ``chain_id`` is -1, as SSP's entities).

Example:
    >>> v = TopologyView(-1, "2p:1:born in|located in", [1, 3], ["Ann", "Italy"], ["born in", "located in"],
    ...                  ["Ann is an author.", "Italy is a country."], pattern="2p", n_anchors=1)
    >>> v.anchor_titles, v.answer_titles, v.hops
    (['Ann'], ['Italy'], 2)
    >>> [x.admitted for x in topology_gate(v, [("In which country was the author Ann born?", "Italy"),
    ...                                        ("Which country is Italy?", "Italy")], TopologyVerifier(), 0.5, 1)]
    [True, False]
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from workbench.kg import topology, topology_qa
from workbench.method.gate import (STOPWORDS, Verdict, _matches, _names, _words, check_candidate, clarity, gate,
                                   weak_reason)
from workbench.method.memory import ChainView
from workbench.policy import protocol
from workbench.policy.generation import Choices
from workbench.scoring import normalize_answer

# Which relations end at the answer variable x (Table 6): the answer-focus dimension reads them.
ANSWER_RELATIONS = {"1p": (0,), "2p": (1,), "3p": (2,), "2i": (0, 1), "ip": (2,), "pi": (1, 2)}

TOPOLOGY_INSTRUCTION = (
    "Write one question from this logical query over linked articles. Its anchors may be named; the "
    "answer must be one of the listed answers, and the question must not name any answer. Follow "
    "the relations from the anchors to x. Write <question> ... </question> <answer> ... </answer>.\n"
)


@dataclass(frozen=True)
class TopologyView(ChainView):
    """One executed query as the round reads it: ``entity_ids``/``titles``/``passages`` hold the
    anchors first, then the complete answer set; ``relations`` are the query's r1..rk (not a chain's
    consecutive links). ``chain_id`` -1: no pool chain, no write-back."""

    pattern: str = ""
    n_anchors: int = 0
    # One grounding of every variable (kg.topology.VARIABLES order) deriving the first answer, with
    # titles and first passages: what the witness prompt renders (empty when built without a graph).
    witness: tuple = ()
    witness_titles: tuple = ()
    witness_passages: tuple = ()

    @property
    def anchor_titles(self) -> list[str]:
        return list(self.titles[:self.n_anchors])

    @property
    def answer_titles(self) -> list[str]:
        return list(self.titles[self.n_anchors:])

    @property
    def hops(self) -> int:
        return topology.DEPTH[self.pattern]


def parse_patterns(text: str) -> tuple[str, ...]:
    """``method.topology_patterns`` ("1p,2p,...") as a tuple; an unknown or empty one raises ValueError.

    Example:
        >>> parse_patterns("1p, 2i")
        ('1p', '2i')
    """
    names = tuple(p.strip() for p in str(text).split(",") if p.strip())
    bad = [p for p in names if p not in topology.PATTERNS]
    if not names or bad:
        raise ValueError(f"method.topology_patterns: expected a comma-separated subset of "
                         f"{','.join(topology.PATTERNS)}, got {text!r}")
    return names


def _pool(graph: topology.TopologyGraph, pattern: str, n: int, seed: int, max_answers: int,
          held_out: Callable[[topology.Query], bool] | None) -> list[topology.Query]:
    """Up to ``n`` queries of ``pattern`` (``topology.sample_queries``) that ``held_out`` does not
    claim and whose answer sets hold none of their anchors (such a question names an answer: the
    gate rejects it, as the held-out set leaves it out, ``topology_qa.askable_queries``): a query
    left out is redrawn by asking the same seed for more (its draws extend, never reorder)."""
    k = n
    while True:
        drawn = topology.sample_queries(graph, pattern, k, seed=seed, max_answers=max_answers)
        kept = [q for q in drawn if not set(q.anchors) & set(q.answers) and (held_out is None or not held_out(q))]
        if len(kept) >= n or len(drawn) < k:
            return kept[:n]
        k += n - len(kept)


def draw_queries(graph: topology.TopologyGraph, patterns: Sequence[str], n: int, seed: int,
                 max_answers: int, held_out: Callable[[topology.Query], bool] | None = None) -> list[topology.Query]:
    """``n`` queries, each of a pattern drawn uniformly from ``patterns`` (ours), deterministic by
    ``seed``; a pattern the graph cannot ground is redrawn among the others. A query ``held_out``
    claims (the store's test set, ``topology_qa.held_out_keys``) is redrawn: training never poses
    a test query; so is one whose answer set holds one of its anchors (:func:`_pool`).

    Example:
        >>> from workbench.kg.walks import CSRGraph
        >>> g = topology.TopologyGraph.from_csr(CSRGraph.from_edges([0, 1], [1, 2], [0, 1], 3))
        >>> [q.pattern for q in draw_queries(g, ("1p", "2p"), 3, seed=0, max_answers=5)]
        ['2p', '1p', '1p']
    """
    rng = np.random.default_rng(seed)
    pools = {p: _pool(graph, p, n, seed, max_answers, held_out) for p in patterns}
    if not any(pools.values()):
        raise ValueError("the store's graph grounds none of method.topology_patterns "
                         f"{','.join(patterns)} with 1..{max_answers} answers")
    taken: Counter = Counter()
    out = []
    for i in rng.integers(len(patterns), size=n):
        p = patterns[int(i)]
        if taken[p] >= len(pools[p]):  # exhausted: the next pattern that still has queries
            p = next((q for q in patterns if taken[q] < len(pools[q])), None)
            if p is None:
                break
        out.append(pools[p][taken[p]])
        taken[p] += 1
    return out


def topology_views(con, queries: Sequence[topology.Query], titles: dict[int, str],
                   graph: topology.TopologyGraph | None = None) -> list[TopologyView]:
    """One :class:`TopologyView` per query, with each entity's first passage (the proposer reads
    the anchors' and answers' lead text, as the chain prompt reads its nodes'); with ``graph``,
    each view carries a witness of its first answer (``topology.witness``) for the witness prompt.

    Example:
        >>> from workbench import store
        >>> con = store.connect(":memory:")
        >>> q = topology.Query("1p", (1,), ("born in",), (2,))
        >>> topology_views(con, [q], {1: "Ann", 2: "Rome"})[0].titles
        ['Ann', 'Rome']
    """
    witnesses = [topology.witness(graph, q) for q in queries] if graph is not None else [()] * len(queries)
    ids = sorted({e for q, w in zip(queries, witnesses) for e in (*q.anchors, *q.answers, *w)})
    first = dict(con.execute(
        "SELECT entity_id, arg_min(text, paragraph) FROM passages WHERE entity_id IN (SELECT unnest(?)) "
        "GROUP BY entity_id", [ids]).fetchall()) if ids else {}
    views = []
    for q, w in zip(queries, witnesses):
        ents = [*q.anchors, *q.answers]
        views.append(TopologyView(-1, f"{q.pattern}:{','.join(map(str, q.anchors))}:{'|'.join(q.relations)}",
                                  ents, [titles[e] for e in ents], list(q.relations), [first.get(e, "") for e in ents],
                                  pattern=q.pattern, n_anchors=len(q.anchors), witness=tuple(w),
                                  witness_titles=tuple(titles[e] for e in w),
                                  witness_passages=tuple(first.get(e, "") for e in w)))
    return views


def render_query(view: TopologyView, max_chars: int = 300) -> str:
    """The query's skeleton as the proposer reads it: pattern and formula, each anchor with its
    passage, the relations r1..rk, and the answer set x.

    Example:
        >>> v = TopologyView(-1, "", [1, 2], ["Ann", "Rome"], ["born in"], ["Ann is an author.", ""],
        ...                  pattern="1p", n_anchors=1)
        >>> print(render_query(v))
        Pattern 1p: r1(a, x)
        a = Ann: Ann is an author.
        r1 = born in
        x is one of: Rome
    """
    names = ["a"] if view.n_anchors == 1 else [f"a{i + 1}" for i in range(view.n_anchors)]
    lines = [f"Pattern {view.pattern}: {topology.FORMULAS[view.pattern]}"]
    lines += [f"{n} = {t}: {p[:max_chars]}".rstrip() for n, t, p in zip(names, view.anchor_titles, view.passages)]
    lines += [f"r{i + 1} = {r}" for i, r in enumerate(view.relations)]
    lines.append("x is one of: " + "; ".join(view.answer_titles))
    return "\n".join(lines)


# Ours (EoG gives its proposer the query, not a chain): how the witness prompt linearises a
# pattern. The main path is the longest anchor-to-answer path of Table 6's formula, as
# (variables in order, the relation index of each link); the other anchor's relation, if any, is
# one joining branch (anchor variable, relation index, the variable it joins), rendered after the
# path as a numbered node with an arrow to the node it joins.
LINEARISATION = {
    "1p": (("a", "x"), (0,), None),
    "2p": (("a", "y", "x"), (0, 1), None),
    "3p": (("a", "y1", "y2", "x"), (0, 1, 2), None),
    "2i": (("a1", "x"), (0,), ("a2", 1, "x")),
    "ip": (("a1", "y", "x"), (0, 2), ("a2", 1, "y")),
    "pi": (("a1", "y", "x"), (0, 1), ("a2", 2, "x")),
}
TOPOLOGY_PROMPTS = ("witness", "query")
# The chain prompt's instruction (protocol.PROPOSER_INSTRUCTION, which the warm start was taught)
# made true of a query (ours): the answer is node {x} (or any member of its set, which the gate
# accepts), and only the answer must not be named, so the anchors may be. On tiny it admits as many
# as the chain instruction verbatim (31/120 greedy vs 33; LOG.md), and a proposer that reads it (the
# paper tier decodes its answer freely) is not told to pick any chain entity or hide the anchors.
WITNESS_INSTRUCTION = ("Write one question from this chain of linked articles. Its answer is entity [{x}]. "
                       "The question must follow the relations, must not name the answer, and must have one "
                       "short answer. Write <question> ... </question> <answer> ... </answer>.\n")


def render_witness(view: TopologyView, max_chars: int = 300) -> str:
    """The query as a chain in the chain prompt's format (``protocol.proposer_user_message``, what
    the warm start's proposer demonstrations teach): the witness of its first answer along the
    main path of :data:`LINEARISATION`, then the joining branch of an intersection as
    ``[k] a2: passage`` and ``    --r--> [j]``, j the node it joins (ours).

    Example:
        >>> v = TopologyView(-1, "", [1, 2, 3], ["Ann", "Bo", "Rome"], ["born in", "lives in"], ["", "", ""],
        ...                  pattern="2i", n_anchors=2, witness=(1, 2, 3), witness_titles=("Ann", "Bo", "Rome"),
        ...                  witness_passages=("Ann is an author.", "Bo is a poet.", "Rome is a city."))
        >>> print(render_witness(v).partition("Chain:")[2].strip())
        [1] Ann: Ann is an author.
            --born in-->
        [2] Rome: Rome is a city.
        [3] Bo: Bo is a poet.
            --lives in--> [2]
    """
    if len(view.witness) != len(topology.VARIABLES[view.pattern]):
        raise ValueError(f"view {view.hash!r}: no witness (build views with topology_views(..., graph=...)) "
                         "for method.topology_prompt = 'witness'")
    var = {v: i for i, v in enumerate(topology.VARIABLES[view.pattern])}
    path, rels, branch = LINEARISATION[view.pattern]
    order = [var[v] for v in path]
    text = (WITNESS_INSTRUCTION.format(x=path.index("x") + 1) + "Chain:\n"
            + protocol.render_chain([view.witness_titles[i] for i in order], [view.relations[r] for r in rels],
                                    [view.witness_passages[i] for i in order], max_chars) + "\n")
    if branch is not None:
        anchor, r, joins = branch
        i = var[anchor]
        text += (f"[{len(path) + 1}] {view.witness_titles[i]}: {view.witness_passages[i][:max_chars]}\n"
                 f"    --{view.relations[r]}--> [{path.index(joins) + 1}]\n")
    return text


def topology_prompts(policy_chat_prompt: Callable[[str], str], views: Sequence[TopologyView], m: int = 1,
                     prompt: str = "witness") -> list[str]:
    """One proposer prompt per query, repeated ``m`` times (query-major), through the chat format.
    ``prompt`` is ``method.topology_prompt``: 'witness' (:func:`render_witness`, the chain format)
    or 'query' (:data:`TOPOLOGY_INSTRUCTION` and :func:`render_query`, the skeleton).

    Example:
        >>> v = TopologyView(-1, "", [1, 2], ["Ann", "Rome"], ["born in"], ["", ""], pattern="1p", n_anchors=1)
        >>> topology_prompts(lambda u: u, [v], 2, prompt="query")[1].startswith("Write one question from this logical query")
        True
    """
    if m < 1:
        raise ValueError(f"m (candidates per query) must be >= 1, got {m!r}")
    return [policy_chat_prompt(topology_user_message(v, prompt)) for v in views for _ in range(m)]


def topology_user_message(view: TopologyView, prompt: str = "witness") -> str:
    """The proposer's user message for one query, before the chat format (what a round prompts
    with and what the topology warm start demonstrates): ``prompt`` is ``method.topology_prompt``.

    Example:
        >>> v = TopologyView(-1, "", [1, 2], ["Ann", "Rome"], ["born in"], ["", ""], pattern="1p", n_anchors=1)
        >>> topology_user_message(v, "query").splitlines()[-1]
        'x is one of: Rome'
    """
    if prompt not in TOPOLOGY_PROMPTS:
        raise ValueError(f"method.topology_prompt: expected one of {list(TOPOLOGY_PROMPTS)}, got {prompt!r}")
    if prompt == "witness":
        return render_witness(view)
    return TOPOLOGY_INSTRUCTION + "Query:\n" + render_query(view) + "\n"


def topology_choices(views: Sequence[TopologyView], m: int) -> Choices:
    """``method.proposer_answer_choices`` for queries: the ``<answer>`` may only spell a member of
    the answer set (the chain form, ``loop.answer_choices``, allows every chain entity).

    Example:
        >>> v = TopologyView(-1, "", [1, 2, 3], ["Ann", "Rome", "Oslo"], ["born in"], ["", "", ""],
        ...                  pattern="1p", n_anchors=1)
        >>> topology_choices([v], 1).per_row
        [['Rome</answer>', 'Oslo</answer>']]
    """
    return Choices(protocol.ANSWER_OPEN, [[t + protocol.ANSWER_CLOSE for t in v.answer_titles]
                                          for v in views for _ in range(m)])


def filter_topology_candidate(view: TopologyView, candidate: tuple[str, str] | None) -> Verdict | None:
    """The deterministic filter for a query: a rejecting Verdict, or None when it passes.

    Rejections, in order: 'extraction failed', 'empty', 'answer not in answer set' (any member
    counts), 'leak: names answer X' (any member of the answer set, whole word, case-insensitive;
    the anchors may be named), 'misses anchor: X' (a query of two anchors, 2i ip pi: a question
    without one of them asks a wider query, whose answers are a superset of the set the solver is
    scored against; ours), 'not one wh-question'.

    Example:
        >>> v = TopologyView(-1, "", [1, 2, 3], ["Ann", "Rome", "Oslo"], ["born in"], ["", "", ""],
        ...                  pattern="1p", n_anchors=1)
        >>> filter_topology_candidate(v, ("Where was Ann born, Oslo or Bergen?", "Rome")).reason
        "leak: names answer 'Oslo'"
        >>> v2 = TopologyView(-1, "", [1, 2, 3], ["Ann", "Bo", "Rome"], ["born in", "lives in"], ["", "", ""],
        ...                   pattern="2i", n_anchors=2)
        >>> filter_topology_candidate(v2, ("Where was Ann born?", "Rome")).reason
        "misses anchor: 'Bo'"
    """
    def query_checks(question: str, answer: str) -> tuple[str, bool] | None:
        if normalize_answer(answer) not in {normalize_answer(t) for t in view.answer_titles}:
            return "answer not in answer set", False
        named = next((t for t in view.answer_titles if _names(question, t)), None)
        if named is not None:
            return f"leak: names answer {named!r}", True
        missing = next((t for t in view.anchor_titles if not _names(question, t)), None) if view.n_anchors > 1 else None
        return (f"misses anchor: {missing!r}", False) if missing is not None else None

    return check_candidate(candidate, query_checks)


class TopologyVerifier:
    """Deterministic verifier of a question against its query (the tiny tier; ours, after
    ``gate.StructuralVerifier``), from the question's content words (stopwords and wh-words out),
    a word counting where any form of it occurs (:func:`gate.same_word`: 'Who is the director of X?'
    touches `directed by`):

    * faithfulness: the mean of (content words found in the relation labels, anchor titles or
      anchor passages) and (anchors named in the question): the question must be grounded;
    * multi_hop: the fraction of the query's relations touched (a label content word occurs), so a
      question must walk the whole skeleton (1p has one relation, and needs one);
    * answer_focus: 1 when a relation ending at x (:data:`ANSWER_RELATIONS`) is touched;
    * clarity: one '?' at the end and ``min_words``..``max_words`` words.

    Word forms are always on here; the chain methods' ``gate.StructuralVerifier`` counts them only
    with ``method.verifier_vocabulary`` ``forms`` or ``forms_types`` (the config's default).
    """

    def __init__(self, min_words: int = 4, max_words: int = 40):
        self.min_words, self.max_words = min_words, max_words

    def judge(self, view: TopologyView, candidates: Sequence[tuple[str, str]]) -> list[Verdict]:
        rel_words = [set(_words(r)) - STOPWORDS for r in view.relations]
        anchors = view.anchor_titles
        vocab = set().union(*rel_words, *(set(_words(t + " " + p)) for t, p in zip(anchors, view.passages)))
        verdicts = []
        for i, (question, answer) in enumerate(candidates):
            words = _words(question)
            content = [w for w in words if w not in STOPWORDS]
            touched = {j for j, rw in enumerate(rel_words) if any(_matches(w, rw) for w in content)}
            grounded = sum(_matches(w, vocab) for w in content) / len(content) if content else 0.0
            scores = {
                "faithfulness": (grounded + sum(_names(question, a) for a in anchors) / len(anchors)) / 2,
                "multi_hop": len(touched) / len(rel_words),
                "answer_focus": 1.0 if touched & set(ANSWER_RELATIONS[view.pattern]) else 0.0,
                "clarity": clarity(question, len(words), self.min_words, self.max_words),
            }
            verdicts.append(Verdict(i, question, answer, True, scores=scores, reason=weak_reason(scores)))
        return verdicts


def topology_gate(view: TopologyView, candidates: Sequence[tuple[str, str] | None], verifier, threshold: float,
                  top_k: int, aggregation: str = "mean") -> list[Verdict]:
    """Eq. 6's gate on the M candidates of one query: :func:`filter_topology_candidate`, then the
    verifier's Q (:func:`gate.quality`); the top k with Q >= threshold (and Q > 0) are admitted,
    ties by candidate order (as ``gate.gate``)."""
    return gate(view, candidates, verifier, threshold, top_k, aggregation, prefilter=filter_topology_candidate)


def curriculum_metrics(tasks) -> dict:
    """The round's synthesis success per topology (seed 004, Fig. 7): per pattern, the queries the
    proposer wrote for (``topology_tasks``), those with an admitted question (``topology_admitted``)
    and their ratio (``topology_success``). Empty when no task is a query (every other task source),
    so other methods' metrics are unchanged.

    Example:
        >>> from types import SimpleNamespace as NS
        >>> v = TopologyView(-1, "", [1, 2], ["Ann", "Rome"], ["born in"], ["", ""], pattern="1p", n_anchors=1)
        >>> t = [NS(chain=v, candidates=[NS(verdict=Verdict(0, "q", "a", True, admitted=True))]),
        ...      NS(chain=v, candidates=[NS(verdict=Verdict(0, "q", "a", True))])]
        >>> curriculum_metrics(t)["topology_success"]
        {'1p': 0.5}
    """
    queries = [t for t in tasks if isinstance(t.chain, TopologyView)]
    if not queries:
        return {}
    n = Counter(t.chain.pattern for t in queries)
    ok = Counter(t.chain.pattern for t in queries if any(c.verdict.admitted for c in t.candidates))
    order = [p for p in topology.PATTERNS if p in n]
    return {"topology_tasks": {p: n[p] for p in order}, "topology_admitted": {p: ok[p] for p in order},
            "topology_success": {p: ok[p] / n[p] for p in order}}


def held_out_queries(con, titles: dict[int, str]) -> Callable[[topology.Query], bool] | None:
    """Whether a query is one of the store's held-out topology questions (``topology_qa``), or
    None when the store holds none (then draws are exactly those without the check).

    Example:
        >>> from workbench import store
        >>> held_out_queries(store.connect(":memory:"), {}) is None
        True
    """
    keys = topology_qa.held_out_keys(con)
    return (lambda q: topology_qa.query_key(q, titles) in keys) if keys else None


def sample_views(con, per_pattern: int = 1, seed: int = 0, patterns: Sequence[str] = topology.PATTERNS,
                 max_answers: int = topology.MAX_ANSWERS) -> list[TopologyView]:
    """``per_pattern`` executed queries of each pattern as views (pattern-major), for showing; the
    store's held-out test queries are left out, as in training (:func:`draw_queries`).

    Example:
        >>> from workbench import store
        >>> from workbench.kg.tinyworld import build_world
        >>> con = store.connect(":memory:"); _ = build_world(con, preset="smoke", seed=0)
        >>> [v.pattern for v in sample_views(con)]
        ['1p', '2p', '3p', '2i', 'ip', 'pi']
    """
    graph = topology.TopologyGraph.from_store(con)
    titles = dict(con.execute("SELECT entity_id, title FROM entities").fetchall())
    held_out = held_out_queries(con, titles)
    queries = [q for p in patterns for q in _pool(graph, p, per_pattern, seed, max_answers, held_out)]
    return topology_views(con, queries, titles, graph)


def write_questions(policy, views: Sequence[TopologyView], cfg, seed: int = 0, temperature: float = 0.0) -> list[Verdict]:
    """The proposer (``policy``) writes one question per query, as a round does (the prompt of
    ``method.topology_prompt``, ``method.proposer_answer_choices``, ``cfg.method``'s gate threshold), greedily by
    default; returns the gate's verdict on each (question, answer, admitted, reason).

    Example:
        >>> # verdicts = write_questions(Policy.load(base), sample_views(con), config.preset("tiny"))
    """
    m = cfg.method
    prompts = topology_prompts(policy.chat_prompt, views, 1, m.topology_prompt)
    choices = topology_choices(views, 1) if m.proposer_answer_choices else None
    gens = policy.generate(prompts, max_new_tokens=m.proposer_max_new_tokens, temperature=temperature,
                           top_p=cfg.rollout.top_p, stop=(protocol.ANSWER_CLOSE,), seed=seed, choices=choices)
    return [topology_gate(v, [protocol.parse_candidate(g.text)], TopologyVerifier(), m.gate_threshold, 1,
                          m.gate_aggregation)[0] for v, g in zip(views, gens)]


def admission_counts(views: Sequence[TopologyView], verdicts: Sequence[Verdict]) -> dict:
    """The gate's outcomes per pattern (:func:`write_questions`' verdicts): per pattern a count of
    'admitted' and of each rejection's kind (the reason up to its ':', e.g. 'weak', 'leak',
    'extraction failed'), plus the totals over patterns under 'all'.

    Example:
        >>> v = TopologyView(-1, "", [1, 2], ["Ann", "Rome"], ["born in"], ["", ""], pattern="1p", n_anchors=1)
        >>> admission_counts([v, v], [Verdict(0, "q", "a", True, admitted=True),
        ...                           Verdict(0, None, None, False, reason="extraction failed")])
        {'1p': {'admitted': 1, 'extraction failed': 1}, 'all': {'admitted': 1, 'extraction failed': 1}}
    """
    if len(views) != len(verdicts):
        raise ValueError(f"verdicts: expected one per view ({len(views)}), got {len(verdicts)}")
    per: dict[str, Counter] = {}
    for v, x in zip(views, verdicts):
        per.setdefault(v.pattern, Counter())["admitted" if x.admitted else x.reason.split(":")[0]] += 1
    out = {p: dict(sorted(per[p].items())) for p in topology.PATTERNS if p in per}
    out["all"] = dict(sorted(sum(per.values(), Counter()).items()))
    return out
