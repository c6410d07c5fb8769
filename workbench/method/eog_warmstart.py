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
from workbench.policy.warmstart import Demo

TOPOLOGY_SHARE = 0.5  # ours: share of the proposer demonstrations that are queries (the rest chains)
PER_PATTERN = 4  # ours: queries of each pattern per throwaway world (fresh names, as the chain demos)
DEMO_VERSION = 1  # bump by hand when the demonstrations change (it enters the cache key)

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


@dataclass(frozen=True)
class TopologyDemos:
    """The warm start's :class:`policy.warmstart.ExtraDemos` for EoG: ``per_pattern`` queries of
    every pattern per throwaway world, prompted with ``prompt`` (``method.topology_prompt``), answer
    sets of at most ``max_answers`` (``method.topology_max_answers``)."""

    prompt: str = "witness"
    max_answers: int = topology.MAX_ANSWERS
    share: float = TOPOLOGY_SHARE
    per_pattern: int = PER_PATTERN
    name: str = "topology"

    def __post_init__(self):
        if self.prompt not in eog.TOPOLOGY_PROMPTS:
            raise ValueError(f"method.topology_prompt: expected one of {list(eog.TOPOLOGY_PROMPTS)}, got {self.prompt!r}")
        if not 0 < self.share < 1:
            raise ValueError(f"share: expected a share of the proposer demonstrations in (0, 1), got {self.share!r}")
        if self.per_pattern < 1 or self.max_answers < 1:
            raise ValueError(f"per_pattern, max_answers: expected >= 1, got {self.per_pattern!r}, {self.max_answers!r}")

    @classmethod
    def from_config(cls, cfg) -> "TopologyDemos":
        """The demonstrations a run's settings prompt with (``cfg.method``'s topology prompt and bound)."""
        return cls(prompt=cfg.method.topology_prompt, max_answers=cfg.method.topology_max_answers)

    @property
    def settings(self) -> dict:
        """What enters the warm start's cache key."""
        return {"prompt": self.prompt, "max_answers": self.max_answers, "share": self.share,
                "per_pattern": self.per_pattern, "version": DEMO_VERSION}

    def views(self, con, seed: int) -> list[eog.TopologyView]:
        """The askable queries of one store with witnesses, deterministic by ``seed``, the patterns
        interleaved (1p 2p 3p 2i ip pi 1p ...) so that a mix cut short keeps them balanced."""
        graph = topology.TopologyGraph.from_store(con)
        titles = dict(con.execute("SELECT entity_id, title FROM entities").fetchall())
        drawn = []
        for p in topology.PATTERNS:  # twice as many drawn: up to a third of ip's are not askable (LOG.md)
            qs = topology.sample_queries(graph, p, 2 * self.per_pattern, seed=seed, max_answers=self.max_answers)
            drawn.append([v for v in eog.topology_views(con, qs, titles, graph) if askable(v)][:self.per_pattern])
        return [vs[i] for i in range(self.per_pattern) for vs in drawn if i < len(vs)]

    def __call__(self, con, seed: int, eos: str) -> list[Demo]:
        """One proposer demonstration per askable query of the store: the round's prompt -> the
        template question and the witness's answer (``answer_titles[0]``), then ``eos``."""
        views = self.views(con, seed)
        pick = np.random.default_rng([int(seed), 4]).integers(1 << 30, size=len(views))
        return [Demo("proposer", f"{self.name}:{v.pattern}", eog.topology_user_message(v, self.prompt),
                     [(protocol.format_candidate(demo_question(v, int(k)), v.answer_titles[0]) + eos, True)])
                for v, k in zip(views, pick)]


def topology_demos(spec, cfg) -> TopologyDemos | None:
    """The warm start's topology demonstrations for a method whose rows start from the topology warm
    start (``MethodSpec.topology_warmstart``: EoG and its ablations), else None (the default warm start).

    Example:
        >>> from workbench.config import preset
        >>> from workbench.method.methods import METHODS
        >>> topology_demos(METHODS["eog"], preset("smoke")).prompt, topology_demos(METHODS["coevokg"], preset("smoke"))
        ('witness', None)
    """
    return TopologyDemos.from_config(cfg) if spec.topology_warmstart else None
