"""DynaSearcher's solver rewards (seed 003), registered in the core's ``rewards.SOLVER_REWARDS``:
``dynasearcher`` (r_total = r_acc + alpha (r_recall + r_penalty), :mod:`.multireward`) and its "w/o
MR" ablation ``dynasearcher_acc`` (r_acc alone). Each has ``terms`` (every term of a trajectory;
the loop stores them on its score) and ``term_metrics`` (a round's per-round keys from them: the
mean of each term as ``mr_<term>`` and ``over_hops_rate``).

Example:
    >>> term_metrics([{**{k: 1.0 for k in MULTI_REWARD_TERMS}, "over_hops": True}])["mr_total"]
    1.0
"""

from __future__ import annotations

import numpy as np

from workbench.method.rewards import SOLVER_REWARDS, SolverInputs
from workbench.peers.dynasearcher import multireward

MULTI_REWARD_TERMS = ("format", "f1", "cover_em", "ans", "recall", "penalty", "total")


def _multi_reward(x: SolverInputs, accuracy_only: bool) -> dict:
    return multireward.terms(x.trajectory, x.slot, multireward.MultiRewardParams.of(x.config), accuracy_only)


def term_metrics(terms: list[dict]) -> dict:
    """A round's multi-reward keys (seed 003): the mean of each term over its rollouts (``mr_format``,
    ``mr_f1``, ``mr_cover_em``, ``mr_ans``, ``mr_recall``, ``mr_penalty``, ``mr_total``) and the share
    of rollouts over the gold hop count (``over_hops_rate``)."""
    out = {f"mr_{k}": float(np.mean([t[k] for t in terms])) for k in MULTI_REWARD_TERMS}
    out["over_hops_rate"] = float(np.mean([t["over_hops"] for t in terms]))
    return out


@SOLVER_REWARDS.register("dynasearcher")
def dynasearcher_solver(x: SolverInputs) -> float:
    """DynaSearcher (seed 003): r_total = r_acc + alpha (r_recall + r_penalty); see
    :mod:`workbench.peers.dynasearcher.multireward`. Its ``terms`` give every term (logged per round)."""
    return dynasearcher_solver.terms(x)["total"]


@SOLVER_REWARDS.register("dynasearcher_acc")
def dynasearcher_accuracy(x: SolverInputs) -> float:
    """DynaSearcher's ablation without the multi-reward (seed 003): r_acc = r_format + r_ans alone."""
    return dynasearcher_accuracy.terms(x)["total"]


dynasearcher_solver.terms = lambda x: _multi_reward(x, accuracy_only=False)
dynasearcher_accuracy.terms = lambda x: _multi_reward(x, accuracy_only=True)
dynasearcher_solver.term_metrics = dynasearcher_accuracy.term_metrics = term_metrics
