"""Steps 1-2 of a round (seed 000, sections 3.2 and 3.5): where a method's tasks come from, how its
proposer writes questions for them (Eq. 2) and how the gate admits them (Eq. 6), with empty solver
slots filled from the seed pool (section 3.2's fallback). A method names its task source
(``MethodSpec.task_source``); the sources are a registry, :data:`TASK_SOURCES`, so a peer method adds
its own (``workbench/peers/``) without the round naming it.

The core's sources:

* ``kg_chains`` (:class:`ChainTasks`; C1, C2, CoEvoKG): chains of G_t, drawn by the run's chain
  selection (:data:`CHAIN_SELECTIONS`: ``all`` draws every chain of G_t; a peer may add its own);
* ``answer_entity`` (:class:`AnswerEntities`; the SSP row without its search): one entity of the
  store and its first passage, no KG structure, the open gate;
* ``ssp`` (:class:`SSPTasks`; SSP as published, ``method/ssp.py``): the proposer searches while it
  writes for an answer entity, its question kept by SSP's checks and RAG verification;
* ``seed_pool`` (:class:`SeedPool`; Search-R1, DynaSearcher): no proposer, the fixed seed pool.

A source that writes one question per prompt in one batched generation (chains, answer entities,
EoG's queries) is a :class:`WrittenTasks`: it says how a round's tasks are drawn, prompted, gated
and posed; the generation, parsing and bookkeeping are shared.

Example:
    >>> sorted(n for n in TASK_SOURCES.names() if n in ("kg_chains", "answer_entity", "ssp", "seed_pool"))
    ['answer_entity', 'kg_chains', 'seed_pool', 'ssp']
    >>> TASK_SOURCES["seed_pool"].has_proposer, TASK_SOURCES["kg_chains"].reads_pool
    (False, True)
"""

from __future__ import annotations

import numpy as np

from workbench.kg.pool import sample_chains
from workbench.method import ssp
from workbench.method.gate import gate
from workbench.method.memory import ChainView
from workbench.method.proposer import answer_choices, chain_view, parse_candidates, proposer_prompts
from workbench.method.round import Candidate, ChainTask, Slot
from workbench.method.verifiers import make_verifier
from workbench.policy import protocol
from workbench.policy.rollout import Trajectory
from workbench.registry import Registry

TASK_SOURCES = Registry("task source")  # MethodSpec.task_source -> a TaskSource class
CHAIN_SELECTIONS = Registry("chain selection")  # method.chain_selection -> a ChainSelection class


class TaskSource:
    """Where a method's tasks come from; one instance per trainer (``trainer``: the run's policy,
    search, store, settings and seed pool). Subclasses register under a name in :data:`TASK_SOURCES`."""

    reads_pool = False  # its tasks are G_0's chains: G_0 must be built with the run's pool settings
    has_proposer = True  # False: no proposer and no proposer reward (the seed pool alone)
    default_verifier = "open"  # the gate's verifier when ``method.verifier`` is '' (verifiers.make_verifier)

    def __init__(self, trainer):
        self.trainer = trainer

    @classmethod
    def prepare(cls, con) -> None:
        """What the store must hold before a run of this source starts (nothing here)."""

    def verifier(self, name: str, policy, m, con):
        """The gate's verifier ``name`` (``method.verifier``; '' = :attr:`default_verifier`)."""
        return make_verifier(name or self.default_verifier, policy, m.verifier_max_new_tokens, m.verifier_vocabulary,
                             con)

    def propose(self, t: int, n_slots: int) -> tuple[list[ChainTask], list[Slot]]:
        """Round ``t``'s tasks with their gated candidates, and ``n_slots`` solver slots."""
        raise NotImplementedError

    def metrics(self, tasks: list[ChainTask]) -> dict:
        """Per-round keys of this source's own, beside the gate's (``RoundResult.source_metrics``)."""
        return {}

    def extra_metrics(self, tasks: list[ChainTask]) -> dict:
        """Per-round keys a method adds after every other (``RoundResult.extra``)."""
        return {}


class WrittenTasks(TaskSource):
    """Tasks the proposer writes for in one batched generation: M prompts per task, each candidate
    gated against its task, the admitted ones posed to the solver, empty slots from the seed pool.
    A subclass draws the tasks (:meth:`draw`); prompts, answer choices, gate and slot are the chain
    form's (Eq. 2's a in {e_1..e_L}) unless it overrides them."""

    def draw(self, t: int) -> list[ChainView]:
        raise NotImplementedError

    def prompts(self, tasks: list[ChainView], m: int) -> list[str]:
        return proposer_prompts(self.trainer.policy.chat_prompt, tasks, m)

    def choices(self, tasks: list[ChainView], m: int):
        return answer_choices(tasks, m)

    def gate(self, task: ChainView, candidates: list) -> list:
        m = self.trainer.cfg.method
        return gate(task, candidates, self.trainer.verifier, m.gate_threshold, m.admit_top_k, m.gate_aggregation,
                    allow_topic=m.gate_allow_topic, leak_filter=self.trainer.spec.leak_filter,
                    multi_hop_veto=m.gate_multi_hop_veto)

    def slot(self, task: ChainView, cand: Candidate) -> Slot:
        return Slot(cand.verdict.question, [cand.verdict.answer], max(1, len(task.titles) - 1), "generated", task, cand)

    def write(self, t: int, tasks: list[ChainView]) -> tuple[list[list[Trajectory]], list[list]]:
        """Eq. 2 for round ``t``: M generations per task in one batch at the training temperature,
        per task its M sequences (the proposer's update rows) and their parsed (question, answer),
        None where extraction failed. ``workbench.step.propose`` writes for one chain this way."""
        trainer, policy = self.trainer, self.trainer.policy
        m, r = trainer.cfg.method, trainer.cfg.rollout
        prompts = self.prompts(tasks, m.candidates_per_chain)
        choices = self.choices(tasks, m.candidates_per_chain) if m.proposer_answer_choices else None
        gens = policy.generate(prompts, max_new_tokens=m.proposer_max_new_tokens, temperature=r.temperature,
                               top_p=r.top_p, stop=(protocol.ANSWER_CLOSE,), seed=trainer.seed_for(t, 2),
                               choices=choices)
        sequences = [Trajectory(i, 0, prompt, policy.encode(prompt), list(g.token_ids), [1] * len(g.token_ids),
                                list(g.logprobs), text=g.text) for i, (prompt, g) in enumerate(zip(prompts, gens))]
        per = m.candidates_per_chain
        mine = [sequences[c * per:(c + 1) * per] for c in range(len(tasks))]
        return mine, [parse_candidates([s.text for s in seqs]) for seqs in mine]

    def propose(self, t: int, n_slots: int) -> tuple[list[ChainTask], list[Slot]]:
        """Eq. 2 and Eq. 6: M candidates per task, gated; empty slots take seed questions."""
        trainer, m = self.trainer, self.trainer.cfg.method
        chains = self.draw(t)
        sequences, parsed = self.write(t, chains)
        if hasattr(trainer.verifier, "prefetch"):  # the LLM verifier: one batch, this round's replies
            trainer.verifier.prefetch([(chain, cands, m.gate_allow_topic, trainer.spec.leak_filter)
                                       for chain, cands in zip(chains, parsed)])
        tasks, slots = [], []
        for c, chain in enumerate(chains):
            mine = sequences[c]
            task = ChainTask(chain, [Candidate(mine[v.index], v) for v in self.gate(chain, parsed[c])])
            for cand in task.candidates:
                if cand.verdict.admitted:
                    cand.slot = self.slot(chain, cand)
                    slots.append(cand.slot)
            tasks.append(task)
        missing = n_slots - len(slots)
        if missing > 0:  # seed fallback (section 3.2)
            slots += trainer.seed_slots(t, missing)
        return tasks, slots


class ChainSelection:
    """Which G_t chains a ``kg_chains`` method draws from (``method.chain_selection``); subclasses
    register under a name in :data:`CHAIN_SELECTIONS`."""

    def __init__(self, trainer):
        self.trainer = trainer

    @classmethod
    def check(cls, spec) -> None:
        """Refuse a method this selection cannot serve (checked when its trainer is made)."""

    def sample(self, t: int) -> list[ChainView]:
        raise NotImplementedError

    def metrics(self) -> dict:
        """Per-round keys of this selection's own."""
        return {}


@CHAIN_SELECTIONS.register("all")
class AllChains(ChainSelection):
    """Every chain of G_t (section 3.2), uniformly or by evidence count (``method.pool_sampling``)."""

    def sample(self, t: int) -> list[ChainView]:
        tr, m = self.trainer, self.trainer.cfg.method
        return [chain_view(c) for c in sample_chains(tr.con, m.chains_per_round, seed=tr.seed_for(t, 1), run=tr.pool_run,
                                                     round=t, weighted=m.pool_sampling == "evidence")]


@TASK_SOURCES.register("kg_chains")
class ChainTasks(WrittenTasks):
    """C1's tasks: chains of G_t, each read by the chain proposer (Eq. 2) and checked by the gate
    against the chain (Eq. 6). The chain selection is made at the first draw (on rank 0: the store's)."""

    reads_pool = True
    default_verifier = "structural"

    def __init__(self, trainer):
        super().__init__(trainer)
        self.selection: ChainSelection | None = None

    def draw(self, t: int) -> list[ChainView]:
        if self.selection is None:
            self.selection = CHAIN_SELECTIONS[self.trainer.settings.chain_selection](self.trainer)
        return self.selection.sample(t)

    def extra_metrics(self, tasks: list[ChainTask]) -> dict:
        return self.selection.metrics() if self.selection is not None else {}


@TASK_SOURCES.register("answer_entity")
class AnswerEntities(WrittenTasks):
    """SSP's tasks (section 4.1): an answer entity, no KG structure; its proposer reads the entity's
    first passage as a one-node chain and writes one candidate, the open gate admitting what passes
    the deterministic filter."""

    def draw(self, t: int) -> list[ChainView]:
        tr, m = self.trainer, self.trainer.cfg.method
        ids = tr.con.execute(
            "SELECT e.entity_id FROM entities e WHERE e.kind = 'entity' AND EXISTS "
            "(SELECT 1 FROM passages p WHERE p.entity_id = e.entity_id) ORDER BY e.entity_id").fetchnumpy()["entity_id"]
        if len(ids) < m.chains_per_round:
            raise ValueError(f"method.chains_per_round={m.chains_per_round}: the store has only {len(ids)} entities "
                             "with passages")
        picked = [int(e) for e in np.random.default_rng(tr.seed_for(t, 1)).choice(ids, m.chains_per_round, replace=False)]
        first = dict(tr.con.execute(
            "SELECT entity_id, arg_min(text, paragraph) FROM passages WHERE entity_id IN (SELECT unnest(?)) "
            "GROUP BY entity_id", [picked]).fetchall())
        return [ChainView(-1, "", [e], [tr.titles[e]], [], [first[e]]) for e in picked]


@TASK_SOURCES.register("ssp")
class SSPTasks(AnswerEntities):
    """SSP as published (``method/ssp.py``): per answer entity, M proposer rollouts that search,
    SSP's rule checks and RAG verification; the valid ones' first k are posed."""

    def propose(self, t: int, n_slots: int) -> tuple[list[ChainTask], list[Slot]]:
        tr = self.trainer
        m, r, policy = tr.cfg.method, tr.cfg.rollout, tr.policy
        chains = self.draw(t)
        answers = [c.titles[0] for c in chains]
        trajectories = ssp.propose(policy, tr.search, answers, m.candidates_per_chain, max_turns=r.max_turns,
                                   topk=tr.cfg.search.topk, temperature=r.temperature, top_p=r.top_p,
                                   max_new_tokens=r.max_new_tokens, max_total_tokens=r.max_total_tokens,
                                   seed=tr.seed_for(t, 2))
        budget = r.max_total_tokens - r.max_new_tokens
        verdicts = ssp.verdicts(trajectories, answers, m.candidates_per_chain, m.admit_top_k,
                                min_words=m.ssp_min_question_words, min_searches=m.ssp_min_searches,
                                noise=m.ssp_rag_noise, seed=tr.seed_for(t, 6),
                                generate=ssp.greedy(policy, r.max_new_tokens),
                                fits=lambda p: len(policy.encode(policy.chat_prompt(p))) <= budget)
        tasks, slots = [], []
        for c, (chain, mine) in enumerate(zip(chains, verdicts)):
            task = ChainTask(chain, [Candidate(trajectories[c * m.candidates_per_chain + v.index], v) for v in mine])
            for cand in task.candidates:
                if cand.verdict.admitted:
                    hops = max(1, len(cand.sequence.queries))
                    cand.slot = Slot(cand.verdict.question, [cand.verdict.answer], hops, "generated", chain, cand)
                    slots.append(cand.slot)
            tasks.append(task)
        if n_slots > len(slots):  # seed fallback (section 3.2; SSP reuses earlier questions)
            slots += tr.seed_slots(t, n_slots - len(slots))
        return tasks, slots


@TASK_SOURCES.register("seed_pool")
class SeedPool(TaskSource):
    """Search-R1's tasks: no proposer; every slot a question of the fixed seed pool."""

    has_proposer = False

    def propose(self, t: int, n_slots: int) -> tuple[list[ChainTask], list[Slot]]:
        return [], self.trainer.seed_slots(t, n_slots)
