"""The quickstart's CPU-sized runs (notebook 00, ``make quickstart [LONG=1]``): their settings, all
ours, and the one sentence that closes the notebook.

``SHORT`` is the 5-minute run; it shows the loop working, not a gain (over seven seeds +0.0 to +0.6 test
EM points, none significant; LOG.md, session 4). ``LONG`` is what issue 46's CPU probes found to show
learning: 30 rounds of twice the slots, two optimiser steps a round from round 0 at lr 5e-5, seed
questions from two-hop and three-hop (not comparison: there the tiny solver is near a coin flip and
small weight changes flipped its answers both ways), rollouts sampled at temperature 1.0 (at the paper's
0.6, 13 of 60 seed questions' groups had rewards that differ; at 1.0, 30), groups of equal rewards left
out of the update (they carry no policy gradient), and the mean of the last two thirds of the rounds'
weights tested (rounds 10-29, ``method.weight_average=2/3``), not the best-validation round; Eq. 10's
p*(t) anneals over the first 20 rounds (``method.anneal_steps=20``), then holds. Its results over
training seeds, with the commands, are in docs/start.md and LOG.md (issue 46). Both start from the
preset's warm start. ``SHORT`` validates on 8 questions a family every round; ``LONG`` on 20 a family
every other round, the policy and, once it exists, the mean it tests (one question is 1 point of
validation EM, not 2.5).

Example:
    >>> run = settings(long=True)
    >>> run.steps, run.slots, run.overrides["method.lr"]
    (30, 16, 5e-05)
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Quickstart:
    """One quickstart run: rounds, question slots a round, test questions a family for base vs
    trained, and the config overrides (``section.field``, as ``--set``) the rounds train under."""

    steps: int
    slots: int
    eval_limit: int
    overrides: dict = field(default_factory=dict)


# ours: one optimiser step a round after a 10-step warm-up (four small steps a round destabilised
# 8-slot runs on the CPU; LOG.md, session 3); lr stays the preset's 3e-5
SHORT = Quickstart(steps=6, slots=8, eval_limit=20, overrides={
    "method.minibatches": 1, "method.warmup_steps": 10, "method.val_questions": 8})

# ours, issue 46 (these settings' results are in LOG.md): on 14 rounds with seed questions of comparison,
# two-hop and three-hop and the best-validation round, 2 of 5 training seeds' test intervals were above 0;
# lr 1e-4 (-2.4 [-4.6, -0.4] at 8 slots and 4 steps a round), comparison seed questions alone (-0.4), the
# paper's temperature 0.6, four steps a round, 32 slots and validation on 100 questions did no better;
# two-hop and three-hop seed questions with the mean of the last half's weights gave 3 of 5 at 14 rounds,
# 5 of 5 at 20 on one CPU but 3 of 5 on a slower one, where the same runs continued to 30 rounds (a resume
# keeps the first run's mean and Eq. 10's horizon, hence the share 2/3 and anneal_steps 20) gave 4 of 5
LONG = Quickstart(steps=30, slots=16, eval_limit=200, overrides={
    "method.minibatches": 2, "method.warmup_steps": 0, "method.lr": 5e-5, "method.val_questions": 20,
    "method.val_every": 2, "method.seed_families": "two_hop,three_hop", "rollout.temperature": 1.0,
    "method.skip_zero_advantage": True, "method.weight_average": 2 / 3, "method.anneal_steps": 20})


def settings(long: bool = False) -> Quickstart:
    """``LONG`` (``make quickstart LONG=1``, about 25-95 minutes on a 2-core machine) or ``SHORT`` (about 3 minutes)."""
    return LONG if long else SHORT


def verdict(base, trained, metrics, val_base) -> str:
    """The quickstart's closing sentence: what moved, by how much, with the 95% paired interval of
    :func:`workbench.evaluate.compare_outcomes`, whether that interval excludes 0, and the
    validation curve (:func:`validation`). ``base`` and ``trained`` are the test's
    :func:`workbench.evaluate.outcomes` frames, ``metrics`` the rounds' metrics and ``val_base`` the
    base's outcomes on the validation questions.

    Example:
        >>> import pandas as pd
        >>> base = pd.DataFrame({"question_id": range(6), "family": ["a"] * 3 + ["b"] * 3, "em": [0.0] * 6})
        >>> rounds = pd.DataFrame({"round": [0, 1, 2], "val_em": [0.5, 0.525, 0.55]})
        >>> print(verdict(base, base.assign(em=[1.0, 1.0, 0, 0, 0, 0]), rounds, base.assign(em=[1.0, 1, 1, 0, 0, 0])))
        ... # doctest: +NORMALIZE_WHITESPACE
        After 3 rounds the trained solver's macro test EM is +33.3 points over the base on 6 held-out
        questions (95% paired bootstrap interval [+0.0, +50.0]; 2 questions gained, 0 lost; most on a,
        +66.7): an interval that includes 0, so this run does not show learning; validation EM on 6
        questions rose from the base's 50.0 to 55.0 for the tested best-validation round, 2, chosen on
        these questions (each round's policy 50.0 at round 0 -> 55.0 at round 2); the comparison of
        methods over seeds is notebook 06 and the reference runs (data/reference/).
    """
    from workbench.evaluate import compare_outcomes

    c = compare_outcomes(base, trained)
    both = base.merge(trained, on=["question_id", "family"], suffixes=("_a", "_b"))
    moved = (both.em_b - both.em_a).groupby(both.family).mean()
    family = moved.abs().idxmax()
    where = f"most on {family}, {100 * moved[family]:+.1f}" if moved[family] else "no family moved"
    g, lo, hi = (100 * x for x in (c.gain, c.low, c.high))
    if lo > 0:
        reading = "an interval above 0, so the solver measurably improved"
    elif hi < 0:
        reading = "an interval below 0, so the solver got worse"
    else:
        reading = "an interval that includes 0, so this run does not show learning"
    return (f"After {len(metrics)} rounds the trained solver's macro test EM is {g:+.1f} points over the base on "
            f"{c.shared} held-out questions (95% paired bootstrap interval [{lo:+.1f}, {hi:+.1f}]; "
            f"{c.test.b_only} questions gained, {c.test.a_only} lost; {where}): {reading}; "
            f"{validation(metrics, val_base)}; the comparison of methods over seeds "
            "is notebook 06 and the reference runs (data/reference/).")


def machine() -> str:
    """The arithmetic the closing sentence's numbers hold for: the GPU, else torch's CPU kernel level
    and thread count. The same seed can train to other numbers where either differs: rounding differs,
    and so do the rollouts sampled from then on (docs/start.md, "The same seed on another CPU").

    Example:
        >>> import torch
        >>> f"{torch.get_num_threads()} threads" in machine() or torch.cuda.is_available()
        True
    """
    import torch

    from workbench.limits import default_device

    if default_device() == "cuda":  # where the rounds' policy went
        where = f"the GPU {torch.cuda.get_device_name(0)}"
    else:
        where = f"torch's {torch.backends.cpu.get_cpu_capability()} CPU kernels on {torch.get_num_threads()} threads"
    return (f"These numbers were computed with {where} (torch {torch.__version__}); the same seed can give other "
            "numbers on another CPU kind or thread count (docs/start.md, \"The same seed on another CPU\").")


def validation(metrics, val_base) -> str:
    """The validation curve in words: from the base's validation EM (``val_base``, its outcomes) to the
    tested model's, which is the mean of the last rounds' weights where the run kept one
    (``val_em_average``, ``method.weight_average``), else the best-validation round; then each
    validated round's policy, first to last. Rounds are numbered as in the metrics (from 0).

    Example:
        >>> import pandas as pd
        >>> rounds = pd.DataFrame({"round": [0, 1, 2, 3], "val_em": [0.55, None, 0.5, 0.52],
        ...                        "val_em_average": [None, None, 0.56, 0.57]})
        >>> validation(rounds, pd.DataFrame({"em": [1.0, 0.0]}))  # doctest: +NORMALIZE_WHITESPACE
        "validation EM on 2 questions rose from the base's 50.0 to 57.0 for the tested mean of the last
        rounds' weights (56.0 at round 2 -> 57.0 at round 3; each round's policy 55.0 at round 0 ->
        52.0 at round 3)"
    """
    def curve(values):
        values = values.dropna()
        first, last = values.index[0], values.index[-1]
        return (f"{100 * values[first]:.1f} at round {metrics['round'][first]} -> "
                f"{100 * values[last]:.1f} at round {metrics['round'][last]}")

    base = 100 * val_base.em.mean()
    policy = metrics.val_em.astype(float)
    if "val_em_average" in metrics and metrics.val_em_average.notna().any():
        mean = metrics.val_em_average.astype(float)
        tested = 100 * mean.dropna().iloc[-1]
        what = f"the tested mean of the last rounds' weights ({curve(mean)}; each round's policy {curve(policy)})"
    else:
        best = policy.idxmax()
        tested = 100 * policy[best]
        what = (f"the tested best-validation round, {metrics['round'][best]}, chosen on these questions "
                f"(each round's policy {curve(policy)})")
    if abs(tested - base) < 1e-9:
        return f"validation EM on {len(val_base)} questions stayed at the base's {base:.1f} for {what}"
    went = "rose" if tested > base else "fell"
    return f"validation EM on {len(val_base)} questions {went} from the base's {base:.1f} to {tested:.1f} for {what}"
