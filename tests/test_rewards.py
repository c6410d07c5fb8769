"""Eqs. 7, 9, 10 and p_s, each checked against arithmetic done by hand; the reward registries."""

import doctest
import math

import pytest

from workbench.method import registry, rewards
from workbench.method.rewards import (PROPOSER_REWARDS, SOLVER_REWARDS, GroupOutcome, ProposerInputs, Schedule,
                                      SolverInputs,
                                      difficulty_reward, path_score, reads_path, solver_reward, success_rate,
                                      target_success_rate)


def test_doctests():
    for module in (rewards, registry):
        assert doctest.testmod(module).failed == 0


def test_solver_reward_eq7():
    # R_s = R_ans (1 + beta S_path): 1 * (1 + 0.2 * 0.75) = 1.15
    assert solver_reward(1, 0.75, beta=0.2) == pytest.approx(1.15)
    # beta = 0.5, S_path = 0.4: 1 + 0.2 = 1.2
    assert solver_reward(True, 0.4, beta=0.5) == pytest.approx(1.2)
    # incorrect: no process credit whatever S_path is
    assert solver_reward(0, 1.0) == 0.0
    assert solver_reward(0, 0.0) == 0.0
    with pytest.raises(ValueError, match="r_ans"):
        solver_reward(0.5, 0.3)
    with pytest.raises(ValueError, match="s_path"):
        solver_reward(1, 1.5)


def test_path_score_eq9():
    # exp((log 0.5 + log 0.125) / 2) = sqrt(0.0625) = 0.25  (eps = 0)
    assert path_score([0.5, 0.125], eps=0.0) == pytest.approx(0.25)
    # with eps = 0.1: sqrt(0.6 * 0.225) = sqrt(0.135) = 0.367423
    assert path_score([0.5, 0.125], eps=0.1) == pytest.approx(math.sqrt(0.135))
    # three hops, eps = 0.01: cube root of (0.91 * 0.81 * 0.01) = cbrt(0.0073710) = 0.194656
    assert path_score([0.9, 0.8, 0.0], eps=0.01) == pytest.approx(0.0073710 ** (1 / 3), rel=1e-6)
    # an unsupported hop with eps = 0 makes the geometric mean exactly 0
    assert path_score([1.0, 0.0], eps=0.0) == 0.0
    # all hops fully supported: 1 + eps capped to 1 (S_path in [0, 1])
    assert path_score([1.0, 1.0], eps=0.01) == 1.0
    # no hop at all: 0 (ours)
    assert path_score([], eps=0.01) == 0.0
    with pytest.raises(ValueError):
        path_score([1.2], eps=0.01)
    with pytest.raises(ValueError):
        path_score([0.5], eps=-1)


def test_difficulty_reward_eq10():
    # p*(t) = 0.7 - (0.7 - 0.4) * 3/10 = 0.61
    assert target_success_rate(3, 10, 0.7, 0.4) == pytest.approx(0.61)
    assert target_success_rate(0, 10, 0.7, 0.4) == pytest.approx(0.7)
    assert target_success_rate(10, 10, 0.7, 0.4) == pytest.approx(0.4)
    assert target_success_rate(99, 10, 0.7, 0.4) == pytest.approx(0.4)  # t clipped to T
    # p_s = 0.25 at t = 3: (0.25 - 0.61)^2 = 0.1296; / (2 * 0.2^2 = 0.08) = 1.62; exp(-1.62) = 0.197899
    assert difficulty_reward(0.25, 3, 10, 0.7, 0.4, 0.2) == pytest.approx(math.exp(-1.62))
    # on target: 1
    assert difficulty_reward(0.61, 3, 10, 0.7, 0.4, 0.2) == pytest.approx(1.0)
    # trivially easy at the end (p_s = 1, p* = 0.4, sigma 0.2): exp(-0.36 / 0.08) = exp(-4.5)
    assert difficulty_reward(1.0, 10, 10, 0.7, 0.4, 0.2) == pytest.approx(math.exp(-4.5))
    with pytest.raises(ValueError):
        difficulty_reward(0.5, 1, 10, 0.7, 0.4, 0.0)
    with pytest.raises(ValueError):
        difficulty_reward(0.5, 1, 0, 0.7, 0.4, 0.2)


def test_success_rate():
    # 3 correct of G = 8
    assert success_rate([1, 0, 1, 0, 0, 1, 0, 0]) == pytest.approx(3 / 8)
    assert success_rate([False] * 4) == 0.0
    with pytest.raises(ValueError):
        success_rate([])


def test_proposer_registry_values():
    s = Schedule(step=3, total_steps=10, p_start=0.7, p_end=0.4, sigma=0.2)
    two_of_eight = GroupOutcome((True, True) + (False,) * 6)  # p_s = 0.25
    # Eq. 10 at p_s = 0.25, t = 3 (see above): exp(-1.62)
    assert PROPOSER_REWARDS["coevokg_difficulty"](ProposerInputs(s, two_of_eight)) == pytest.approx(math.exp(-1.62))
    # SSP: 1 - 0.25
    assert PROPOSER_REWARDS["ssp_adversarial"](ProposerInputs(s, two_of_eight)) == pytest.approx(0.75)
    # Dr. Zero: (n - k) / (n - 1) = (8 - 2) / 7
    assert PROPOSER_REWARDS["dr_zero"](ProposerInputs(s, two_of_eight)) == pytest.approx(6 / 7)
    assert PROPOSER_REWARDS["dr_zero"](ProposerInputs(s, GroupOutcome((False,) * 8))) == 0.0  # unsolved
    assert PROPOSER_REWARDS["dr_zero"](ProposerInputs(s, GroupOutcome((True,) * 8))) == 0.0  # trivial
    # EoG: population variance of binary scores = p (1 - p) = 0.25 * 0.75
    assert PROPOSER_REWARDS["eog_variance"](ProposerInputs(s, two_of_eight)) == pytest.approx(0.1875)
    # on real-valued scores [1.2, 0, 1.0, 0]: mean 0.55; squares .4225 .3025 .2025 .3025 -> 1.23 / 4
    assert PROPOSER_REWARDS["eog_variance"](ProposerInputs(s, GroupOutcome((True, False, True, False), (1.2, 0, 1.0, 0)))) \
        == pytest.approx(0.3075)


def test_dr_zeros_formula_is_marked_ours():
    """No seed (000-004) states (n - k)/(n - 1): seed 002 names Dr. Zero's pass-rate reward without
    a formula, so the docstring must call the formula ours, not a seed's (issue 40)."""
    doc = PROPOSER_REWARDS["dr_zero"].__doc__
    assert "is ours" in doc and "no seed (000-004) states it" in doc and "seed README" not in doc


def test_solver_registry_values():
    assert SOLVER_REWARDS["exact_match"](SolverInputs(1, 0.9, 0.2)) == 1.0
    assert SOLVER_REWARDS["coevokg"](SolverInputs(1, 0.5, 0.2)) == pytest.approx(1.1)
    assert SOLVER_REWARDS["coevokg"](SolverInputs(0, 1.0)) == 0.0
    assert set(SOLVER_REWARDS.names()) >= {"exact_match", "coevokg"}
    assert set(PROPOSER_REWARDS.names()) == {"coevokg_difficulty", "ssp_adversarial", "dr_zero", "eog_variance",
                                             "dr_free", "dr_free_wo_closed_book", "dr_free_wo_source_only",
                                             "dr_free_wo_one_shot", "dr_free_wo_per_hop",
                                             "dr_free_plus_dr_zero"}  # Dr. Free: test_drfree*.py


def test_reads_path_flags_exactly_the_solver_rewards_that_read_s_path():
    """The loop runs the LLM path extractor for a flagged reward only: a flag must be True iff
    S_path changes the reward (checked on a correct trajectory, S_path 0 vs 1)."""
    from types import SimpleNamespace as NS

    traj = NS(answer="Rome", finished_reason="answer", invalid_actions=0, queries=["Ann"], kg_queries=[],
              entity_ids=[1], kg_entity_ids=[])
    slot = NS(chain=None, gold_chain=[1, 2], answers=["Rome"], hops=2)
    flagged = set()
    for name in SOLVER_REWARDS.names():
        low, high = (SOLVER_REWARDS[name](SolverInputs(1, s, 0.2, traj, slot)) for s in (0.0, 1.0))
        assert (low != high) == reads_path(name), name
        flagged |= {name} if reads_path(name) else set()
    assert flagged == {"coevokg"}


def test_outcome_rewards_say_when_no_outcome_is_given():
    with pytest.raises(ValueError, match="outcomes"):
        PROPOSER_REWARDS["coevokg_difficulty"](ProposerInputs(Schedule(0, 10)))


def test_unknown_registry_name_lists_names():
    with pytest.raises(ValueError, match=r"unknown proposer reward 'nope'; expected one of \['coevokg_difficulty'"):
        PROPOSER_REWARDS["nope"]
    with pytest.raises(ValueError, match="exact_match"):
        SOLVER_REWARDS.get("f2")
    with pytest.raises(ValueError, match="already registered"):
        SOLVER_REWARDS.register("coevokg")(lambda *a: 0.0)
