"""HRPO, the proposer's advantage of Dr. Free (seed 002, Table 6: "Algorithm HRPO"; the seed does
not define it, Dr. Zero does: Yue et al. 2026, arXiv 2601.07055, section 3.2), registered as the
core's proposer algorithm ``hrpo`` (``update.PROPOSER_ADVANTAGES``, ``method.proposer_algorithm``).

Example:
    >>> hrpo_advantages([1.0, 0.0], [2, 2], eps=0.0)
    tensor([ 0.7071, -0.7071])
"""

from __future__ import annotations

import torch

from workbench.method.update import PROPOSER_ADVANTAGES
from workbench.peers.drfree.construction import candidate_hops


def hrpo_advantages(rewards, hops, eps: float = 1e-6) -> torch.Tensor:
    """A_i = (R_i - mean(R_{I_h})) / (std(R_{I_h}) + eps) over I_h, the batch's questions of hop
    count h, one value per question (each question is sampled once; the hop group is its baseline).

    std is the sample (Bessel-corrected) one, as ``update.grpo_advantages``; a hop count with one
    question, or with equal rewards, gets advantage 0 (ours). Dr. Zero's HRPO is strictly on-policy
    without ratio clipping; here it shares the clipped surrogate of ``update.policy_loss``, which
    equals it on the round's first optimiser step (ratio 1; ``method.minibatches`` = 1 makes every
    step so).

    Example:
        >>> hrpo_advantages([1.0, 0.0, 0.5, 0.5, 2.0], [2, 2, 3, 3, 4], eps=0.0)
        tensor([ 0.7071, -0.7071,  0.0000,  0.0000,  0.0000])
    """
    r = torch.as_tensor(rewards, dtype=torch.float32)
    h = torch.as_tensor(hops)
    if r.dim() != 1 or h.shape != r.shape:
        raise ValueError(f"hrpo_advantages: expected one hop count per reward, got rewards {tuple(r.shape)} "
                         f"and hops {tuple(h.shape)}")
    adv = torch.zeros_like(r)
    for hop in h.unique():
        group = h == hop
        if int(group.sum()) < 2:
            continue
        g = r[group]
        if float(g.std()) > 0:  # equal rewards: no signal (0, not 0/0 at eps = 0)
            adv[group] = (g - g.mean()) / (g.std() + eps)
    return adv


@PROPOSER_ADVANTAGES.register("hrpo")
def hrpo(picked, m) -> list[torch.Tensor]:
    """HRPO for a round's proposer rows: ``picked`` holds (task, candidate) pairs; each candidate's
    advantage (hop-grouped over the round, :func:`hrpo_advantages`, hop labels by
    ``construction.candidate_hops``) broadcast to its generated tokens."""
    hops = [candidate_hops(task.chain, c.hops) for task, c in picked]
    adv = hrpo_advantages([c.reward for _, c in picked], hops, m.adv_eps)
    return [torch.full((len(c.sequence.response_ids),), float(a)) * torch.tensor(c.sequence.loss_mask)
            for (_, c), a in zip(picked, adv)]
