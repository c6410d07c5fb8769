"""DynaSearcher's multi-reward (seed 003, "Objective Functions"): one function per term.

* :func:`format_reward` -- r_format;
* :func:`answer_reward` -- r_ans from F1 and cover exact match (CEM);
* :func:`recall_reward` -- r_recall = TP / (TP + FN): retrieved gold evidence / all gold evidence;
* :func:`step_penalty` -- r_penalty, applied when the search steps t exceed the gold hops i: by
  default beta (1 - gamma^(t-i)), our reading of the seed's gamma^(t-i) beta (see below);
* :func:`total_reward` -- r_total = r_acc + alpha (r_recall + r_penalty), r_acc = r_format + r_ans;
* :func:`terms` -- every term of one trajectory, as the loop logs them per round.

The paper's values: alpha 0.5, gamma 0.9, beta -0.2 (``MethodConfig.mr_alpha``, ``mr_gamma``,
``mr_beta``). What the seed leaves open is ours, each a config field:

* r_format is 0 for a well-formed trajectory (it ends in ``<answer>`` and wrote no invalid action)
  and ``method.mr_format_penalty`` (-1) otherwise;
* r_ans = (1 - w) F1 + w CEM with w = ``method.mr_cover_em_weight`` (0.5): the paper "combines"
  the two without saying how;
* gold evidence is the question's gold entity chain (a seed question's ``chain``, a generated
  question's originating chain); for imported HotpotQA and 2WikiMultihopQA questions that chain
  is the record's gold supporting documents (the titles of its ``supporting_facts`` resolved to the
  store's entities at import, ``qa_import``). An entity is retrieved when document search returned
  one of its passages or the KG search matched it (its triples came back). A question with no gold
  evidence (NQ, TriviaQA, PopQA, Bamboogle, a combined Search-R1 file, a title the store lacks) has
  recall 0 in every one of its G rollouts, so the term adds the same to each and drops out of their
  GRPO advantages (Eq. 11 subtracts the group mean): there the reward is r_acc + alpha r_penalty;
* t counts the searches executed, both tools together; i is the question's hop count.

The penalty: seed 003 writes r_penalty = gamma^(t-i) beta "if t > i", with beta (-0.2) "the
penalty lower bound" and gamma (0.9) "penalty decay". Taken literally (``penalty_form="literal"``)
the first step over the gold hops costs most (-0.18) and each further one less (-0.162, -0.146,
... -> 0), so an agent loses less the more it over-searches, against the term's stated purpose
("penalize excessive search steps"). The default (``"saturating"``, ours) reads gamma^(t-i) as the
share of the bound not yet charged: r_penalty = beta (1 - gamma^(t-i)), which grows with every
excess step (-0.02, -0.038, -0.054, ...) and stays above its lower bound beta, as the text says.
``method.mr_penalty_form`` selects.

Example:
    >>> p = MultiRewardParams()
    >>> step_penalty(4, 2, p.gamma, p.beta)   # -0.2 (1 - 0.9^2)
    -0.038
    >>> step_penalty(4, 2, p.gamma, p.beta, "literal")   # 0.9^2 * -0.2
    -0.162
    >>> total_reward(1.0, 0.5, -0.18, p.alpha)  # 1 + 0.5 (0.5 - 0.18)
    1.16
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from workbench.scoring import cover_exact_match, f1_score

PENALTY_FORMS = ("saturating", "literal")  # config.MR_PENALTY_FORMS (tested equal)


@dataclass(frozen=True)
class MultiRewardParams:
    """alpha, gamma, beta (paper) and our three open values; :meth:`of` reads them from a MethodConfig."""

    alpha: float = 0.5
    gamma: float = 0.9
    beta: float = -0.2
    cover_em_weight: float = 0.5  # ours
    format_penalty: float = -1.0  # ours
    penalty_form: str = "saturating"  # ours: how gamma^(t-i) beta is read (module docstring)

    @classmethod
    def of(cls, method_cfg) -> "MultiRewardParams":
        """The parameters of ``method_cfg`` (a ``MethodConfig``); None gives the defaults.

        Example:
            >>> from workbench.config import MethodConfig
            >>> MultiRewardParams.of(MethodConfig(mr_alpha=0.25)).alpha
            0.25
        """
        if method_cfg is None:
            return cls()
        m = method_cfg
        return cls(m.mr_alpha, m.mr_gamma, m.mr_beta, m.mr_cover_em_weight, m.mr_format_penalty, m.mr_penalty_form)


def format_reward(finished_reason: str | None, invalid_actions: int, penalty: float = -1.0) -> float:
    """r_format: 0 for a trajectory that ends in an answer with no invalid action, else ``penalty`` (ours).

    Example:
        >>> format_reward("answer", 0), format_reward("max_turns", 0), format_reward("answer", 1)
        (0.0, -1.0, -1.0)
    """
    if penalty > 0:
        raise ValueError(f"format penalty must be <= 0, got {penalty!r}")
    return 0.0 if finished_reason == "answer" and invalid_actions == 0 else float(penalty)


def answer_reward(prediction: str | None, golds: list[str], cover_em_weight: float = 0.5) -> tuple[float, float, float]:
    """r_ans and its parts: (F1, CEM, (1 - w) F1 + w CEM), w = ``cover_em_weight`` (ours).

    Example:
        >>> answer_reward("the city of Rome", ["Rome"])   # F1 = 2 * (1/3 * 1) / (1/3 + 1) = 0.5, CEM = 1
        (0.5, 1.0, 0.75)
    """
    if not 0.0 <= cover_em_weight <= 1.0:
        raise ValueError(f"cover_em_weight must lie in [0, 1], got {cover_em_weight!r}")
    f1, cem = f1_score(prediction, golds), cover_exact_match(prediction, golds)
    return f1, cem, (1.0 - cover_em_weight) * f1 + cover_em_weight * cem


def recall_reward(retrieved: Iterable, gold: Iterable) -> float:
    """r_recall = TP / (TP + FN): the share of the gold evidence that was retrieved (0 without gold).

    Example:
        >>> recall_reward([5, 7, 7, 9], [7, 8])
        0.5
        >>> recall_reward([1], [])
        0.0
    """
    gold = {g for g in gold if g is not None}
    if not gold:
        return 0.0
    return len(gold & {r for r in retrieved if r is not None}) / len(gold)


def step_penalty(steps: int, hops: int, gamma: float = 0.9, beta: float = -0.2, form: str = "saturating") -> float:
    """r_penalty when the search steps t exceed the gold hops i, else 0 (seed 003): ``saturating``
    (default, ours) beta (1 - gamma^(t-i)), more excess steps costing more, never below beta;
    ``literal`` gamma^(t-i) beta as written, more excess steps costing less (module docstring).

    Example:
        >>> step_penalty(2, 2), step_penalty(3, 2), round(step_penalty(5, 2), 4)
        (0.0, -0.02, -0.0542)
        >>> step_penalty(3, 2, form="literal"), round(step_penalty(5, 2, form="literal"), 4)
        (-0.18, -0.1458)
    """
    if steps < 0 or hops < 0:
        raise ValueError(f"steps and hops must be >= 0, got {steps!r} and {hops!r}")
    if not 0.0 <= gamma <= 1.0 or beta > 0:
        raise ValueError(f"expected gamma in [0, 1] and beta <= 0, got {gamma!r} and {beta!r}")
    if form not in PENALTY_FORMS:
        raise ValueError(f"method.mr_penalty_form: {form!r}; expected one of {list(PENALTY_FORMS)}")
    if steps <= hops:
        return 0.0
    decay = gamma ** (steps - hops)
    return round(beta * (decay if form == "literal" else 1.0 - decay), 12)


def total_reward(r_acc: float, r_recall: float, r_penalty: float, alpha: float = 0.5) -> float:
    """r_total = r_acc + alpha (r_recall + r_penalty), rounded to 12 digits (sums of floats stay exact
    enough to compare by hand).

    Example:
        >>> total_reward(0.75, 1.0, 0.0, 0.5)
        1.25
    """
    return round(r_acc + alpha * (r_recall + r_penalty), 12)


def gold_entities(slot) -> list:
    """A slot's gold evidence: its originating chain's entities, or a seed question's gold chain."""
    if slot is None:
        return []
    chain = getattr(slot, "chain", None)
    return list(chain.entity_ids) if chain is not None else list(getattr(slot, "gold_chain", []) or [])


def search_steps(trajectory) -> int:
    """t: the searches a trajectory executed, document and KG together."""
    return len(trajectory.queries) + len(getattr(trajectory, "kg_queries", []))


def terms(trajectory, slot, params: MultiRewardParams = MultiRewardParams(), accuracy_only: bool = False) -> dict:
    """Every term of one trajectory: format, f1, cover_em, ans, recall, penalty, steps, over_hops,
    total. ``accuracy_only`` (the ablation without the multi-reward): total = r_acc, the other terms
    still computed, so the round logs what the dropped terms would have said.

    Example:
        >>> from types import SimpleNamespace as NS
        >>> traj = NS(answer="Rome", finished_reason="answer", invalid_actions=0, queries=["Ann", "x", "y"],
        ...           kg_queries=[], entity_ids=[1, 4], kg_entity_ids=[])
        >>> slot = NS(chain=None, gold_chain=[1, 2], answers=["Rome"], hops=2)
        >>> t = terms(traj, slot)
        >>> t["recall"], t["penalty"], t["total"]   # 3 searches, 2 hops: -0.2 (1 - 0.9); 1 + 0.5 (0.5 - 0.02)
        (0.5, -0.02, 1.24)
    """
    if trajectory is None or slot is None:
        raise ValueError("the multi-reward needs the trajectory and its slot (SolverInputs.trajectory, .slot)")
    r_format = format_reward(trajectory.finished_reason, getattr(trajectory, "invalid_actions", 0),
                             params.format_penalty)
    f1, cem, r_ans = answer_reward(trajectory.answer, list(slot.answers), params.cover_em_weight)
    retrieved = list(trajectory.entity_ids) + list(getattr(trajectory, "kg_entity_ids", []))
    recall = recall_reward(retrieved, gold_entities(slot))
    steps = search_steps(trajectory)
    penalty = step_penalty(steps, int(slot.hops), params.gamma, params.beta, params.penalty_form)
    r_acc = r_format + r_ans
    total = r_acc if accuracy_only else total_reward(r_acc, recall, penalty, params.alpha)
    return {"format": r_format, "f1": f1, "cover_em": cem, "ans": r_ans, "acc": r_acc, "recall": recall,
            "penalty": penalty, "steps": steps, "over_hops": float(steps > int(slot.hops)), "total": total}
