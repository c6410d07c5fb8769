"""The closed-form rewards of CoEvoKG (seed 000, section 3.3) and the registries of variants.

* :func:`solver_reward` -- Eq. 7, R_s = R_ans (1 + beta S_path).
* :func:`path_score` -- Eq. 9, S_path as the smoothed geometric mean of the step supports.
* :func:`difficulty_reward` -- Eq. 10, the bell around the annealed target success rate p*(t).
* :func:`success_rate` -- p_s = n_c / G from final-answer correctness (section 3.3).

The registries (``PROPOSER_REWARDS``, ``SOLVER_REWARDS``) make each seed's variant a config value
(``method.proposer_reward``, ``method.solver_reward``). Every entry takes one argument, wide enough
for the methods that plug in: a proposer reward gets a :class:`ProposerInputs` (the chain, the
candidate, the current policy for teacher-forced likelihoods, the solver's G outcomes when the
question was posed, the schedule); a solver reward gets a :class:`SolverInputs` (R_ans, S_path,
beta, the whole trajectory and its slot).

Example:
    >>> round(solver_reward(1, 0.5), 3)
    1.1
    >>> PROPOSER_REWARDS["ssp_adversarial"](ProposerInputs(Schedule(0, 10), GroupOutcome((True, False, False, False))))
    0.75
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

from workbench.config import MethodConfig
from workbench.method.registry import Registry
from workbench.scoring import answer_list, hit_at_1, normalize_answer, set_f1


def _check_unit(name: str, value: float) -> float:
    value = float(value)
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{name} must lie in [0, 1], got {value!r}")
    return value


BETA_PATH = MethodConfig.beta_path  # Eq. 7's beta, 0.2 (paper)


def solver_reward(r_ans: float, s_path: float, beta: float = BETA_PATH) -> float:
    """Eq. 7: R_s = R_ans (1 + beta S_path), with S_path counted only when R_ans = 1.

    ``r_ans`` is answer correctness in {0, 1}; ``s_path`` in [0, 1] (Eq. 9); beta = 0.2 (paper).
    An incorrect answer gets 0 whatever its path support (no process credit, section 3.3).

    Example:
        >>> solver_reward(1, 0.5, beta=0.2)   # 1 * (1 + 0.2 * 0.5)
        1.1
        >>> solver_reward(0, 1.0)
        0.0
    """
    if r_ans not in (0, 1):
        raise ValueError(f"r_ans must be 0 or 1 (answer correctness), got {r_ans!r}")
    if not r_ans:
        return 0.0
    return 1.0 + beta * _check_unit("s_path", s_path)


def path_score(step_supports: Sequence[float], eps: float) -> float:
    """Eq. 9: S_path = exp( 1/(L-1) * sum_i log(M(e_i, e_i+1) + eps) ), capped at 1.

    ``step_supports`` are the L-1 values M(e_i, e_i+1) in [0, 1] of consecutive path entities.
    Ours: a path with no step (fewer than two entities) has no traceable hop and scores 0; the cap
    min(1, .) keeps S_path in [0, 1] as the paper states (it only bites when every M is near 1).

    Example:
        >>> round(path_score([1.0, 0.25], eps=0.0), 6)   # sqrt(1 * 0.25)
        0.5
        >>> round(path_score([0.0, 1.0], eps=0.01), 4)   # sqrt(0.01 * 1.01): one unsupported hop sinks it
        0.1005
    """
    if eps < 0:
        raise ValueError(f"eps must be >= 0, got {eps!r}")
    if len(step_supports) == 0:
        return 0.0
    total = 0.0
    for m in step_supports:
        if not 0.0 <= m <= 1.0:
            raise ValueError(f"step support M must lie in [0, 1], got {m!r}")
        if m + eps == 0.0:
            return 0.0  # log(0): the geometric mean is exactly 0
        total += math.log(m + eps)
    return min(1.0, math.exp(total / len(step_supports)))


def target_success_rate(step: int, total_steps: int, p_start: float, p_end: float) -> float:
    """Eq. 10's schedule: p*(t) = p*_s - (p*_s - p*_e) t / T (linear anneal, t clipped to [0, T]).

    Example:
        >>> round(target_success_rate(5, 10, 0.7, 0.4), 6)
        0.55
    """
    if total_steps <= 0:
        raise ValueError(f"total_steps must be positive, got {total_steps!r}")
    t = min(max(step, 0), total_steps)
    return p_start - (p_start - p_end) * t / total_steps


def difficulty_reward(p_s: float, step: int, total_steps: int, p_start: float, p_end: float,
                      sigma: float) -> float:
    """Eq. 10: R_diff = exp(-(p_s - p*(t))^2 / (2 sigma^2)) with the annealed target p*(t).

    Example:
        >>> round(difficulty_reward(0.55, 5, 10, 0.7, 0.4, 0.2), 6)  # at the target
        1.0
        >>> round(difficulty_reward(0.75, 5, 10, 0.7, 0.4, 0.2), 6)  # one sigma off: exp(-1/2)
        0.606531
    """
    if sigma <= 0:
        raise ValueError(f"sigma must be positive, got {sigma!r}")
    target = target_success_rate(step, total_steps, p_start, p_end)
    return math.exp(-((_check_unit("p_s", p_s) - target) ** 2) / (2.0 * sigma ** 2))


def success_rate(correct: Sequence[bool]) -> float:
    """p_s = n_c / G: the fraction of a question's G rollouts whose final answer is correct.

    Final-answer correctness only, never the process-augmented R_s (section 3.3).

    Example:
        >>> success_rate([True, False, True, False])
        0.5
    """
    if len(correct) == 0:
        raise ValueError("success_rate needs at least one rollout (G >= 1)")
    return sum(bool(c) for c in correct) / len(correct)


@dataclass(frozen=True)
class GroupOutcome:
    """What the G solver rollouts of one admitted question produced.

    ``correct``: final-answer correctness per rollout; ``scores``: the solver rewards R_s per
    rollout (read by score-based rewards such as EoG's variance; empty means "use correct").
    """

    correct: tuple[bool, ...]
    scores: tuple[float, ...] = ()

    def values(self) -> list[float]:
        return [float(s) for s in self.scores] if self.scores else [float(c) for c in self.correct]


@dataclass(frozen=True)
class Schedule:
    """Where training is (step t of T) and Eq. 10's schedule; defaults are MethodConfig's (ours)."""

    step: int
    total_steps: int
    p_start: float = 0.7
    p_end: float = 0.4
    sigma: float = 0.2


@dataclass(frozen=True)
class ProposerInputs:
    """What a proposer reward may read about one candidate.

    ``outcome`` is the G solver rollouts of the posed question (None when the reward needs none, as
    Dr. Free's); ``chain`` the ChainView it was written from; ``question``/``answer`` the candidate;
    ``policy`` the current policy (teacher-forced likelihoods, seed 002); ``search`` the run's
    search tool (Dr. Free's one-shot shortcut retrieves the question with it; None elsewhere);
    ``options`` the run's MethodConfig (Dr. Free's reward form, margin and micro-batch; None = defaults).
    """

    schedule: Schedule
    outcome: GroupOutcome | None = None
    chain: Any = None
    question: str | None = None
    answer: str | None = None
    policy: Any = None
    search: Any = None
    options: Any = None  # the run's MethodConfig (Dr. Free's reward form, margin, micro-batch), None = defaults


@dataclass(frozen=True)
class SolverInputs:
    """What a solver reward may read about one trajectory: R_ans, S_path (Eq. 9), Eq. 7's beta, the
    trajectory itself (queries, retrieved ids, turns), its slot (golds, gold chain, hops) and the
    run's MethodConfig."""

    r_ans: float
    s_path: float = 0.0
    beta: float = BETA_PATH
    trajectory: Any = None
    slot: Any = None
    config: Any = None  # the run's MethodConfig (rewards with parameters of their own read them here)


def _outcome(x: ProposerInputs) -> GroupOutcome:
    if x.outcome is None:
        raise ValueError("this proposer reward needs the solver's outcomes of the posed question")
    return x.outcome


PROPOSER_REWARDS = Registry("proposer reward")
SOLVER_REWARDS = Registry("solver reward")


@PROPOSER_REWARDS.register("coevokg_difficulty")
def coevokg_difficulty(x: ProposerInputs) -> float:
    """CoEvoKG (Eq. 10): the difficulty bell at p_s = success_rate(outcome.correct)."""
    s = x.schedule
    return difficulty_reward(success_rate(_outcome(x).correct), s.step, s.total_steps, s.p_start, s.p_end, s.sigma)


@PROPOSER_REWARDS.register("ssp_adversarial")
def ssp_adversarial(x: ProposerInputs) -> float:
    """SSP's adversarial reward 1 - acc (seed 000, section 4: the build-up ablation's start)."""
    return 1.0 - success_rate(_outcome(x).correct)


@PROPOSER_REWARDS.register("dr_zero")
def dr_zero(x: ProposerInputs) -> float:
    """Dr. Zero style: (n - k)/(n - 1) for k of n correct; an unsolved question (k = 0) earns 0.

    Hardest solvable (k = 1) scores 1, trivial (k = n) 0; needs n >= 2. The formula, its 0 for an
    unsolved question included, is ours: no seed (000-004) states it. Seed 002 names only Dr. Zero's
    (Yue et al. 2026) "pass-rate difficulty reward" (its Table 2's "Difficulty Only" row), computed
    from solver rollouts, without a formula.
    """
    correct = _outcome(x).correct
    n, k = len(correct), sum(bool(c) for c in correct)
    if n < 2:
        raise ValueError(f"dr_zero needs at least 2 rollouts, got {n}")
    return 0.0 if k == 0 else (n - k) / (n - 1)


@PROPOSER_REWARDS.register("eog_variance")
def eog_variance(x: ProposerInputs) -> float:
    """EoG (seed 004): the population variance of the solver's scores over the G rollouts.

    With binary scores this is p_s (1 - p_s), peaking at 0.25 on the capability boundary.
    """
    values = _outcome(x).values()
    if not values:
        raise ValueError("eog_variance needs at least one rollout")
    mean = sum(values) / len(values)
    return sum((v - mean) ** 2 for v in values) / len(values)


def _dr_free_many(xs: Sequence[ProposerInputs], shortcuts) -> list[float]:
    # imported here: drfree needs torch and the policy protocol, which the closed forms above do not
    from workbench.method import drfree

    for x in xs:
        if x.policy is None or x.chain is None or x.question is None or x.answer is None:
            raise ValueError("dr_free needs the chain, the candidate and the policy (ProposerInputs)")
    if not xs:
        return []
    o = xs[0].options
    form, margin = (o.drfree_reward_form, o.drfree_margin) if o is not None else ("positive_part", 0.0)
    micro = o.drfree_micro_batch if o is not None else drfree.MICRO_BATCH
    infos = drfree.batch_information_gain(xs[0].policy, [(x.chain, x.question, x.answer) for x in xs],
                                          xs[0].search, shortcuts, micro_batch=micro)
    return [drfree.info_gain_reward(i["gain"], form, margin) for i in infos]


def _dr_free(x: ProposerInputs, shortcuts) -> float:
    return _dr_free_many([x], shortcuts)[0]


def rollout_free(fn):
    """Mark a proposer reward that reads no solver outcome (``needs_outcome``): the loop then scores
    a round's candidates before the rollouts, every candidate that passed the gate, in one batch
    (``fn.batch``, when given) -- Dr. Free's point: no pass-rate estimation (seed 002, abstract)."""
    fn.needs_outcome = False
    return fn


def needs_outcome(name: str) -> bool:
    """Whether the named proposer reward reads the solver's rollouts of the posed question.

    Example:
        >>> needs_outcome("coevokg_difficulty"), needs_outcome("dr_free")
        (True, False)
    """
    return getattr(PROPOSER_REWARDS[name], "needs_outcome", True)


def score_many(name: str, xs: Sequence[ProposerInputs]) -> list[float]:
    """The named proposer reward of each input, through its batched form where it has one.

    Example:
        >>> score_many("ssp_adversarial", [ProposerInputs(Schedule(0, 1), GroupOutcome((True, False)))])
        [0.5]
    """
    fn = PROPOSER_REWARDS[name]
    batch = getattr(fn, "batch", None)
    return [float(r) for r in batch(xs)] if batch else [float(fn(x)) for x in xs]


DR_FREE_SHORTCUTS = ("closed_book", "source_only", "one_shot", "per_hop")  # the full set B (Eq. 5)


def _register_dr_free(name: str, kept: tuple, doc: str) -> None:
    def reward(x: ProposerInputs) -> float:
        return _dr_free(x, kept)

    reward.__doc__ = doc
    reward.batch = lambda xs: _dr_free_many(xs, kept)
    PROPOSER_REWARDS.register(name)(rollout_free(reward))


_register_dr_free("dr_free", DR_FREE_SHORTCUTS,
                  "Dr. Free (seed 002, Eq. 5): max(0, Delta_B) over the full shortcut set B (closed-book, "
                  "source-only, one-shot, per-hop); reads no solver outcome. See :mod:`workbench.method.drfree`.")
dr_free = PROPOSER_REWARDS["dr_free"]


def _register_leave_one_out(left_out: str) -> None:
    """Table 3's leave-one-shortcut-type-out rows as registry names ``dr_free_wo_<type>``."""
    _register_dr_free(f"dr_free_wo_{left_out}", tuple(s for s in DR_FREE_SHORTCUTS if s != left_out),
                      f"Dr. Free without the {left_out} shortcut (seed 002, Table 3's ablation).")


for _left_out in DR_FREE_SHORTCUTS:
    _register_leave_one_out(_left_out)


@PROPOSER_REWARDS.register("dr_free_plus_dr_zero")
def dr_free_plus_dr_zero(x: ProposerInputs) -> float:
    """Seed 002, Table 2's "IG + Difficulty" row: the information-gain reward plus the pass-rate
    difficulty reward (``dr_zero``). Their sum is ours (the paper says "combines both rewards");
    it reads the solver's outcomes, so it takes the rollout path like Eq. 10."""
    return _dr_free(x, DR_FREE_SHORTCUTS) + dr_zero(x)


@SOLVER_REWARDS.register("exact_match")
def exact_match_reward(x: SolverInputs) -> float:
    """Search-R1: the outcome reward R_ans alone (path support and beta ignored)."""
    if x.r_ans not in (0, 1):
        raise ValueError(f"r_ans must be 0 or 1 (answer correctness), got {x.r_ans!r}")
    return float(x.r_ans)


def path_rewarded(fn):
    """Mark a solver reward that reads S_path (``reads_path``): only then does the loop pay for
    the LLM path extractor (``method.path_extractor = llm``, one greedy batch a round); the other
    rewards' S_path only feeds the round's metrics, from the deterministic extraction (Eq. 8)."""
    fn.reads_path = True
    return fn


def reads_path(name: str) -> bool:
    """Whether the named solver reward reads S_path (Eq. 9), i.e. its path extraction matters.

    Example:
        >>> reads_path("coevokg"), reads_path("exact_match")
        (True, False)
    """
    return getattr(SOLVER_REWARDS[name], "reads_path", False)


@SOLVER_REWARDS.register("coevokg")
@path_rewarded
def coevokg_solver(x: SolverInputs) -> float:
    """CoEvoKG: Eq. 7, R_s = R_ans (1 + beta S_path)."""
    return solver_reward(x.r_ans, x.s_path, x.beta)


def _answer_set(x: SolverInputs) -> list[str] | None:
    """The complete answer set of an EoG query slot (its chain is a ``eog.TopologyView``), else None:
    a seed or chain slot's ``answers`` are aliases of ONE entity, not a set of answers."""
    chain = getattr(x.slot, "chain", None)
    return list(x.slot.answers) if getattr(chain, "pattern", "") else None


def _answers(x: SolverInputs) -> list[str]:
    """The solver's answers as a ranked list: EoG's graph-tool solver writes a ``;``-separated set
    (``scoring.answer_list``); a solver that answers one string gives a list of one."""
    return answer_list(getattr(x.trajectory, "answer", None))


def entity_f1(predictions: Sequence[str], aliases: Sequence[str]) -> float:
    """Set F1 of ``predictions`` against a set of ONE entity named by ``aliases`` (a seed question's
    golds): recall is 1 when any prediction names it, precision the share of the distinct
    predictions that do (each alias names the same entity). A single correct answer scores 1, as EM.

    Example:
        >>> entity_f1(["Zafonil"], ["Zafonil", "Federation of Zafonil"]), entity_f1(["Zafonil", "Rome"], ["Zafonil"])
        (1.0, 0.6666666666666666)
        >>> entity_f1(["Rome"], ["Zafonil"]), entity_f1([], ["Zafonil"])
        (0.0, 0.0)
    """
    golds = {normalize_answer(a) for a in aliases} - {""}
    pred = {n for n in (normalize_answer(p) for p in predictions) if n}
    precision = len(pred & golds) / len(pred) if pred else 0.0
    return 2 * precision / (1 + precision) if precision else 0.0


@SOLVER_REWARDS.register("eog_hit1")
def eog_hit1(x: SolverInputs) -> float:
    """EoG (seed 004): Hit@1 of the solver's first answer over the query's complete answer set
    (``scoring.hit_at_1``); on a slot without a set (a seed question: one entity, its aliases) the
    first answer's EM.

    Example:
        >>> from types import SimpleNamespace as NS
        >>> slot = NS(chain=NS(pattern="2p"), answers=["Rome", "Oslo"])
        >>> eog_hit1(SolverInputs(0.0, trajectory=NS(answer="Oslo; Bern"), slot=slot))
        1.0
    """
    answers = _answer_set(x)
    if answers is None and x.slot is None:  # no question to score against: the given correctness
        return exact_match_reward(x)
    return hit_at_1(_answers(x), answers if answers is not None else list(x.slot.answers))


@SOLVER_REWARDS.register("eog_f1")
def eog_f1(x: SolverInputs) -> float:
    """EoG (seed 004): set F1 of the solver's answers (its ``;``-separated set, ``scoring.answer_list``)
    over the query's complete answer set (``scoring.set_f1``); on a slot without a set (a seed
    question: one entity, its aliases) :func:`entity_f1`, which is EM for a single answer. EoG names
    Hit@1 and F1 as its metrics but not its training reward (ours: F1, so listing wrong answers
    costs precision and missing ones recall).

    Example:
        >>> from types import SimpleNamespace as NS
        >>> slot = NS(chain=NS(pattern="2p"), answers=["Rome", "Oslo", "Bern"])
        >>> eog_f1(SolverInputs(1.0, trajectory=NS(answer="Oslo"), slot=slot))
        0.5
        >>> eog_f1(SolverInputs(1.0, trajectory=NS(answer="Oslo; Rome; Bern"), slot=slot))
        1.0
    """
    answers = _answer_set(x)
    if answers is not None:
        return set_f1(_answers(x), answers)
    if x.slot is None:  # no question to score against: the given correctness
        return exact_match_reward(x)
    return entity_f1(_answers(x), list(x.slot.answers))


def _multi_reward(x: SolverInputs, accuracy_only: bool) -> dict:
    from workbench.method import multireward

    return multireward.terms(x.trajectory, x.slot, multireward.MultiRewardParams.of(x.config), accuracy_only)


@SOLVER_REWARDS.register("dynasearcher")
def dynasearcher_solver(x: SolverInputs) -> float:
    """DynaSearcher (seed 003): r_total = r_acc + alpha (r_recall + r_penalty); see
    :mod:`workbench.method.multireward`. Its ``terms`` give every term (logged per round)."""
    return dynasearcher_solver.terms(x)["total"]


@SOLVER_REWARDS.register("dynasearcher_acc")
def dynasearcher_accuracy(x: SolverInputs) -> float:
    """DynaSearcher's ablation without the multi-reward (seed 003): r_acc = r_format + r_ans alone."""
    return dynasearcher_accuracy.terms(x)["total"]


dynasearcher_solver.terms = lambda x: _multi_reward(x, accuracy_only=False)
dynasearcher_accuracy.terms = lambda x: _multi_reward(x, accuracy_only=True)
