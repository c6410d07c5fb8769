"""The policy update (seed 000, section 3.5, Eqs. 11-12): one clipped surrogate, two advantages.

Both roles maximise the clipped PPO surrogate with a k3 KL penalty to a frozen reference
(:func:`policy_loss`), its coefficient adapted towards a target KL (:class:`AdaptiveKL`), and
differ only in the token advantage:

* solver, GRPO (Eq. 11, :func:`grpo_advantages`): group-relative, one value per trajectory,
  broadcast by the caller to its generated tokens;
* proposer, REINFORCE++ (Eq. 12, :func:`reinforce_pp_advantages`): the reward at the terminal token,
  discounted returns, whitened over every valid token of the global batch; the proposer's algorithm
  is a registry (:data:`PROPOSER_ADVANTAGES`, ``method.proposer_algorithm``) a peer adds to (Dr.
  Free's HRPO).

Both advantages are then scaled per token by an affine function of the token's own probability
(:func:`probability_scale`, damping low-probability tokens). Retrieved tokens (the environment's
``<information>`` blocks) are excluded by the caller's ``mask``.

Example:
    >>> import torch
    >>> grpo_advantages(torch.tensor([1.0, 0.0, 1.0, 0.0]), group_size=4, eps=0.0)
    tensor([ 0.8660, -0.8660,  0.8660, -0.8660])
"""

from __future__ import annotations

import logging
import math
import time

import torch

from workbench.method.ranks import OneProcess
from workbench.registry import Registry

log = logging.getLogger(__name__)  # the update's micro-batches at DEBUG


def grpo_advantages(rewards, group_size: int, eps: float = 1e-6) -> torch.Tensor:
    """Eq. 11: A_i = (R_i - mean(R_group)) / (std(R_group) + eps), one value per trajectory.

    ``rewards`` is flat, groups of ``group_size`` consecutive trajectories (one question's G
    rollouts). std is the sample (Bessel-corrected) standard deviation, as TRL and veRL compute it;
    a group of identical rewards gets advantage 0.

    Example:
        >>> grpo_advantages([2.0, 0.0], group_size=2, eps=0.0)  # mean 1, std sqrt(2)
        tensor([ 0.7071, -0.7071])
    """
    r = torch.as_tensor(rewards, dtype=torch.float32)
    if r.dim() != 1 or group_size < 2 or r.numel() % group_size:
        raise ValueError(f"grpo_advantages: expected a flat tensor of whole groups of size >= 2, got shape "
                         f"{tuple(r.shape)} with group_size={group_size}")
    groups = r.view(-1, group_size)
    adv = (groups - groups.mean(dim=1, keepdim=True)) / (groups.std(dim=1, keepdim=True) + eps)
    # equal rewards: the mean's rounding (0.7 * 8 / 8 != 0.7 in float32) divided by eps is no advantage
    uniform = (groups == groups[:, :1]).all(dim=1, keepdim=True)
    return adv.masked_fill(uniform, 0.0).reshape(-1)


def reinforce_pp_advantages(rewards_at_terminal, mask: torch.Tensor, gamma: float = 1.0,
                            eps: float = 1e-8) -> torch.Tensor:
    """Eq. 12: G_t = sum_{s>=t} gamma^(s-t) r_s, A_t = (G_t - mu_B) / (sigma_B + eps).

    Token rewards are zero except at each sequence's terminal generated token (its last valid
    position), which receives R_p. mu_B and sigma_B are the mean and (population) standard deviation
    over every valid token of the batch (global, not group-relative). Invalid positions get 0.

    Example:
        >>> m = torch.tensor([[1, 1, 0], [1, 1, 1]])
        >>> reinforce_pp_advantages(torch.tensor([1.0, 0.0]), m, eps=0.0)  # G: [1,1,-] [0,0,0]
        tensor([[ 1.2247,  1.2247,  0.0000],
                [-0.8165, -0.8165, -0.8165]])
    """
    r = torch.as_tensor(rewards_at_terminal, dtype=torch.float32)
    m = torch.as_tensor(mask).to(torch.float32)
    if m.dim() != 2 or r.shape != (m.shape[0],):
        raise ValueError(f"reinforce_pp_advantages: rewards {tuple(r.shape)} must be (B,) for mask (B, T), "
                         f"got mask {tuple(m.shape)}")
    positions = torch.arange(m.shape[1], dtype=torch.float32).expand_as(m)
    if (m.sum(dim=1) == 0).any():
        raise ValueError("reinforce_pp_advantages: a sequence has no valid token")
    terminal = (positions * m).amax(dim=1, keepdim=True)  # index of the last valid token
    steps_to_end = terminal - positions
    returns = torch.where(steps_to_end >= 0, r[:, None] * gamma ** steps_to_end.clamp(min=0), 0.0)
    n = m.sum()
    mu = (returns * m).sum() / n
    sigma = (((returns - mu) ** 2) * m).sum().div(n).sqrt()
    return torch.where(m > 0, (returns - mu) / (sigma + eps), 0.0)


PROPOSER_ADVANTAGES = Registry("proposer algorithm")  # method.proposer_algorithm -> advantages of a round's rows


@PROPOSER_ADVANTAGES.register("reinforce_pp")
def reinforce_pp(picked, m) -> list[torch.Tensor]:
    """Eq. 12 for a round's proposer rows: ``picked`` holds (task, candidate) pairs, each candidate
    with its reward R_p; each row gets its token advantages by :func:`reinforce_pp_advantages`,
    whitened over the round's proposer batch, the reward at the terminal token (a searching
    proposer's retrieved tokens, SSP's, are masked). ``m`` is the run's ``MethodConfig``.

    Example:
        >>> from types import SimpleNamespace as NS
        >>> rows = [(None, NS(reward=r, sequence=NS(response_ids=[1, 2], loss_mask=[1, 1]))) for r in (1.0, 0.0)]
        >>> [a.tolist() for a in reinforce_pp(rows, NS(discount=1.0, adv_eps=0.0))]
        [[1.0, 1.0], [-1.0, -1.0]]
    """
    sequences = [c.sequence for _, c in picked]
    width = max(len(s.response_ids) for s in sequences)
    mask = torch.zeros(len(sequences), width)
    terminal = torch.zeros(len(sequences))
    for i, (_, c) in enumerate(picked):
        mask[i, :len(c.sequence.response_ids)] = torch.tensor(c.sequence.loss_mask, dtype=torch.float32)
        terminal[i] = c.reward
    adv = reinforce_pp_advantages(terminal, mask, gamma=m.discount, eps=m.adv_eps)
    return [adv[i, :len(s.response_ids)] for i, s in enumerate(sequences)]


def probability_scale(logprobs: torch.Tensor, low: float = 0.5, high: float = 1.0) -> torch.Tensor:
    """Per-token advantage scale low + (high - low) * p, p = exp(logprob) (section 3.5, ours).

    A token the policy gave probability ~0 has its advantage scaled by ``low``, a certain token by
    ``high``. ``low = high = 1`` disables it. The scale is a weight, not a path for gradients.
    Defaults are MethodConfig.prob_scale_low/high (ours: the paper cites Yang et al. 2026 without
    the constants).

    Example:
        >>> probability_scale(torch.log(torch.tensor([0.0, 0.5, 1.0])))
        tensor([0.5000, 0.7500, 1.0000])
    """
    if not 0.0 <= low <= high:
        raise ValueError(f"probability_scale: need 0 <= low <= high, got low={low}, high={high}")
    return low + (high - low) * logprobs.detach().exp()


def warmup_lr(lr: float, step: int, warmup_steps: int) -> float:
    """The learning rate of optimiser step ``step`` (0-based) under a linear warm-up (ours).

    Rises as lr * (step + 1) / warmup_steps, then stays at ``lr``; ``warmup_steps = 0`` disables it.
    Search-R1's recipe warms up its learning rate too (veRL's ``lr_warmup_steps_ratio``); on the tiny
    backbone the first Adam steps are sign steps of size lr on every weight, which is what a warm-up
    keeps small (LOG.md).

    Example:
        >>> [warmup_lr(1e-4, s, 4) for s in (0, 1, 3, 10)]
        [2.5e-05, 5e-05, 0.0001, 0.0001]
    """
    if warmup_steps < 0 or step < 0:
        raise ValueError(f"warmup_lr: need step >= 0 and warmup_steps >= 0, got {step}, {warmup_steps}")
    return lr * min(1.0, (step + 1) / warmup_steps) if warmup_steps else lr


def k3_kl(new_logprobs: torch.Tensor, ref_logprobs: torch.Tensor) -> torch.Tensor:
    """The low-variance k3 estimator of KL(pi || pi_ref) per token: exp(ref - new) - (ref - new) - 1."""
    d = ref_logprobs - new_logprobs
    return torch.exp(d) - d - 1.0


class AdaptiveKL:
    """The adaptive KL coefficient (section 3.5: "an adaptive low-variance KL penalty").

    The paper's controller is in its unavailable appendix; this is the proportional controller of
    Ziegler et al. (2019), as PPO-RLHF code (veRL's ``AdaptiveKLController``) runs it: after each
    optimiser step on ``n`` sequences with measured KL ``kl``,
    e = clip(kl / target - 1, -0.2, 0.2) and coef <- coef * (1 + e * n / horizon).
    ``target = 0`` keeps the coefficient fixed. The initial value, target and horizon are ours
    (MethodConfig.kl_coef, kl_target, kl_horizon).

    Example:
        >>> c = AdaptiveKL(0.01, target=0.1, horizon=100)
        >>> round(c.update(kl=1.0, n=50), 6)   # far above target: e clipped to 0.2, coef * 1.1
        0.011
        >>> round(c.update(kl=0.05, n=50), 6)  # half the target: e = -0.5 -> -0.2, coef * 0.9
        0.0099
    """

    def __init__(self, coef: float, target: float = 0.0, horizon: float = 1000.0):
        if coef < 0 or target < 0 or horizon <= 0:
            raise ValueError(f"AdaptiveKL: need coef >= 0, target >= 0, horizon > 0; got {coef}, {target}, {horizon}")
        self.coef, self.target, self.horizon = float(coef), float(target), float(horizon)

    def update(self, kl: float, n: int) -> float:
        if self.target > 0 and math.isfinite(kl):
            error = min(max(kl / self.target - 1.0, -0.2), 0.2)
            self.coef *= 1.0 + error * n / self.horizon
        return self.coef


LOSS_AGGREGATIONS = ("token-mean", "seq-mean-token-mean")


def policy_loss(new_logprobs: torch.Tensor, old_logprobs: torch.Tensor, ref_logprobs: torch.Tensor | None,
                advantages: torch.Tensor, mask: torch.Tensor, clip_eps: float, kl_coef: float,
                aggregation: str = "token-mean") -> tuple[torch.Tensor, dict]:
    """The clipped surrogate plus the k3 KL penalty (section 3.5), masked and aggregated.

    Per token: -min(rho A, clip(rho, 1 - eps, 1 + eps) A) + kl_coef * k3, rho = exp(new - old).
    ``advantages`` is (B,) (broadcast over tokens, GRPO) or (B, T). Aggregation (ours):
    'token-mean' (default) averages over every valid token of the batch, so long trajectories are not
    down-weighted (veRL's default ``token-mean``; TRL's ``bnpo``); 'seq-mean-token-mean' averages
    within each sequence, then over sequences (TRL's ``grpo``).

    Returns the loss and detached stats: ``kl`` (token mean of k3), ``clip_fraction`` (share of
    valid tokens where the clip is active), ``ratio_mean``, ``pg_loss`` (the loss without KL).

    Example:
        >>> lp = torch.log(torch.tensor([[0.5, 0.5]]))
        >>> loss, stats = policy_loss(lp, lp, lp, torch.tensor([2.0]), torch.ones(1, 2), 0.2, 0.1)
        >>> float(loss), stats["kl"], stats["clip_fraction"]   # rho = 1, k3 = 0: loss = -A
        (-2.0, 0.0, 0.0)
    """
    if aggregation not in LOSS_AGGREGATIONS:
        raise ValueError(f"unknown aggregation {aggregation!r}; expected one of {list(LOSS_AGGREGATIONS)}")
    mask = mask.to(new_logprobs.dtype)
    adv = advantages.unsqueeze(1) if advantages.dim() == 1 else advantages
    ratio = torch.exp(new_logprobs - old_logprobs)
    clipped = torch.clamp(ratio, 1.0 - clip_eps, 1.0 + clip_eps)
    pg = -torch.min(ratio * adv, clipped * adv)
    kl = k3_kl(new_logprobs, ref_logprobs) if ref_logprobs is not None else torch.zeros_like(pg)
    per_token = pg + kl_coef * kl if kl_coef else pg

    def aggregate(x: torch.Tensor) -> torch.Tensor:
        if aggregation == "token-mean":
            return (x * mask).sum() / mask.sum().clamp(min=1.0)
        return ((x * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)).mean()

    loss = aggregate(per_token)
    token_mean = lambda x: float((x * mask).sum() / mask.sum().clamp(min=1.0))  # noqa: E731
    is_clipped = ((ratio < 1.0 - clip_eps) & (adv < 0)) | ((ratio > 1.0 + clip_eps) & (adv > 0))
    with torch.no_grad():
        stats = {"kl": token_mean(kl), "clip_fraction": token_mean(is_clipped.to(mask.dtype)),
                 "ratio_mean": token_mean(ratio), "pg_loss": float(aggregate(pg)), "loss": float(loss)}
    return loss, stats


def is_finite_step(*values) -> bool:
    """True when every value (loss, KL, ...) of a step is a finite number.

    Example:
        >>> is_finite_step(0.3, torch.tensor(0.01)), is_finite_step(float("nan"), 0.0)
        (True, False)
    """
    return all(math.isfinite(float(v)) for v in values)


class NonFiniteGuard:
    """Counts consecutive non-finite steps; the loop skips such a step, and after ``max_consecutive``
    in a row :meth:`check` raises RuntimeError (section 3.5 stability rule of the workbench).

    Example:
        >>> g = NonFiniteGuard(max_consecutive=2)
        >>> g.check(1.0, 0.0), g.check(float("inf"), 0.0), g.check(0.5, 0.0)
        (True, False, True)
    """

    def __init__(self, max_consecutive: int = 3):
        if max_consecutive < 1:
            raise ValueError(f"max_consecutive must be >= 1, got {max_consecutive!r}")
        self.max_consecutive = max_consecutive
        self.consecutive = 0
        self.skipped = 0

    def check(self, loss, kl=0.0, step: int | None = None) -> bool:
        """True: apply the step. False: skip it (non-finite). Raises after too many in a row."""
        if is_finite_step(loss, kl):
            self.consecutive = 0
            return True
        self.consecutive += 1
        self.skipped += 1
        if self.consecutive >= self.max_consecutive:
            where = f" (last at step {step})" if step is not None else ""
            raise RuntimeError(
                f"training stopped: {self.consecutive} consecutive steps had a non-finite loss or KL{where} "
                f"(loss={float(loss)!r}, kl={float(kl)!r}); lower the learning rate or check the rewards")
        return False


class PolicyStep:
    """One optimiser step of the shared backbone on a batch of rows (section 3.5): the token-mean
    clipped surrogate (:func:`policy_loss`) with the k3 KL to the frozen reference over every loss
    token of the rows, in micro-batches of ``m.micro_batch`` sequences, then gradient clipping and
    AdamW; a non-finite step is skipped (:class:`NonFiniteGuard`) and the KL coefficient adapts
    (:class:`AdaptiveKL`). What ``loop.Trainer.update`` runs each of a round's steps with, and what
    ``bench gpu`` times.

    ``reference`` is a separate frozen policy for a full fine-tune; a LoRA policy takes None and its
    adapter-free base is the reference (``Policy.base_only``). The optimiser holds the trainable
    parameters only. ``ranks`` (``method.ranks``) spreads a step's rows over processes; ``m`` is the
    run's ``MethodConfig``.

    Example:
        >>> # step = PolicyStep(policy, reference, cfg.method); stats = step(t, rows, advantages)
    """

    def __init__(self, policy, reference, m, ranks=None):
        self.policy, self.reference, self.m = policy, reference, m
        self.optimizer = torch.optim.AdamW([p for p in policy.model.parameters() if p.requires_grad], lr=m.lr,
                                           weight_decay=0.0)
        self.guard = NonFiniteGuard(m.max_non_finite)
        self.kl = AdaptiveKL(m.kl_coef, m.kl_target, m.kl_horizon)
        self.ranks = ranks or OneProcess()

    def reference_logprobs(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                           pack_width: int | None = None) -> torch.Tensor:
        """The frozen reference's log-probs (no grad): the separate reference policy, or a LoRA
        policy's adapter-free base; packed into rows of ``pack_width`` when given."""
        packed = {"packed": pack_width is not None, "pack_width": pack_width}
        with torch.no_grad():
            if self.reference is not None:
                return self.reference.token_logprobs(input_ids, attention_mask, **packed)
            with self.policy.base_only():
                return self.policy.token_logprobs(input_ids, attention_mask, **packed)

    def micro_batches(self, rows: list, order: list[int]) -> tuple[list[list[int]], int | None]:
        """(the row indices of each micro-batch, the packed rows' width or None): ``method.micro_batch``
        rows at a time in ``order``, or with ``method.pack_sequences`` that many packed rows of the
        longest row's length, filled first-fit decreasing (``policy.packing``). The token-mean loss
        weights each micro-batch by its share of the step's loss tokens, so the grouping leaves
        the gradient as it is."""
        from workbench.policy import packing

        size = self.m.micro_batch
        if not self.m.pack_sequences or not order:  # a rank may hold no row of a small step
            return [order[s:s + size] for s in range(0, len(order), size)], None
        width = max(rows[i].length for i in order)
        groups = packing.bins([rows[i].length for i in order], width)
        return [[order[j] for g in groups[s:s + size] for j in g] for s in range(0, len(groups), size)], width

    def __call__(self, t: int, rows: list, advantages: list[torch.Tensor], own_old: bool = False) -> dict:
        """One optimiser step on ``rows`` (``Trajectory``s) with their token ``advantages``; returns the
        step's loss, KL, entropy and clip fraction (token means) and whether it was ``skipped``.
        ``own_old``: the policy is still the one that sampled ``rows``; its log-probs, detached, are
        the old ones."""
        from workbench.policy.rollout import batch_tensors

        m = self.m
        total_tokens = sum(int(sum(r.loss_mask)) for r in rows)
        if total_tokens == 0:
            return {"loss": 0.0, "kl": 0.0, "entropy": 0.0, "clip_fraction": 0.0, "skipped": 1}
        self.policy.model.train()
        self.optimizer.zero_grad(set_to_none=True)
        sums = {"loss": 0.0, "kl": 0.0, "entropy": 0.0, "clip_fraction": 0.0}
        pad = self.policy.tokenizer.pad_token_id
        order = sorted(range(len(rows)), key=lambda i: rows[i].length)  # similar lengths pad less
        order = self.ranks.step_rows(order)  # this rank's rows; total_tokens stays the global batch's
        batches, width = self.micro_batches(rows, order)
        for k, idx in enumerate(batches):
            clock = time.perf_counter()
            tensors = batch_tensors([rows[i] for i in idx], pad)
            adv = torch.zeros_like(tensors["old_logprobs"])
            for j, i in enumerate(idx):
                p = len(rows[i].prompt_ids)
                adv[j, p:p + len(advantages[i])] = advantages[i]
            tensors = {k: v.to(self.policy.device) for k, v in tensors.items()}
            adv = adv.to(self.policy.device)
            new_logp, entropy = self.policy.token_logprobs(tensors["input_ids"], tensors["attention_mask"],
                                                           entropy_mask=tensors["loss_mask"],
                                                           packed=width is not None, pack_width=width)
            ref_logp = self.reference_logprobs(tensors["input_ids"], tensors["attention_mask"], width)
            mask = tensors["loss_mask"].float()
            adv = adv * probability_scale(new_logp.detach(), m.prob_scale_low, m.prob_scale_high)
            old_logp = new_logp.detach() if own_old else tensors["old_logprobs"]
            loss, stats = policy_loss(new_logp, old_logp, ref_logp, adv, mask, m.clip_eps, self.kl.coef)
            share = float(mask.sum()) / total_tokens  # token-mean over all of this step's rows
            (loss * share).backward()
            sums["loss"] += float(loss.detach()) * share
            sums["kl"] += float(stats["kl"]) * share
            sums["clip_fraction"] += float(stats.get("clip_fraction", 0.0)) * share
            sums["entropy"] += float(entropy) * share
            if log.isEnabledFor(logging.DEBUG):
                log.debug("round %d update micro-batch %d/%d: %d sequences, %d tokens, %.1f s", t,
                          k + 1, len(batches), len(idx),
                          int(tensors["attention_mask"].sum()), time.perf_counter() - clock)
        self.policy.model.eval()
        # over several ranks: the gradient and sums of one process at the same global batch
        sums = self.ranks.all_reduce_step(self.optimizer.param_groups[0]["params"], sums)
        if not self.guard.check(sums["loss"], sums["kl"], step=t):
            self.optimizer.zero_grad(set_to_none=True)
            return {**sums, "skipped": 1}
        norm = torch.nn.utils.clip_grad_norm_(self.optimizer.param_groups[0]["params"], m.max_grad_norm)
        if not self.guard.check(float(norm), 0.0, step=t):  # a non-finite gradient is skipped the same way
            self.optimizer.zero_grad(set_to_none=True)
            return {**sums, "skipped": 1}
        self.optimizer.step()
        self.kl.update(sums["kl"], len(rows))
        return {**sums, "skipped": 0}
