"""The CoEvoKG round, in the paper's fixed order (seed 000, section 3.5): one method, one result.

``Trainer.run_round(t)`` reads top to bottom as the paper's round and returns a
``round.RoundResult``: one ``ChainTask`` per task the proposer wrote for (its candidates, their
verdicts and rewards R_p) and one ``Slot`` per solver question (its chain or seed question, the
candidate it came from, its G scored rollouts, p_s). Nothing is written to the store here:
``run_store.RunStore.commit_round`` writes a round in one transaction, write-back included, and
``train.py`` is the run's lifecycle around both.

One round t:

1. propose: the method's task source draws its tasks (chains of G_t for CoEvoKG) and the proposer
   writes M candidates per task (Eq. 2; ``tasks.TASK_SOURCES``);
2. gate: the quality gate admits the top k per task (Eq. 6); an empty slot takes a seed question;
3. solve: the solver rolls out G trajectories per admitted question (Eq. 3);
4. reward: R_s (Eq. 7) with S_path (Eqs. 8-9) for the solver, R_p (Eq. 10) for the proposer,
   each from its registry (``method.solver_reward`` / ``method.proposer_reward``, default the method's);
   a proposer reward that reads no rollout (Dr. Free's information gain, seed 002) is scored right
   after step 2 instead, for every candidate that passed the gate (``Trainer.reward_proposer``);
5. update: one update of the shared backbone from the round's batch (Eqs. 11-12; ``update.PolicyStep``);
6. write back: verified write-back advances G_t to G_t+1 (section 3.4; ``RunStore.commit_round``).

Where the steps run is the trainer's rank strategy (``method.ranks``): one process by default;
``method.distributed`` wraps the trainer for several, and is never imported here. The baselines,
the build-up ablation rows (Tables 1-2) and the peer methods are ``MethodSpec`` rows
(``methods.METHODS``) of the same round under a matched budget: the same number of question slots,
G rollouts per slot, and one optimiser step per round (``method.minibatches`` steps, ours, when set).

``method.async_staleness = 1`` (ours, issue 44; 0, the default, is the order above) overlaps steps 1-3
of round t+1 with step 5 of round t (``Trainer._run_round_async``): a background thread proposes,
gates and solves round t+1 with a frozen copy of the policy taken after round t's rewards (the
*behaviour* policy: the one round t updates, pi_t), while the main thread updates it to pi_t+1.
Round t+1 then rewards and updates on those rollouts, its ratios taken against the log-probs they
were sampled with (``asynchronous``). What each stage of round t+1 sees:

* proposer, gate and solver: pi_t (one update old) and the store as round t began: G_t and every
  record up to round t-1 (round t's write-back is committed after its update);
* rewards (R_s with S_path on G_t+1, R_p, an LLM path extractor or likelihood reward): pi_t+1 and
  G_t+1, as in the synchronous round t+1;
* update: pi_t+1, its ratio against pi_t's log-probs; write-back: G_t+1 -> G_t+2 as always.

The first round (and the first of a resumed run whose checkpoint holds no pending rollouts) samples
its own rollouts with the current policy; the last round samples none.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import torch

from workbench.config import Config
from workbench.method import rewards as R
from workbench.method.asynchronous import Pending, behaviour_snapshot, check_config as check_async
from workbench.method.iterations import iteration_ends, iteration_of
from workbench.method.llm_judges import LLMPathExtractor
from workbench.method.methods import MethodSpec, resolve, uses_graph_tools, uses_kg_tool
from workbench.method.metrics import chain_entities
from workbench.method.path_support import EvidenceGraph, PathSupportParams
from workbench.method.proposer import proposer_rewards, rollout_free_rewards
from workbench.method.round import ChainTask, Rollout, RoundResult, Slot, gold_entities
from workbench.method.score import answer_candidates, extraction_item, score_trajectory
from workbench.method.tasks import CHAIN_SELECTIONS, TASK_SOURCES
from workbench.method.update import PROPOSER_ADVANTAGES, PolicyStep, grpo_advantages, warmup_lr
from workbench.policy.rollout import Trajectory, response_logprobs, rollout
from workbench.registry import Registry
from workbench.scoring import exact_match
from workbench.search.retriever import make_graph_tools, make_kg_tool

log = logging.getLogger(__name__)  # round stages at INFO (commands.log_to_stderr)

# name -> factory(trainer) giving a peer's state across a run's rounds, or None when it has no part in
# the run (Dr. Free's likelihood anchor); see RunExtension
RUN_EXTENSIONS = Registry("run extension")


class RunExtension:
    """A peer method's part of a run beyond its task source and rewards: state kept across rounds,
    made once per trainer by the factory it registers in :data:`RUN_EXTENSIONS`."""

    def scorer(self):
        """The policy a likelihood-based proposer reward reads (``rewards.ProposerInputs.policy``), or
        None to leave it to another extension or the trainer's own policy."""
        return None

    def iteration_ended(self, k: int, kept, last: bool) -> None:
        """Iteration ``k`` ended and its best checkpoint was kept at ``kept`` (``iterations``)."""

    def resumed(self, folder, completed: int) -> None:
        """A run resumed after ``completed`` rounds (its checkpoints under ``folder``)."""


class Laps:
    """The round's stage timer: each call records the seconds since the previous one as
    ``timings["time_<stage>"]`` (the per-round ``time_*`` metrics) and logs it at INFO, so a round
    cut short (a time limit, a crash) still shows which stages finished and how long they took.
    On CUDA the line also gives the process's peak of allocated GPU memory so far, so the stage
    where the peak is reached shows (the peak is not reset: the run's own total reads it).

    Example:
        >>> lap = Laps(); lap("update"); list(lap.timings)
        ['time_update']
    """

    def __init__(self, label: str = "round stage"):
        self.timings: dict[str, float] = {}
        self.label = label
        self._clock = time.perf_counter()

    def __call__(self, stage: str) -> None:
        now = time.perf_counter()
        self.timings[f"time_{stage}"] = now - self._clock
        peak = ""
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            peak = f", GPU peak so far {torch.cuda.max_memory_allocated() / 2 ** 30:.1f} GiB"
        log.info("%s %s: %.1f s%s", self.label, stage, now - self._clock, peak)
        self._clock = now


def seed_pool_of(con, dataset: str, families: str = "") -> list[tuple]:
    """The seed pool the fallback draws from (section 3.2): (question_id, question, answers, hops,
    chain) of ``dataset``'s split 'seed', by question id; ``families`` (``method.seed_families``,
    ours: names joined by ',') keeps those families only, "" keeps all. ValueError when none is left.

    Example:
        >>> from workbench import store
        >>> from workbench.kg.tinyworld import build_world
        >>> con = store.connect(":memory:"); _ = build_world(con, preset="smoke")
        >>> len(seed_pool_of(con, "tinyworld")), len(seed_pool_of(con, "tinyworld", "comparison,two_hop"))
        (100, 40)
    """
    wanted = [f.strip() for f in families.split(",") if f.strip()]
    rows = con.execute(
        "SELECT question_id, question, answers, coalesce(hops, 1), coalesce(chain, []), coalesce(family, dataset) "
        "FROM questions WHERE dataset = ? AND split = 'seed' ORDER BY question_id", [dataset]).fetchall()
    if not rows:
        raise ValueError(f"the store has no seed-pool questions (dataset {dataset!r}, split 'seed'); "
                         "build a world (workbench world) or import one (workbench import qa --split seed) "
                         "and set method.seed_dataset")
    have = sorted({r[5] for r in rows})
    unknown = sorted(set(wanted) - set(have))
    if unknown:
        raise ValueError(f"config field 'method.seed_families': {', '.join(unknown)} not among the seed pool's "
                         f"families {have} (dataset {dataset!r}); name some of those, or '' for all")
    return [r[:5] for r in rows if not wanted or r[5] in wanted]


class Trainer:
    """Holds the policy, its frozen reference, the optimiser step and the solver's tools of one run,
    and runs its rounds (:meth:`run_round`).

    ``reference`` is a separate frozen policy for a full fine-tune; a LoRA policy
    (``method.lora_rank`` > 0) takes None and its adapter-free base is the reference
    (``Policy.base_only``: no second copy of the weights). ``con`` None: a rank other than 0
    (``distributed.follow``), which holds no store."""

    def __init__(self, con, cfg: Config, spec: MethodSpec, run: str, policy, reference, search, kg=None):
        self.con, self.cfg, self.spec, self.run = con, cfg, spec, run
        self.policy, self.reference, self.search = policy, reference, search
        m = cfg.method
        check_async(cfg, spec)
        # the solver's tools beside document search: DynaSearcher's KG tool (seed 003: ``kg``, else the
        # store's, or search.url's server's) or EoG's graph tools instead of document search (seed 004)
        graph_tools = uses_graph_tools(spec, m.graph_tools)
        if graph_tools and uses_kg_tool(spec, m.kg_tool):
            raise ValueError(f"--method {spec.name}: the solver gets EoG's graph tools (method.graph_tools) or "
                             "DynaSearcher's KG tool (method.kg_tool), not both; set one of them to off")
        self.kg = (kg or make_kg_tool(con, m, policy, cfg.search.url)) if uses_kg_tool(spec, m.kg_tool) else None
        self.graph = make_graph_tools(con, m) if graph_tools else None
        if reference is None and not policy.is_lora:
            raise ValueError("Trainer: a full fine-tune (method.lora_rank = 0) needs a reference policy")
        self.step = PolicyStep(policy, reference, m)  # one process; distributed.lead/follow set their ranks
        # the rewards, each an unknown name refused before any work
        solver_reward = m.solver_reward or spec.solver_reward
        self.solver_reward = R.SOLVER_REWARDS[solver_reward]
        source = TASK_SOURCES[spec.task_source]
        proposer_reward = m.proposer_reward or spec.proposer_reward
        self.proposer_reward = proposer_reward if proposer_reward and source.has_proposer else None
        if self.proposer_reward:
            R.PROPOSER_REWARDS[self.proposer_reward]
        # a proposer reward that reads no rollout (Dr. Free's) is scored before the solver runs (reward_proposer)
        self.rollout_free = bool(self.proposer_reward) and not R.needs_outcome(self.proposer_reward)
        self.settings = resolve(spec, m)  # chain selection, proposer algorithm, iterations
        CHAIN_SELECTIONS[self.settings.chain_selection].check(spec)
        PROPOSER_ADVANTAGES[self.settings.proposer_algorithm]
        self.iteration_ends = iteration_ends(m.steps, self.settings.iterations)
        self.tasks = source(self)
        self.verifier = self.tasks.verifier(m.verifier, policy, m, con)
        # Eq. 8's LLM extractor only where Eq. 7 reads its path: another reward's S_path only fills
        # the metrics, from the deterministic extraction (no extra greedy batch a round)
        self.extractor = (LLMPathExtractor(policy, m.extractor_max_new_tokens)
                          if m.path_extractor == "llm" and R.reads_path(solver_reward) else None)
        self.path_params = PathSupportParams.of(m)
        self._g0: EvidenceGraph | None = None
        self.extensions = [e for make in RUN_EXTENSIONS.values() if (e := make(self)) is not None]
        self.average = None  # the weight average (method.weight_average), which train() sets and keeps
        self.pending: Pending | None = None  # round t+1's rollouts under method.async_staleness = 1
        if con is None:  # a rank other than 0: rank 0 owns the store and its reads
            self.titles, self.seed_pool = {}, []
            return
        self.titles: dict[int, str] = dict(con.execute(
            "SELECT entity_id, title FROM entities").fetchall())
        self.seed_pool = seed_pool_of(con, m.seed_dataset, m.seed_families)

    @property
    def ranks(self):
        """Where the round's steps run (``method.ranks``): one process, or ``distributed.Dist``."""
        return self.step.ranks

    @ranks.setter
    def ranks(self, ranks) -> None:
        self.step.ranks = ranks

    # -- the round ------------------------------------------------------------------------
    def run_round(self, t: int) -> RoundResult:
        """Round t in the paper's order (steps 1-5 of the module docstring); write-back (6) and
        every store write happen in ``RunStore.commit_round``. ``method.async_staleness = 1``:
        :meth:`_run_round_async`."""
        if self.cfg.method.async_staleness:
            return self._run_round_async(t)
        torch.manual_seed(self.seed_for(t, 0))
        lap = Laps()
        main = self.ranks.is_main  # under several ranks steps 1-2 and 4 run on rank 0 (it holds the store)
        tasks, slots = self.propose(t) if main else (None, None)  # 1-2: propose, gate
        lap("proposer_gate")
        if self.rollout_free:  # a proposer reward that reads no rollout (Dr. Free's): scored before any
            if main:
                self.reward_proposer(t, tasks)
            lap("proposer_reward")
        tasks, slots = self.ranks.share((tasks, slots))  # counted in the rollouts' time
        self.search.reset_cache_stats()  # the solver's own lookups (a searching proposer's come before)
        self.ranks.solve(self, t, slots)  # 3: solve
        lap("rollouts")
        if main:
            self.reward(t, tasks, slots, self.evidence_graph(t))  # 4: reward
        tasks, slots = self.ranks.share((tasks, slots))
        lap("rewards")
        update = self.update(t, tasks, slots)  # 5: update
        lap("update")
        self.policy.sync()  # the generation backend serves the updated weights (a no-op for HF)
        lap("sync")
        return RoundResult(t, tasks, slots, update, lap.timings, self.ranks.hit_rate(self.search),
                           kg_tool=self.kg is not None or self.graph is not None,
                           entities=chain_entities(self.con, slots) if self.con is not None else None,
                           source_metrics=self.tasks.metrics(tasks), reward_metrics=self._reward_metrics(slots),
                           extra=self._extra_metrics(t, self.tasks.extra_metrics(tasks)))

    def _run_round_async(self, t: int) -> RoundResult:
        """Round t with bounded staleness 1 (module docstring): its rollouts come from
        ``self.pending`` (sampled by pi_t-1 while round t-1 updated; sampled now by pi_t when there are
        none), then rewards with pi_t, then the update to pi_t+1 while a thread samples round t+1
        with a frozen copy of pi_t (:meth:`generate`). ``time_wait`` is how long the update waited
        for that thread; ``time_round`` the round's wall time on the main thread."""
        torch.manual_seed(self.seed_for(t, 0))
        clock = time.perf_counter()
        pending, self.pending = self.pending, None
        if pending is None or pending.round != t:
            pending = self.generate(t)
        tasks, slots = pending.tasks, pending.slots
        lap = Laps()
        if self.rollout_free:  # as in the synchronous round: scored by this round's policy
            self.reward_proposer(t, tasks)
            lap("proposer_reward")
        self.reward(t, tasks, slots, self.evidence_graph(t))  # 4: reward
        lap("rewards")
        ahead = t + 1 < self.cfg.method.steps
        # the pool is left (the thread joined) before the trainer's policy is the live one again
        with self._behaving(behaviour_snapshot(self.policy) if ahead else None), ThreadPoolExecutor(1) as pool:
            future = pool.submit(self.generate, t + 1) if ahead else None  # 1-3 of round t+1, by pi_t
            update = self.update(t, tasks, slots)  # 5: update (the live policy, through self.step)
            lap("update")
            self.pending = future.result() if future is not None else None
            lap("wait")
        self.policy.sync()
        lap("sync")
        timings = {**pending.timings, **lap.timings, "time_round": time.perf_counter() - clock}
        return RoundResult(t, tasks, slots, update, timings, pending.hit_rate,
                           kg_tool=self.kg is not None or self.graph is not None,
                           entities=chain_entities(self.con, slots), source_metrics=pending.source_metrics,
                           reward_metrics=self._reward_metrics(slots),
                           extra=self._extra_metrics(t, pending.source_extra))

    def generate(self, t: int) -> Pending:
        """Steps 1-3 of round ``t`` by ``self.policy`` (the behaviour policy: a frozen copy under
        :meth:`_behaving`), unscored. Every update row carries the behaviour policy's log-probs: a
        backend that reports none of the trainer's (vLLM) has them filled from the policy's forward."""
        lap = Laps(f"round {t} generation")
        self.search.reset_cache_stats()
        tasks, slots = self.propose(t)
        source_metrics, source_extra = self.tasks.metrics(tasks), self.tasks.extra_metrics(tasks)
        lap("proposer_gate")
        self.solve(t, slots)
        lap("rollouts")
        if not self.policy.backend.trainer_logprobs:
            rolls = [r for s in slots for r in s.rollouts]
            cands = [c for task in tasks for c in task.candidates if c.sequence.response_ids]
            fresh = self.recompute_old_logprobs([r.trajectory for r in rolls] + [c.sequence for c in cands])
            for holder, row in zip(rolls, fresh):
                holder.trajectory = row
            for cand, row in zip(cands, fresh[len(rolls):]):
                cand.sequence = row
            lap("behaviour_logprobs")
        return Pending(t, tasks, slots, lap.timings, self.search.cache_stats()["hit_rate"], source_metrics,
                       source_extra)

    @contextlib.contextmanager
    def _behaving(self, snapshot):
        """While round t updates, the trainer's ``policy`` (what the task source, the gate's LLM
        verifier and the solver read) is the behaviour ``snapshot``; the update holds the live
        policy through ``self.step``. None: nothing changes."""
        holders = [self, self.verifier, getattr(self.verifier, "batch", None)]
        live = self.policy
        swapped = [h for h in holders if snapshot is not None and getattr(h, "policy", None) is live]
        for h in swapped:
            h.policy = snapshot
        try:
            yield
        finally:
            for h in swapped:
                h.policy = live

    def _extra_metrics(self, t: int, source_extra: dict) -> dict:
        """``iteration`` (a run of several iterations), then the task source's own last keys
        ``source_extra`` (``tasks.extra_metrics``: Dr. Free's ``drfree_chains``, ``proposer_searches``)."""
        out = {"iteration": iteration_of(t, self.iteration_ends)} if len(self.iteration_ends) > 1 else {}
        return {**out, **source_extra}

    def _reward_metrics(self, slots: list[Slot]) -> dict:
        """The solver reward's per-term metrics over the round's scored rollouts (a multi-term reward's)."""
        terms = [r.score.terms for s in slots for r in s.rollouts if r.score is not None and r.score.terms is not None]
        return self.solver_reward.term_metrics(terms) if terms else {}

    # -- 1-2: propose and gate -------------------------------------------------------------
    def propose(self, t: int) -> tuple[list[ChainTask], list[Slot]]:
        """Eq. 2 and Eq. 6 by the method's task source: its tasks with their gated candidates, and
        ``chains_per_round`` x ``admit_top_k`` solver slots (empty ones take seed questions)."""
        m = self.cfg.method
        return self.tasks.propose(t, m.chains_per_round * m.admit_top_k)

    def seed_slots(self, t: int, k: int) -> list[Slot]:
        """``k`` questions of the seed pool (section 3.2's fallback), drawn by round ``t``'s seed."""
        rng = np.random.default_rng(self.seed_for(t, 3))
        picked = rng.choice(len(self.seed_pool), size=min(k, len(self.seed_pool)), replace=False)
        return [Slot(text, list(ans), int(h), "seed", gold_chain=list(chain), question_id=int(q))
                for q, text, ans, h, chain in (self.seed_pool[int(i)] for i in picked)]

    # -- 3: solve --------------------------------------------------------------------------
    def solve(self, t: int, slots: list[Slot], seed: int | None = None) -> None:
        """Eq. 3: G rollouts per slot at the training temperature (scored in :meth:`reward`);
        ``seed`` (default the round's) is a rank's own (``Dist.solve``)."""
        r, m = self.cfg.rollout, self.cfg.method
        trajectories = rollout(
            self.policy, self.search, [s.question for s in slots], m.group_size, max_turns=r.max_turns,
            topk=self.cfg.search.topk, temperature=r.temperature, top_p=r.top_p, max_new_tokens=r.max_new_tokens,
            max_total_tokens=r.max_total_tokens, seed=self.seed_for(t, 4) if seed is None else seed, kg=self.kg,
            graph=self.graph)
        for traj in trajectories:
            slots[traj.question_index].rollouts.append(Rollout(traj, None))

    # -- 4: reward -------------------------------------------------------------------------
    def reward(self, t: int, tasks: list[ChainTask], slots: list[Slot], graph: EvidenceGraph) -> None:
        """R_s per rollout (Eq. 7 with Eqs. 8-9, or the method's solver reward) and R_p per
        candidate (Eq. 10, or the method's proposer reward; ``proposer.proposer_rewards``). A
        proposer reward that reads no rollout (Dr. Free's) was scored before the rollouts
        (``reward_proposer``)."""
        m = self.cfg.method
        paths = self._llm_paths(slots)
        for slot in slots:
            on_chain = gold_entities(slot)
            for roll in slot.rollouts:
                roll.score = score_trajectory(roll.trajectory, slot.answers,
                                              answer_candidates(roll.trajectory, on_chain, self.titles),
                                              graph, self.solver_reward, m.beta_path, slot, paths.get(id(roll)), m,
                                              answer_sets=self.graph is not None)
        if not self.proposer_reward or self.rollout_free:
            return
        schedule = R.Schedule(t, m.anneal_steps or m.steps, m.p_start, m.p_end, m.sigma)
        for task in tasks:
            verdicts = [c.verdict for c in task.candidates]
            outcomes = {c.verdict.index: R.GroupOutcome(c.slot.correct, tuple(r.score.reward for r in c.slot.rollouts))
                        for c in task.candidates if c.slot is not None}
            rewards = proposer_rewards(verdicts, outcomes, schedule, m.extraction_penalty, self.proposer_reward,
                                       m.penalize_rejected, chain=task.chain, policy=self.scorer,
                                       search=self.search, options=m)
            for cand, r_p in zip(task.candidates, rewards):
                cand.reward = r_p

    def reward_proposer(self, t: int, tasks: list[ChainTask]) -> None:
        """R_p of a rollout-free proposer reward (``rewards.needs_outcome`` False: Dr. Free's
        information gain, seed 002): every candidate that passed the gate is scored, posed to the
        solver or not, in one batch over the round (``proposer.rollout_free_rewards``), before any
        rollout; the solver's G rollouts then serve the solver's update alone."""
        m = self.cfg.method
        schedule = R.Schedule(t, m.anneal_steps or m.steps, m.p_start, m.p_end, m.sigma)
        # one entry per candidate: a searching proposer's candidate (w/o KG) has evidence of its own
        cands = [(c, c.evidence or task.chain) for task in tasks for c in task.candidates]
        per_cand = rollout_free_rewards([(chain, [c.verdict]) for c, chain in cands], schedule, m.extraction_penalty,
                                        self.proposer_reward, m.penalize_rejected, policy=self.scorer,
                                        search=self.search, options=m)
        for (cand, _), (r_p,) in zip(cands, per_cand):
            cand.reward = r_p

    @property
    def scorer(self):
        """The policy a likelihood-based proposer reward reads (Dr. Free's: its anchor, from its run
        extension), else the current policy."""
        return next((s for e in self.extensions if (s := e.scorer()) is not None), self.policy)

    def _llm_paths(self, slots: list[Slot]) -> dict[int, list[int]]:
        """Eq. 8 by the LLM extractor (``method.path_extractor = llm``) for every correct rollout of
        the round, in one batch, keyed by ``id(rollout)``; {} with the deterministic extractor or a
        solver reward that reads no S_path (``rewards.reads_path``)."""
        if self.extractor is None:
            return {}
        todo = [(slot, roll) for slot in slots for roll in slot.rollouts
                if exact_match(roll.trajectory.answer or "", slot.answers)]
        items = [extraction_item(slot.question, roll.trajectory, gold_entities(slot), self.titles)
                 for slot, roll in todo]
        return {id(roll): path for (_, roll), path in zip(todo, self.extractor.extract_many(items))} if items else {}

    # -- 5: update -------------------------------------------------------------------------
    def update(self, t: int, tasks: list[ChainTask], slots: list[Slot]) -> dict:
        """Section 3.5: the clipped-surrogate update with the k3 KL to the frozen reference.

        Solver rows carry GRPO advantages (Eq. 11) broadcast to their generated tokens; proposer
        rows carry the method's proposer advantages (``update.PROPOSER_ADVANTAGES``: REINFORCE++,
        Eq. 12, whitened over the global proposer batch with the reward at the terminal token).
        Retrieved tokens are masked out (loss_mask = 0).
        """
        m = self.cfg.method
        rows: list[Trajectory] = []
        advantages: list[torch.Tensor] = []
        # EoG's role ablations (seed 004, Fig. 5): a role without update contributes no rows
        rollouts = [r for s in slots for r in s.rollouts] if self.spec.update_solver else []
        solver_adv = grpo_advantages(torch.tensor([r.score.reward for r in rollouts], dtype=torch.float32),
                                     m.group_size, m.adv_eps) if rollouts else []
        for roll, a in zip(rollouts, solver_adv):
            if m.skip_zero_advantage and float(a) == 0.0:  # a group of equal rewards: no policy gradient
                continue
            rows.append(roll.trajectory)
            advantages.append(torch.full((len(roll.trajectory.response_ids),), float(a))
                              * torch.tensor(roll.trajectory.loss_mask))
        picked = [(task, c) for task in tasks for c in task.candidates
                  if c.reward is not None and c.sequence.response_ids] if self.spec.update_proposer else []
        if picked:
            rows += [c.sequence for _, c in picked]
            advantages += PROPOSER_ADVANTAGES[self.settings.proposer_algorithm](picked, m)
        # section 3.5 says one update per round; splitting the round's batch into several optimiser
        # steps (veRL's ppo_mini_batch_size) is ours, method.minibatches (1 = the paper's one step)
        if not rows:
            return {"loss": 0.0, "kl": 0.0, "entropy": 0.0, "clip_fraction": 0.0, "skipped": 1,
                    "kl_coef": self.step.kl.coef}
        order = np.random.default_rng(self.seed_for(t, 5)).permutation(len(rows))
        parts = np.array_split(order, max(1, min(m.minibatches, len(rows))))
        # A backend whose log-probs are not the trainer's (vLLM): the first step's policy is the one
        # that sampled, so its old log-probs are its new ones, detached (ratio 1, as TRL's GRPO with one
        # iteration); only the later steps' rows need the trainer's forward of the sampling policy.
        # Under method.async_staleness the rows carry the behaviour policy's log-probs (Trainer.generate)
        # and the policy stepping is not the one that sampled: no row's old log-probs are its own.
        own_first = not self.step.policy.backend.trainer_logprobs and not m.async_staleness
        later = sorted(int(i) for part in parts[1:] for i in part) if own_first else []
        if later:
            start = time.perf_counter()
            for i, row in zip(later, self.recompute_old_logprobs([rows[i] for i in later])):
                rows[i] = row
            log.info("update: old log-probs of %d rows recomputed by the trainer: %.1f s", len(later),
                     time.perf_counter() - start)
        steps = []
        for j, part in enumerate(parts):
            # the optimiser step's index counts every round's full share of minibatches, so a resumed
            # run warms up exactly as an uninterrupted one
            for group in self.step.optimizer.param_groups:
                group["lr"] = warmup_lr(m.lr, t * m.minibatches + j, m.warmup_steps)
            steps.append(self.step(t, [rows[i] for i in part], [advantages[i] for i in part],
                                   own_old=own_first and j == 0))
        out = {k: float(np.mean([s[k] for s in steps])) for k in ("loss", "kl", "entropy", "clip_fraction")}
        return {**out, "skipped": sum(s["skipped"] for s in steps), "kl_coef": self.step.kl.coef}

    def recompute_old_logprobs(self, rows: list[Trajectory]) -> list[Trajectory]:
        """``rows`` with their old-policy log-probs from the trainer's own forward pass, before any
        step of this round: the ratio's two log-probs then come from the same weights, precision and
        kernels (a backend such as vLLM samples in bfloat16 with other kernels; its log-probs would
        put a precision gap into every ratio). Retrieved tokens keep 0."""
        compute = lambda part: response_logprobs(self.policy, part, self.cfg.method.micro_batch)  # noqa: E731
        fresh = self.ranks.spread(compute, rows)
        return [dataclasses.replace(row, old_logprobs=f.tolist()) for row, f in zip(rows, fresh)]

    # -- state and randomness -----------------------------------------------------------------
    def state_dict(self) -> dict:
        """The optimiser, the non-finite guard and the adaptive KL coefficient (what a checkpoint
        holds beside the policy's weights)."""
        return {"optimizer": self.step.optimizer.state_dict(), "non_finite": self.step.guard.consecutive,
                "kl_coef": self.step.kl.coef}

    def load_state_dict(self, state: dict) -> None:
        self.step.optimizer.load_state_dict(state["optimizer"])
        self.step.guard.consecutive = state["non_finite"]
        self.step.kl.coef = state["kl_coef"]

    def seed_for(self, t: int, stage: int) -> int:
        """The seed of stage ``stage`` of round ``t``: a resumed run draws exactly what an
        uninterrupted one does."""
        return int(self.cfg.method.seed) * 1_000_003 + t * 101 + stage

    @property
    def pool_run(self) -> str | None:
        """Whose write-back G_t includes: this run's with write-back (C3), else G_0 alone."""
        return self.run if self.spec.write_back else None

    def evidence_graph(self, t: int) -> EvidenceGraph:
        """G_t for path support (Eqs. 8-9); without write-back G_t is G_0 in every round, built once."""
        if self.pool_run is None:
            if self._g0 is None:
                self._g0 = EvidenceGraph.from_store(self.con, run=None, round=0, params=self.path_params)
            return self._g0
        return EvidenceGraph.from_store(self.con, run=self.pool_run, round=t, params=self.path_params)
