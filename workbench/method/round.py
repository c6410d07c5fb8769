"""What one round is made of (seed 000, section 3.5), as plain data: the tasks the proposer wrote
for and their candidates, the solver's question slots and their scored rollouts, and the round's
result before anything is stored.

``loop.Trainer.run_round`` fills them in the paper's order (propose -> gate -> solve -> reward ->
update); ``run_store.RunStore.commit_round`` writes them (write-back included) and
``metrics.round_metrics`` reads the round's per-round metrics off them.

Example:
    >>> s = Slot("Who?", ["Ann"], 2, "seed", gold_chain=[1, 2])
    >>> gold_entities(s), s.rollouts
    ([1, 2], [])
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from workbench.method.gate import Verdict
from workbench.method.memory import ChainView
from workbench.method.rewards import success_rate

if TYPE_CHECKING:  # annotations only: reading a stored run (``runs show``) loads no torch
    from workbench.policy.rollout import Trajectory


@dataclass
class Candidate:
    """One proposer generation for a task: its sequence, the gate's verdict and its reward R_p
    (None: not in the proposer update)."""

    sequence: Trajectory
    verdict: Verdict
    reward: float | None = None
    slot: "Slot | None" = None  # the solver slot it was posed in, when admitted
    # a searching proposer's candidate (Dr. Free's w/o KG row): its own evidence and hop label
    evidence: ChainView | None = None
    hops: int | None = None


@dataclass
class ChainTask:
    """One task the proposer wrote for (a chain, an answer entity, a query), with its M candidates
    in generation order."""

    chain: ChainView
    candidates: list[Candidate] = field(default_factory=list)


@dataclass
class Slot:
    """One solver batch slot: an admitted generated question, or a seed-pool fallback, with its
    G scored rollouts."""

    question: str
    answers: list[str]
    hops: int
    source: str  # 'generated' or 'seed'
    chain: ChainView | None = None
    candidate: Candidate | None = None
    gold_chain: list[int] = field(default_factory=list)  # a seed question's gold entity chain
    question_id: int | None = None  # a seed question's id; a generated one gets its id when stored
    rollouts: list["Rollout"] = field(default_factory=list)

    @property
    def correct(self) -> tuple[bool, ...]:
        return tuple(bool(r.score.r_ans) for r in self.rollouts)

    @property
    def p_s(self) -> float:
        """The group success rate p_s = n_c / G (section 3.3)."""
        return success_rate(self.correct)


def gold_entities(slot) -> list:
    """A slot's gold evidence: its originating chain's entities, or a seed question's gold chain."""
    if slot is None:
        return []
    chain = getattr(slot, "chain", None)
    return list(chain.entity_ids) if chain is not None else list(getattr(slot, "gold_chain", []) or [])


@dataclass(frozen=True)
class TrajectoryScore:
    """One solver trajectory scored: R_ans, Eq. 8's path, Eq. 9's S_path (and pass), Eq. 7's R_s."""

    r_ans: float
    path: list[int]
    s_path: float
    passed: bool
    reward: float
    terms: dict | None = field(default=None, repr=False, compare=False)  # a multi-term reward's terms (seed 003)


@dataclass
class Rollout:
    """One solver trajectory with its score."""

    trajectory: Trajectory
    score: TrajectoryScore


@dataclass
class RoundResult:
    """Everything round t produced, before anything is stored."""

    round: int
    tasks: list[ChainTask]
    slots: list[Slot]
    update: dict
    timings: dict = field(default_factory=dict)
    search_cache_hit_rate: float = 0.0
    kg_tool: bool = False  # the solver was offered a KG tool (DynaSearcher's, EoG's): its tool use is logged
    # (title, type) of each entity on the slots' chains, for the answer-type counts; None: not
    # looked up (a rank other than 0, which stores nothing), and those two keys are left out
    entities: dict[int, tuple[str, str | None]] | None = None
    source_metrics: dict = field(default_factory=dict)  # the task source's own keys (EoG's per-topology counts)
    reward_metrics: dict = field(default_factory=dict)  # a multi-term solver reward's mean terms (DynaSearcher's)
    extra: dict = field(default_factory=dict)  # a method's own per-round keys (Dr. Free's iteration, chains, searches)

    @property
    def rollouts(self) -> list[Rollout]:
        return [r for s in self.slots for r in s.rollouts]

    @property
    def candidates(self) -> list[Candidate]:
        return [c for task in self.tasks for c in task.candidates]
