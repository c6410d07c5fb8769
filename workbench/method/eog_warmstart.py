"""EoG's topology warm start (seed 004; issue 19): the tiny backbone taught EoG's query prompt.

The default warm start's proposer demonstrations are chains (``policy.warmstart.proposer_demo``);
it never saw a query of Table 6 and writes no admissible question for the intersection patterns
2i/ip/pi (LOG.md: 43 of 45 rejected as 'misses anchor'). :class:`TopologyDemos` adds, in every
throwaway world of the warm start, queries of every pattern (``topology.sample_queries``) as the
round prompts them (``eog.topology_user_message``, ``method.topology_prompt``), each with a target
question written from a template over the query's anchors and relation labels that names every
anchor and no answer, and the witness's answer (the prompt's node [k]). They take
:data:`TOPOLOGY_SHARE` of the proposer demonstrations, so the mix's size and its solver
demonstrations are the default warm start's (``policy.warmstart.demo_set``).

Ours, where EoG is silent (its proposer is an instruction-tuned LLM): the templates
(:data:`DEMO_TEMPLATES`, drawn uniformly per query, deterministic by the world's seed; none is the
held-out set's wording, ``topology_qa.TEMPLATES``, so a proposer that learns them does not write
the test questions), :data:`TOPOLOGY_SHARE`, :data:`PER_PATTERN` queries of each pattern per
throwaway world. A query whose anchor or relation names a member of its answer set cannot be
asked without leaking it and is skipped (:func:`askable`; on the tiny world 13% of 2p, 34% of ip
and 10% of pi draws: an inverse relation leads back to the anchor; twice as many are drawn).

With EoG's graph tools (``method.graph_tools``, on for the EoG rows; ``search/graph_tools.py``) the
warm start also teaches the solver to explore the graph: every solver demonstration uses the tools
instead of document search (``policy.warmstart.graph_solver_demo`` on the five families' questions),
and :data:`GRAPH_SOLVER_SHARE` of them are queries of every pattern (:data:`SOLVER_PER_PATTERN` per
pattern per world) asked by the same templates, answered by a perfect solver
(:func:`topology_solver_calls`: one ``<neighbors>`` call per relation of the query, an intersection's
branches each followed, then the answer set ``;``-separated), so the base answers sets.

The result is its own warm start (cache key ``params["topology"]``; the default's key is
unchanged): ``workbench warmstart --topology``, and the base of every EoG row
(``MethodSpec.topology_warmstart``; ``method.train`` picks it).

Example:
    >>> from workbench import store
    >>> from workbench.kg.tinyworld import build_world
    >>> con = store.connect(":memory:"); _ = build_world(con, preset="smoke", seed=0)
    >>> demos = TopologyDemos(per_pattern=4)(con, seed=1, eos="<|im_end|>")
    >>> [d.family for d in demos][:6]
    ['topology:1p', 'topology:2p', 'topology:3p', 'topology:2i', 'topology:ip', 'topology:pi']
    >>> len(demos), demos[0].segments[0][0].startswith("<question>")
    (24, True)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from workbench.kg import topology
from workbench.method import eog
from workbench.method.gate import _names
from workbench.policy import protocol
from workbench.policy.warmstart import DEMO_MAX_LISTED, Demo, names_relation, tool_demo

TOPOLOGY_SHARE = 0.5  # ours: share of the proposer demonstrations that are queries (the rest chains)
PER_PATTERN = 4  # ours: queries of each pattern per throwaway world (fresh names, as the chain demos)
GRAPH_SOLVER_SHARE = 0.25  # ours: share of the solver demonstrations that answer a query's set with the graph tools
SOLVER_PER_PATTERN = 12  # ours: such queries of each pattern per throwaway world
DEMO_VERSION = 2  # bump by hand when the demonstrations change (it enters the cache key); 2: graph-tool solver

# Ours: target questions over a query's anchors {a1} {a2} and relation labels {r1}..{r3}, in
# Table 6's variables; only function words besides, so the deterministic verifier finds every
# word grounded (``eog.TopologyVerifier``), and every anchor named (the gate's 'misses anchor').
DEMO_TEMPLATES = {
    "1p": ("Which one is {a1} {r1}?", "{a1} is {r1} which one?", "What does {a1} have as {r1}?"),
    "2p": ("What is the one that {a1} is {r1} {r2}?", "Which one is {r2} of the one that {a1} is {r1}?"),
    "3p": ("What is the one that the one that {a1} is {r1} is {r2} {r3}?",
           "Which one is {r3} of the one {r2} of the one that {a1} is {r1}?"),
    "2i": ("Which one is {a1} {r1} and also {a2} {r2}?", "What is it that {a1} is {r1} and {a2} is {r2}?"),
    "ip": ("What is the one that {a1} is {r1} and {a2} is {r2} {r3}?",
           "Which one is {r3} of the one that {a1} is {r1} and {a2} is also {r2}?"),
    "pi": ("What is the one that {a1} is {r1} {r2}, and that {a2} is also {r3}?",
           "Which one is {a2} {r3} and also {r2} of the one that {a1} is {r1}?"),
}


def demo_question(view: eog.TopologyView, template: int = 0) -> str:
    """Template ``template`` of the view's pattern (:data:`DEMO_TEMPLATES`) over its anchors and relations.

    Example:
        >>> v = eog.TopologyView(-1, "", [1, 2, 3], ["Ann", "Bo", "Rome"], ["born in", "lives in"],
        ...                      ["", "", ""], pattern="2i", n_anchors=2)
        >>> demo_question(v)
        'Which one is Ann born in and also Bo lives in?'
    """
    forms = DEMO_TEMPLATES[view.pattern]
    fields = {f"a{i + 1}": t for i, t in enumerate(view.anchor_titles)}
    fields.update({f"r{i + 1}": r for i, r in enumerate(view.relations)})
    return forms[template % len(forms)].format(**fields)


def askable(view: eog.TopologyView) -> bool:
    """Whether a question naming the view's anchors and relations can avoid naming an answer: no
    answer title is named (whole word) by an anchor title or a relation label.

    Example:
        >>> v = eog.TopologyView(-1, "", [1, 2], ["University of Dasu", "Dasu"], ["situated in"], ["", ""],
        ...                      pattern="1p", n_anchors=1)
        >>> askable(v)
        False
    """
    said = " ".join([*view.anchor_titles, *view.relations])
    return not any(_names(said, t) for t in view.answer_titles)


def topology_solver_calls(tools, view: eog.TopologyView) -> tuple[list[tuple[str, str, str]], list[str]] | None:
    """A perfect graph-tool solver on a query (ours): one ``<neighbors>`` call per relation of Table 6's
    formula, carrying every entity the previous call reached (``a | r1``, then ``y1; y2 | r2``), each
    intersection's branches followed one after the other and their common entities kept; then the
    answer set in the tools' order, at most ``DEMO_MAX_LISTED``. Returns (calls as ``(kind, text,
    rendered)``, answers), or None where an intermediate set lists more than ``DEMO_MAX_LISTED`` or the
    tools' set is not the query's (a title that names two entities).

    Example:
        >>> # calls, answers = topology_solver_calls(GraphTools(con), view)
    """
    calls: list[tuple[str, str, str]] = []
    title = tools.titles

    def hop(entities, r: int) -> list[int] | None:
        if not entities or len(entities) > DEMO_MAX_LISTED:
            return None
        text = "; ".join(title[e] for e in entities) + f" | {view.relations[r]}"
        hit = tools.call("neighbors", text)
        calls.append(("neighbors", text, tools.render(hit)))
        return list(hit.found)

    def both(a: list[int] | None, b: list[int] | None) -> list[int] | None:
        return None if a is None or b is None else [e for e in a if e in b]

    a = view.entity_ids[:view.n_anchors]
    p = view.pattern
    if p in ("1p", "2p", "3p"):
        found: list[int] | None = [a[0]]
        for r in range(int(p[0])):
            found = hop(found, r)
            if found is None:
                return None
    elif p == "2i":
        found = both(hop([a[0]], 0), hop([a[1]], 1))
    elif p == "ip":
        y = both(hop([a[0]], 0), hop([a[1]], 1))
        found = hop(y, 2) if y else None
    else:  # pi
        y = hop([a[0]], 0)
        found = both(hop(y, 1) if y else None, hop([a[1]], 2))
    if not found or set(found) != set(view.entity_ids[view.n_anchors:]):
        return None
    return calls, [title[e] for e in found[:DEMO_MAX_LISTED]]


@dataclass(frozen=True)
class TopologyDemos:
    """The warm start's :class:`policy.warmstart.ExtraDemos` for EoG: ``per_pattern`` queries of
    every pattern per throwaway world, prompted with ``prompt`` (``method.topology_prompt``), answer
    sets of at most ``max_answers`` (``method.topology_max_answers``); with ``graph`` (the graph tools'
    settings, ``search.graph_tools.tool_settings``) also ``solver_per_pattern`` queries of every pattern
    answered with the tools, ``solver_share`` of the solver demonstrations (every other solver
    demonstration then uses the tools too: ``policy.warmstart.demo_set``)."""

    prompt: str = "query"
    max_answers: int = topology.MAX_ANSWERS
    share: float = TOPOLOGY_SHARE
    per_pattern: int = PER_PATTERN
    name: str = "topology"
    graph: dict | None = None
    solver_share: float = 0.0
    solver_per_pattern: int = SOLVER_PER_PATTERN

    def __post_init__(self):
        if self.prompt not in eog.TOPOLOGY_PROMPTS:
            raise ValueError(f"method.topology_prompt: expected one of {list(eog.TOPOLOGY_PROMPTS)}, got {self.prompt!r}")
        if not 0 < self.share < 1:
            raise ValueError(f"share: expected a share of the proposer demonstrations in (0, 1), got {self.share!r}")
        if self.per_pattern < 1 or self.max_answers < 1 or self.solver_per_pattern < 1:
            raise ValueError(f"per_pattern, max_answers, solver_per_pattern: expected >= 1, got {self.per_pattern!r}, "
                             f"{self.max_answers!r}, {self.solver_per_pattern!r}")
        if not 0 <= self.solver_share < 1 or (self.solver_share > 0 and self.graph is None):
            raise ValueError(f"solver_share: expected a share of the solver demonstrations in [0, 1), and 0 without "
                             f"graph tools; got {self.solver_share!r} with graph={self.graph!r}")

    @classmethod
    def from_config(cls, cfg, graph: bool | None = None) -> "TopologyDemos":
        """The demonstrations a run's settings prompt with (``cfg.method``'s topology prompt and bound),
        with the graph tools' solver demonstrations unless ``graph`` is False (default: on unless
        ``method.graph_tools=off``, as for the EoG rows)."""
        from workbench.search.graph_tools import tool_settings

        graph = cfg.method.graph_tools != "off" if graph is None else graph
        return cls(prompt=cfg.method.topology_prompt, max_answers=cfg.method.topology_max_answers,
                   graph=tool_settings(cfg.method) if graph else None,
                   solver_share=GRAPH_SOLVER_SHARE if graph else 0.0)

    @property
    def settings(self) -> dict:
        """What enters the warm start's cache key (and its ``workbench.json``)."""
        return {"prompt": self.prompt, "max_answers": self.max_answers, "share": self.share,
                "per_pattern": self.per_pattern, "version": DEMO_VERSION, "graph": self.graph,
                "solver_share": self.solver_share, "solver_per_pattern": self.solver_per_pattern}

    def views(self, con, seed: int, per_pattern: int | None = None) -> list[eog.TopologyView]:
        """The askable queries of one store with witnesses (``per_pattern`` of each, default the
        proposer's), deterministic by ``seed``, the patterns interleaved (1p 2p 3p 2i ip pi 1p ...) so
        that a mix cut short keeps them balanced."""
        n = per_pattern or self.per_pattern
        graph = topology.TopologyGraph.from_store(con)
        titles = dict(con.execute("SELECT entity_id, title FROM entities").fetchall())
        drawn = []
        for p in topology.PATTERNS:  # twice as many drawn: up to a third of ip's are not askable (LOG.md)
            qs = topology.sample_queries(graph, p, 2 * n, seed=seed, max_answers=self.max_answers)
            drawn.append([v for v in eog.topology_views(con, qs, titles, graph) if askable(v)][:n])
        return [vs[i] for i in range(n) for vs in drawn if i < len(vs)]

    def __call__(self, con, seed: int, eos: str) -> list[Demo]:
        """One proposer demonstration per askable query of the store: the round's prompt -> the
        template question and the witness's answer (``answer_titles[0]``), then ``eos``; with
        ``graph``, then one solver demonstration per query the tools can demonstrate
        (:func:`topology_solver_calls`; family ``topology:solver:<pattern>``), asked by a template."""
        views = self.views(con, seed)
        pick = np.random.default_rng([int(seed), 4]).integers(1 << 30, size=len(views))
        demos = [Demo("proposer", f"{self.name}:{v.pattern}", eog.topology_user_message(v, self.prompt),
                      [(protocol.format_candidate(demo_question(v, int(k)), v.answer_titles[0]) + eos, True)])
                 for v, k in zip(views, pick)]
        if self.graph is None:
            return demos
        from workbench.search.graph_tools import GraphTools

        tools = GraphTools(con, **self.graph)
        views = self.views(con, seed, self.solver_per_pattern)
        pick = np.random.default_rng([int(seed), 5]).integers(1 << 30, size=len(views))
        for v, k in zip(views, pick):
            question = demo_question(v, int(k))
            if not all(names_relation(question, r) for r in v.relations):
                continue  # every template names its relations; a label of stopwords alone does not count
            plan = topology_solver_calls(tools, v)
            if plan is not None:
                demos.append(Demo("solver", f"{self.name}:solver:{v.pattern}",
                                  protocol.solver_user_message(question, graph=True), tool_demo(*plan)))
        return demos


def topology_demos(spec, cfg) -> TopologyDemos | None:
    """The warm start's topology demonstrations for a method whose rows start from the topology warm
    start (``MethodSpec.topology_warmstart``: EoG and its ablations), else None (the default warm
    start); with the graph tools' solver demonstrations where the method's solver has them
    (``methods.uses_graph_tools``).

    Example:
        >>> from workbench.config import preset
        >>> from workbench.method.methods import METHODS
        >>> topology_demos(METHODS["eog"], preset("smoke")).prompt, topology_demos(METHODS["coevokg"], preset("smoke"))
        ('query', None)
        >>> topology_demos(METHODS["eog"], preset("smoke", **{"method.graph_tools": "off"})).graph is None
        True
    """
    from workbench.method.methods import uses_graph_tools

    if not spec.topology_warmstart:
        return None
    return TopologyDemos.from_config(cfg, graph=uses_graph_tools(spec, cfg.method.graph_tools))
