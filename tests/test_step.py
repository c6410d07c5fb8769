"""``workbench.step``, the front door for stepping through the method (issue 43): each call is the
trainer's own step, on a real store (the default world, preset tiny, in the tests' data area)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from workbench import step, store
from workbench.config import preset
from workbench.kg.pool import sample_chains
from workbench.method.proposer import chain_view, proposer_prompts
from workbench.method.train import ensure_world


@pytest.fixture(scope="module")
def world():
    return step.world("tiny")


def test_proposer_prompts_read_a_chain_as_sample_chains_returns_it():
    """Issue 43: ``proposer_prompts(..., sample_chains(...))`` failed with "'Chain' object has no
    attribute 'passages'"; a pool chain is read through ``chain_view``."""
    con = store.connect(":memory:")
    ensure_world(con, preset("smoke"))
    drawn = sample_chains(con, 2, seed=0)
    assert proposer_prompts(lambda user: user, drawn, 2) == proposer_prompts(lambda user: user,
                                                                            [chain_view(c) for c in drawn], 2)


def test_propose_takes_a_sampled_pool_chain(world):
    with world.reading() as con:
        drawn = sample_chains(con, 1, seed=3)[0]
    assert [p.text for p in step.propose(drawn)] == [p.text for p in step.propose(chain_view(drawn))]


def _trainers_scores(world, slot):
    """What ``Trainer.reward`` computes for a slot's rollouts (it sets each rollout's score)."""
    with world.reading():
        world.trainer.reward(world.round, [], [slot], world.trainer.evidence_graph(world.round))
    return [r.score for r in slot.rollouts]


def test_score_equals_the_trainers_reward_for_the_same_trajectories(world):
    chain = step.chains(1)[0]
    gated = step.gate(step.propose(chain))
    posed = next(p for p in gated if p.admitted)
    row = step.questions(limit=2).iloc[3]  # a seed-style slot with a gold chain
    checked = []
    for attempts in (step.solve(posed), step.solve(row), step.solve(row, greedy=True)):
        ours = [step.score(a) for a in attempts]
        slot = attempts[0].slot  # the slot the round would score, holding these trajectories
        assert [r.trajectory for r in slot.rollouts] == [a.trajectory for a in attempts]
        theirs = _trainers_scores(world, slot)
        for o, t in zip(ours, theirs, strict=True):
            assert (o.em, o.path, o.s_path, o.passed, o.reward) == (t.r_ans, t.path, t.s_path, t.passed, t.reward)
            assert o.reward == pytest.approx(o.em * (1 + o.beta * o.s_path))  # Eq. 7 on the parts shown
        checked += ours
    # the path part is exercised: a correct answer with a supported path, and its reward above 1
    assert any(s.em == 1 and s.s_path > 0 and s.reward > 1 for s in checked)
    assert all(len(s.path_titles) == len(s.path) and len(s.steps) == max(0, len(s.path) - 1) for s in checked)


def test_a_score_prints_its_parts_with_their_equations(world):
    posed = next(p for p in step.gate(step.propose(step.chains(1)[0])) if p.admitted)
    s = next(s for s in map(step.score, step.solve(posed)) if s.s_path > 0)
    text = str(s)
    assert text.splitlines() == [
        f"R_ans = EM 1 (F1 {s.f1:.2f}, not in the reward)",
        f"searched path (Eq. 8): {' -> '.join(s.path_titles)}",
        f"S_path (Eq. 9) = {s.s_path:.3g}: per hop {', '.join(f'{m:.3g}' for m in s.steps)}; "
        f"{'passes' if s.passed else 'below'} tau_path",
        f"R_s (Eq. 7) = R_ans (1 + beta S_path) = 1 x (1 + 0.2 x {s.s_path:.3g}) = {s.reward:.4g}"]


def test_the_gate_judges_a_chains_candidates_together(world):
    gated = step.gate(step.propose(step.chains(2)[1]))
    assert sum(bool(p.admitted) for p in gated) <= world.cfg.method.admit_top_k
    assert [p.index for p in gated] == list(range(world.cfg.method.candidates_per_chain))
    one = step.gate(gated[0])
    assert one.verdict.q == gated[0].verdict.q and one.verdict.scores == gated[0].verdict.scores
    with pytest.raises(ValueError, match="different chains"):
        step.gate([gated[0], step.propose(step.chains(1)[0])[0]])


def test_stepping_leaves_the_store_free_for_another_writer(world):
    """Notebooks and ``workbench train`` share the store: between calls nothing holds it."""
    step.chains(1)
    step.score(step.solve(step.questions(limit=1).iloc[0], greedy=True)[0])
    writer = textwrap.dedent(f"""
        import duckdb
        con = duckdb.connect({world.db!r})
        con.execute("CREATE TABLE IF NOT EXISTS step_probe (x INTEGER)")
        con.close()
    """)
    done = subprocess.run([sys.executable, "-c", writer], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert len(step.chains(1)) == 1  # and it opens again after


def test_a_store_another_process_holds_is_one_line_naming_it(tmp_path):
    db = tmp_path / "held.duckdb"
    holder = subprocess.Popen([sys.executable, "-c", f"import duckdb, sys, time; c = duckdb.connect({str(db)!r}); "
                               "print('open', flush=True); time.sleep(60)"], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "open"
        with pytest.raises(ValueError, match=rf"^{db}: process {holder.pid} \(.*\) holds the store open: wait"):
            step.World("tiny", db=db)
    finally:
        holder.kill()
        holder.wait()


def test_bad_input_is_one_line_naming_what_was_expected(world):
    with pytest.raises(ValueError, match="propose: expected a chain"):
        step.propose("Ann -> Rome")
    with pytest.raises(ValueError, match=r"chains: n=0; expected 1 to method.chains_per_round = 32"):
        step.chains(0)
    with pytest.raises(ValueError, match="score: expected a step.Attempt"):
        step.score("Rome")
    with pytest.raises(ValueError, match="solve: expected a question's text"):
        step.solve(3)
    broken = step.Proposal(step.chains(1)[0], 2, "junk", None, None, sequence=None)
    with pytest.raises(ValueError, match="solve: candidate 2 has no question"):
        step.solve(broken)
