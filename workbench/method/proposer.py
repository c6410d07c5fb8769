"""The chain-based proposer (seed 000, section 3.2, Eq. 2): (q, a) ~ pi_p(. | c), a in {e_1..e_L}.

What it reads of a pool chain (:func:`chain_view`); prompts and parsing are the shared protocol's
(:mod:`workbench.policy.protocol`); the answer-in-chain requirement of Eq. 2 is enforced by the gate
(reason 'answer not in chain'), and optionally by decoding (:func:`answer_choices`).

Proposer rewards (section 3.3, "R_p = R_diff, while a candidate with failed extraction receives a
small fixed penalty instead"), per candidate, in :func:`proposer_rewards`:

* extraction failed (no ``<question>``/``<answer>``, or an empty one): ``extraction_penalty``
  (MethodConfig.extraction_penalty, ours);
* admitted by the gate and posed to the solver: the registry's reward of its G rollouts
  (``coevokg_difficulty`` = Eq. 10 by default);
* extracted but not admitted (leak, answer not in chain, below threshold, beyond top k), or admitted
  but not posed: None -- excluded from the proposer update. Our reading of the paper: quality acts as
  a hard gate, not a reward term, "so the proposer is optimized only over questions that already
  passed the quality bar", and only failed extraction is penalised.
* ``penalize_rejected`` (MethodConfig.penalize_rejected, ours, off by default): a candidate that
  failed the quality bar (not ``passed``; beyond-top-k ones passed) gets ``extraction_penalty`` as
  well, so a proposer whose candidates the gate mostly rejects still learns from them.

Example:
    >>> from workbench.method.memory import ChainView
    >>> c = ChainView(0, "h", [1, 2], ["Ann", "Rome"], ["born in"], ["Ann ...", "Rome ..."])
    >>> proposer_prompts(lambda user: "<user>" + user, [c])[0].startswith("<user>Write one question")
    True
    >>> parse_candidates(["<question>Where?</question><answer>Rome</answer>", "junk"])
    [('Where?', 'Rome'), None]
"""

from __future__ import annotations

from typing import Callable, Mapping, Sequence

from workbench.kg.pool import Chain
from workbench.method.gate import Verdict
from workbench.method.memory import ChainView
from workbench.method.rewards import PROPOSER_REWARDS, GroupOutcome, ProposerInputs, Schedule, score_many
from workbench.policy import protocol
from workbench.policy.generation import Choices


def chain_view(chain: Chain) -> ChainView:
    """The fields the method reads from a pool chain: titles, relations and node passages.

    A node shows its newest evidence, so passages that write-back attached in earlier rounds reach
    the proposer (section 3.4: later rounds condition on richer contexts).
    """
    passages, newest = [""] * len(chain.entity_ids), [-1] * len(chain.entity_ids)
    for ev in chain.evidence:
        if ev.target == "node" and ev.text and ev.round > newest[ev.position]:
            passages[ev.position], newest[ev.position] = ev.text, ev.round
    return ChainView(chain.chain_id, chain.hash, list(chain.entity_ids), list(chain.titles),
                     list(chain.relations), passages)


def proposer_prompts(policy_chat_prompt: Callable[[str], str], chains: Sequence, m: int = 1) -> list[str]:
    """One prompt per chain (each repeated ``m`` times, chain-major), through the policy's chat format.
    A chain is a ``ChainView`` or a pool ``Chain`` as ``kg.pool.sample_chains`` returns it (read
    through :func:`chain_view`).

    ``policy_chat_prompt(user_message) -> prompt text`` applies the backbone's chat template.
    """
    if m < 1:
        raise ValueError(f"m (candidates per chain) must be >= 1, got {m!r}")
    prompts = []
    for chain in chains:
        chain = chain_view(chain) if isinstance(chain, Chain) else chain
        text = policy_chat_prompt(protocol.proposer_user_message(chain.titles, chain.relations, chain.passages))
        prompts.extend([text] * m)
    return prompts


def answer_choices(chains: list[ChainView], m: int) -> Choices:
    """Eq. 2's a in {e_1..e_L} as a decoding constraint (``method.proposer_answer_choices``, ours):
    after ``<answer>`` each of a chain's M prompts may only spell one of its entity titles, then
    ``</answer>``. The question stays free text; the gate's other rules are unchanged.

    Example:
        >>> c = ChainView(0, "h", [1, 2], ["Ann", "Rome"], ["born in"], ["", ""])
        >>> answer_choices([c], 2).per_row
        [['Ann</answer>', 'Rome</answer>'], ['Ann</answer>', 'Rome</answer>']]
    """
    return Choices(protocol.ANSWER_OPEN, [[t + protocol.ANSWER_CLOSE for t in c.titles] for c in chains for _ in range(m)])


def parse_candidates(texts: Sequence[str]) -> list[tuple[str, str] | None]:
    """(question, answer) per generation, or None where extraction failed (protocol.parse_candidate)."""
    return [protocol.parse_candidate(t) for t in texts]


def proposer_rewards(verdicts: Sequence[Verdict], outcomes: Mapping[int, GroupOutcome], schedule: Schedule,
                     extraction_penalty: float, reward: str = "coevokg_difficulty",
                     penalize_rejected: bool = False, chain=None, policy=None, search=None, options=None
                     ) -> list[float | None]:
    """R_p per candidate of one chain (see the module docstring); None = not in the update.

    ``outcomes`` maps a verdict's ``index`` to the G rollouts of that admitted candidate. The
    registry's reward gets a ``rewards.ProposerInputs`` with ``chain``, ``policy``, ``search`` and
    ``options`` (the run's MethodConfig) too.

    Example:
        >>> vs = [Verdict(0, None, None, False), Verdict(1, "q?", "a", True, admitted=True),
        ...       Verdict(2, "q?", "a", True)]
        >>> proposer_rewards(vs, {1: GroupOutcome((True, False))}, Schedule(0, 10, 0.5, 0.5, 0.2), -0.1)
        [-0.1, 1.0, None]
    """
    fn = PROPOSER_REWARDS[reward]
    known = {v.index for v in verdicts}
    for index in outcomes:
        if index not in known or not next(v for v in verdicts if v.index == index).admitted:
            raise ValueError(f"proposer_rewards: outcome for candidate {index}, which the gate did not admit")
    rewards: list[float | None] = []
    for v in verdicts:
        if not v.extracted or (penalize_rejected and not (v.passed or v.admitted)):
            rewards.append(float(extraction_penalty))
        elif v.admitted and v.index in outcomes:
            rewards.append(float(fn(ProposerInputs(schedule, outcomes[v.index], chain, v.question, v.answer,
                                                   policy, search, options))))
        else:
            rewards.append(None)
    return rewards


def rollout_free_rewards(chains_verdicts: Sequence[tuple], schedule: Schedule, extraction_penalty: float,
                         reward: str, penalize_rejected: bool = False, policy=None, search=None, options=None
                         ) -> list[list[float | None]]:
    """R_p per candidate of each (chain, verdicts) of a round, for a reward that reads no solver
    outcome (Dr. Free, seed 002): failed extraction gets ``extraction_penalty`` as in
    :func:`proposer_rewards`; every candidate that passed the gate (admitted or beyond the top k) is
    scored, all of the round's in one ``rewards.score_many`` batch; the rest get None (or the
    penalty with ``penalize_rejected``).

    Example:
        >>> vs = [Verdict(0, None, None, False), Verdict(1, "q?", "a", True)]  # extracted, failed the bar
        >>> rollout_free_rewards([(None, vs)], Schedule(0, 10), -0.1, "dr_free")
        [[-0.1, None]]
    """
    out: list[list[float | None]] = []
    inputs, where = [], []
    for i, (chain, verdicts) in enumerate(chains_verdicts):
        out.append([])
        for j, v in enumerate(verdicts):
            if not v.extracted or (penalize_rejected and not (v.passed or v.admitted)):
                out[i].append(float(extraction_penalty))
                continue
            out[i].append(None)
            if v.passed or v.admitted:
                inputs.append(ProposerInputs(schedule, None, chain, v.question, v.answer, policy, search, options))
                where.append((i, j))
    for (i, j), r in zip(where, score_many(reward, inputs)):
        out[i][j] = r
    return out
