"""Dr. Free's proposer rewards (seed 002), registered in the core's ``rewards.PROPOSER_REWARDS``:
``dr_free`` (Eq. 5's information gain over the full shortcut set B, :mod:`.info_gain`), Table 3's
leave-one-shortcut-type-out rows ``dr_free_wo_<type>``, and Table 2's "IG + Difficulty" row
``dr_free_plus_dr_zero``. They read no solver outcome (``rewards.rollout_free``) except the last.

Example:
    >>> from workbench.method.rewards import needs_outcome
    >>> needs_outcome("dr_free"), needs_outcome("dr_free_plus_dr_zero")
    (False, True)
"""

from __future__ import annotations

from typing import Sequence

from workbench.method.rewards import PROPOSER_REWARDS, ProposerInputs, dr_zero, rollout_free

DR_FREE_SHORTCUTS = ("closed_book", "source_only", "one_shot", "per_hop")  # the full set B (Eq. 5)


def _dr_free_many(xs: Sequence[ProposerInputs], shortcuts) -> list[float]:
    # imported here: info_gain needs torch and the policy protocol, which a reward's lookup does not
    from workbench.peers.drfree import info_gain

    for x in xs:
        if x.policy is None or x.chain is None or x.question is None or x.answer is None:
            raise ValueError("dr_free needs the chain, the candidate and the policy (ProposerInputs)")
    if not xs:
        return []
    o = xs[0].options
    form, margin = (o.drfree_reward_form, o.drfree_margin) if o is not None else ("positive_part", 0.0)
    micro = o.drfree_micro_batch if o is not None else info_gain.MICRO_BATCH
    infos = info_gain.batch_information_gain(xs[0].policy, [(x.chain, x.question, x.answer) for x in xs],
                                             xs[0].search, shortcuts, micro_batch=micro)
    return [info_gain.info_gain_reward(i["gain"], form, margin) for i in infos]


def _dr_free(x: ProposerInputs, shortcuts) -> float:
    return _dr_free_many([x], shortcuts)[0]


def _register_dr_free(name: str, kept: tuple, doc: str) -> None:
    def reward(x: ProposerInputs) -> float:
        return _dr_free(x, kept)

    reward.__doc__ = doc
    reward.batch = lambda xs: _dr_free_many(xs, kept)
    PROPOSER_REWARDS.register(name)(rollout_free(reward))


_register_dr_free("dr_free", DR_FREE_SHORTCUTS,
                  "Dr. Free (seed 002, Eq. 5): max(0, Delta_B) over the full shortcut set B (closed-book, "
                  "source-only, one-shot, per-hop); reads no solver outcome. See :mod:`workbench.peers.drfree.info_gain`.")
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
