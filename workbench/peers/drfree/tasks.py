"""Dr. Free's parts of the round (seed 002), registered with the core: its chain construction as a
chain selection (``drfree``, ``tasks.CHAIN_SELECTIONS``), the searching proposer of its "w/o KG" row
as a task source (``seed_document``, ``tasks.TASK_SOURCES``), and the likelihood anchor that scores
its information gain across iterations as a run extension (``loop.RUN_EXTENSIONS``). What each
follows of the paper, and what is ours: :mod:`.construction`.

Example:
    >>> from workbench.method.tasks import CHAIN_SELECTIONS, TASK_SOURCES
    >>> CHAIN_SELECTIONS["drfree"] is DrFreeChains, TASK_SOURCES["seed_document"] is SeedDocuments
    (True, True)
"""

from __future__ import annotations

import dataclasses
import logging

import numpy as np
import torch

from workbench.method.gate import gate
from workbench.method.loop import RUN_EXTENSIONS, RunExtension
from workbench.method.memory import ChainView
from workbench.method.proposer import chain_view, parse_candidates
from workbench.method.round import Candidate, ChainTask, Slot
from workbench.method.tasks import CHAIN_SELECTIONS, TASK_SOURCES, AnswerEntities, ChainSelection
from workbench.peers.drfree import construction
from workbench.policy.rollout import rollout

log = logging.getLogger(__name__)


@CHAIN_SELECTIONS.register("drfree")
class DrFreeChains(ChainSelection):
    """The G_0 chains of Dr. Free's construction (Fig. 5, Table 7; ``construction.ChainSelection``),
    selected once a run at the first draw, then drawn from uniformly each round."""

    def __init__(self, trainer):
        super().__init__(trainer)
        m = trainer.cfg.method
        self.selection = construction.ChainSelection(trainer.con, trainer.search, trainer.cfg.search.topk,
                                                     m.drfree_hop_ratio, trainer.cfg.pool.seed)
        log.info("Dr. Free chains: %d of G_0's %d (rejected %s)", len(self.selection.ids),
                 self.selection.result["considered"], self.selection.result["rejections"])

    @classmethod
    def check(cls, spec) -> None:
        if spec.task_source != "kg_chains" or spec.write_back:
            raise ValueError(f"method.chain_selection=drfree: method {spec.name!r} does not draw G_0's chains without "
                             "write-back (it needs task source kg_chains and no write-back, as the Dr. Free rows)")

    def sample(self, t: int) -> list[ChainView]:
        tr = self.trainer
        return [chain_view(c) for c in self.selection.sample(tr.con, tr.cfg.method.chains_per_round, tr.seed_for(t, 1))]

    def metrics(self) -> dict:
        return {"drfree_chains": len(self.selection.ids)}


@TASK_SOURCES.register("seed_document")
class SeedDocuments(AnswerEntities):
    """Dr. Free's "w/o KG" row (seed 002, Table 2): Dr. Zero-style, M searching proposer rollouts
    per seed document (one entity's passage, drawn as SSP's), each candidate gated with its own
    evidence (the document and the passages it retrieved) and hop label (its searches); empty slots
    take seed questions."""

    def propose(self, t: int, n_slots: int) -> tuple[list[ChainTask], list[Slot]]:
        tr = self.trainer
        m, r = tr.cfg.method, tr.cfg.rollout
        docs = self.draw(t)  # one entity and its first passage each, as SSP's answer entities
        trajectories = rollout(tr.policy, tr.search, [d.titles[0] for d in docs], m.candidates_per_chain,
                               max_turns=r.max_turns, topk=tr.cfg.search.topk, temperature=r.temperature,
                               top_p=r.top_p, max_new_tokens=m.proposer_max_new_tokens,
                               max_total_tokens=r.max_total_tokens, seed=tr.seed_for(t, 2),
                               user_messages=construction.search_proposer_messages(docs))
        found = sorted({p for trj in trajectories for p in trj.passage_ids})
        passages = {int(p): (int(e), text) for p, e, text in tr.con.execute(
            "SELECT passage_id, entity_id, text FROM passages WHERE passage_id IN (SELECT unnest(?))",
            [found]).fetchall()} if found else {}
        tasks, slots = [], []
        for c, doc in enumerate(docs):
            mine = trajectories[c * m.candidates_per_chain:(c + 1) * m.candidates_per_chain]
            evidence = [construction.evidence_view(doc, trj, passages, tr.titles) for trj in mine]
            # each candidate gated against its own evidence (its answer among the entities it found or
            # the document's, none of them named), then the document's top k of those that passed
            verdicts = [dataclasses.replace(gate(ev, [cand], tr.verifier, m.gate_threshold, 1, m.gate_aggregation,
                                                 allow_topic=m.gate_allow_topic, leak_filter=tr.spec.leak_filter)[0],
                                            index=i, admitted=False)
                        for i, (ev, cand) in enumerate(zip(evidence, parse_candidates([trj.text for trj in mine])))]
            for v in sorted((v for v in verdicts if v.passed), key=lambda v: (-v.q, v.index))[:m.admit_top_k]:
                v.admitted = True
            task = ChainTask(doc, [Candidate(mine[v.index], v, evidence=evidence[v.index],
                                             hops=construction.searched_hops(mine[v.index])) for v in verdicts])
            for cand in task.candidates:
                if cand.verdict.admitted:
                    cand.slot = Slot(cand.verdict.question, [cand.verdict.answer], cand.hops, "generated",
                                     cand.evidence, cand)
                    slots.append(cand.slot)
            tasks.append(task)
        if n_slots > len(slots):
            slots += tr.seed_slots(t, n_slots - len(slots))
        return tasks, slots

    def extra_metrics(self, tasks: list[ChainTask]) -> dict:
        """``proposer_searches``: the searches per candidate of the searching proposer."""
        if not tasks:
            return {}
        cands = [c for task in tasks for c in task.candidates]
        return {"proposer_searches": float(np.mean([len(c.sequence.queries) for c in cands])) if cands else 0.0}


class BaseOnly:
    """A LoRA policy seen without its adapters (``Policy.base_only``) for scoring: Dr. Free's fixed
    anchor when there is no separate reference copy."""

    def __init__(self, policy):
        self._policy = policy

    def __getattr__(self, name):
        return getattr(self._policy, name)

    def token_logprobs(self, *args, **kwargs):
        with self._policy.base_only():
            return self._policy.token_logprobs(*args, **kwargs)


class DrFreeAnchor(RunExtension):
    """The policy whose teacher-forced likelihoods score Dr. Free's information gain
    (``method.drfree_anchor``, ours; seed 002 Fig. 4): the current policy (``live``), the base
    (``fixed``, and ``updated`` in iteration 1: the frozen reference, or a LoRA policy's base), or
    the last finished iteration's checkpoint (``updated``), kept across a run's iterations and
    restored on resume."""

    def __init__(self, trainer):
        self.trainer = trainer
        self.anchor = None  # the updated anchor (a Policy) once an iteration has ended
        m = trainer.cfg.method
        if m.drfree_anchor == "updated" and trainer.settings.iterations > 1 and trainer.policy.is_lora:
            raise ValueError("method.drfree_anchor=updated with LoRA (method.lora_rank > 0) is not supported: the anchor "
                             "is a full copy of an iteration's checkpoint; use --set method.drfree_anchor=fixed or live")

    @property
    def updated(self) -> bool:
        return self.trainer.cfg.method.drfree_anchor == "updated"

    def scorer(self):
        tr, mode = self.trainer, self.trainer.cfg.method.drfree_anchor
        if mode == "live":
            return tr.policy
        if mode == "updated" and self.anchor is not None:
            return self.anchor
        return tr.reference if tr.reference is not None else BaseOnly(tr.policy)

    def set_anchor(self, path) -> None:
        """Make the checkpoint at ``path`` the ``updated`` anchor (loaded once, float32, frozen)."""
        from workbench.policy.model import Policy

        self.anchor = Policy.load(path, device=str(self.trainer.policy.device), dtype=torch.float32)
        self.anchor.model.eval()
        log.info("Dr. Free anchor: %s", path)

    def iteration_ended(self, k: int, kept, last: bool) -> None:
        if not last and self.updated:
            self.set_anchor(kept)

    def resumed(self, folder, completed: int) -> None:
        ends = self.trainer.iteration_ends
        if not self.updated or len(ends) < 2:
            return
        path = construction.anchor_for(folder, completed, ends)
        if path is None:
            return
        if not path.exists():
            raise ValueError(f"--resume: {path} (the Dr. Free anchor after {completed} rounds) is missing; resume with "
                             f"the run's first --steps (its iterations end at rounds {ends})")
        self.set_anchor(path)


@RUN_EXTENSIONS.register("drfree_anchor")
def anchor_extension(trainer) -> DrFreeAnchor | None:
    """Dr. Free's anchor for a run whose proposer reward reads its likelihoods (``dr_free*``), else None."""
    return DrFreeAnchor(trainer) if str(trainer.proposer_reward).startswith("dr_free") else None
