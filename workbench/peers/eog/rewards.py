"""EoG's rewards (seed 004), registered in the core's ``rewards`` registries: the solver by Hit@1 or
set F1 of its answers over a query's complete answer set (``eog_hit1``, ``eog_f1``), the proposer by
the variance of those scores over the G rollouts (``eog_variance``).

Example:
    >>> from workbench.method.rewards import GroupOutcome, ProposerInputs, Schedule
    >>> eog_variance(ProposerInputs(Schedule(0, 10), GroupOutcome((True, False))))
    0.25
"""

from __future__ import annotations

from typing import Sequence

from workbench.method.rewards import (PROPOSER_REWARDS, SOLVER_REWARDS, ProposerInputs, SolverInputs, solver_outcome,
                                      exact_match_reward)
from workbench.scoring import answer_list, hit_at_1, normalize_answer, set_f1


@PROPOSER_REWARDS.register("eog_variance")
def eog_variance(x: ProposerInputs) -> float:
    """EoG (seed 004): the population variance of the solver's scores over the G rollouts.

    With binary scores this is p_s (1 - p_s), peaking at 0.25 on the capability boundary.
    """
    values = solver_outcome(x).values()
    if not values:
        raise ValueError("eog_variance needs at least one rollout")
    mean = sum(values) / len(values)
    return sum((v - mean) ** 2 for v in values) / len(values)


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


