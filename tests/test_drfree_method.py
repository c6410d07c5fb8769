"""Dr. Free as a method of the loop (seed 002; issue 17): ``--method drfree`` scores its proposer
without the solver's rollouts (before them, every candidate that passed the gate), the round's
candidates are scored in few padded forwards and one retrieval batch, and Table 2's rows run."""

import dataclasses
import math

import pytest

from workbench import store
from workbench.config import preset
from workbench.method import drfree, loop, methods
from workbench.method import rewards as R
from workbench.method.memory import ChainView
from workbench.policy.model import Policy, tiny_model
from workbench.policy.tokenizer import train_tokenizer
from workbench.search.tool import Hit

CHAINS = [ChainView(0, "h", [1, 2, 3], ["Tesamu", "Kavimo Rutel", "Dagiju"], ["directed by", "born in"],
                    ["The film Tesamu was directed by Kavimo Rutel.", "Kavimo Rutel was born in Dagiju.",
                     "Dagiju is the capital of Lorentia."]),
          ChainView(1, "g", [4, 5], ["Lorentia", "Oslu"], ["capital"], ["Lorentia is a land.", "Oslu is its capital."])]
ITEMS = [(CHAINS[0], "Where was the director of Tesamu born?", "Dagiju"),
         (CHAINS[0], "Who directed Tesamu?", "Kavimo Rutel"),
         (CHAINS[1], "What is the capital of Lorentia?", "Oslu")]


class CountingSearch:
    def __init__(self):
        self.calls = []

    def search(self, queries, k=None):
        self.calls.append(list(queries))
        return [[Hit(i, i, f"T{i}", f"{q} passage {i}", 1.0) for i in range(5)] for q in queries]


@pytest.fixture(scope="module")
def policy():
    corpus = [p for c in CHAINS for p in c.passages] + [q for _, q, _ in ITEMS]
    tok = train_tokenizer(corpus * 20, vocab_size=400)
    backbone = dataclasses.replace(preset("smoke").backbone, hidden_size=32, layers=2, heads=2, kv_heads=1)
    return Policy(tiny_model(backbone, tok, seed=0), tok, device="cpu")


def test_batched_gain_equals_one_candidate_at_a_time_in_few_forwards(policy):
    single = [drfree.information_gain(policy, c, q, a, CountingSearch()) for c, q, a in ITEMS]
    search, shapes = CountingSearch(), []
    real = policy.token_logprobs
    policy.token_logprobs = lambda *a, **k: shapes.append(tuple(a[0].shape)) or real(*a, **k)
    try:
        batched = drfree.batch_information_gain(policy, ITEMS, search, micro_batch=8)
    finally:
        del policy.token_logprobs
    for one, many in zip(single, batched):
        assert many["strongest"] == one["strongest"]
        assert many["gain"] == pytest.approx(one["gain"], abs=1e-4)
        assert many["shortcuts"] == pytest.approx(one["shortcuts"], abs=1e-4)
    # rows: per candidate the full context + closed-book, source-only, one-shot and one per hop
    rows = sum(1 + 3 + len(c.passages) - 1 for c, _, _ in ITEMS)
    assert [s[0] for s in shapes] == [8] * (rows // 8) + ([rows % 8] if rows % 8 else [])
    assert search.calls == [[q for _, q, _ in ITEMS]]  # every one-shot retrieval in one batch


def test_registry_batch_form_and_rollout_free_flag(policy):
    xs = [R.ProposerInputs(R.Schedule(0, 10), None, c, q, a, policy, CountingSearch()) for c, q, a in ITEMS]
    one_by_one = [R.PROPOSER_REWARDS["dr_free"](x) for x in xs]
    assert R.score_many("dr_free", xs) == pytest.approx(one_by_one, abs=1e-4)
    assert not R.needs_outcome("dr_free") and not R.needs_outcome("dr_free_wo_per_hop")
    assert R.needs_outcome("dr_free_plus_dr_zero") and R.needs_outcome("coevokg_difficulty")
    options = dataclasses.replace(preset("smoke").method, drfree_reward_form="indicator", drfree_margin=0.0)
    ind = R.score_many("dr_free", [dataclasses.replace(x, options=options) for x in xs])
    assert ind == [1.0 if r > 0 else 0.0 for r in one_by_one]
    # IG + difficulty: the sum of the two rewards (needs the outcome)
    x = dataclasses.replace(xs[0], outcome=R.GroupOutcome((True, False, False, False)))
    # dr_zero of k=1 correct of n=4: (4-1)/3 = 1
    assert R.PROPOSER_REWARDS["dr_free_plus_dr_zero"](x) == pytest.approx(one_by_one[0] + 1.0, abs=1e-4)


def test_method_rows():
    spec = methods.method_spec("drfree")
    assert (spec.task_source, spec.solver_reward, spec.proposer_reward, spec.write_back) == \
        ("kg_chains", "exact_match", "dr_free", False)
    assert methods.method_spec("Dr. Free") == spec
    assert methods.method_spec("drfree_no_proposer_training").proposer_reward is None
    for name in ("drfree_difficulty", "drfree_ig_difficulty"):
        assert methods.method_spec(name).proposer_reward in R.PROPOSER_REWARDS


@pytest.fixture
def forced_gate(monkeypatch):
    """The gate sees a constructed two-hop question per candidate (as test_loop's admitted round)."""
    real_gate = loop.gate

    def gate(chain, candidates, *args, **kwargs):
        q = f"What is the {chain.relations[-1]} of the {chain.relations[0]} of {chain.titles[0]}?"
        return real_gate(chain, [(q, chain.titles[-1])] * len(candidates), *args, **kwargs)

    monkeypatch.setattr(loop, "gate", gate)


def test_drfree_round_scores_before_the_rollouts_and_beyond_the_top_k(tmp_path, monkeypatch, forced_gate):
    from workbench.method.train import ensure_world, train

    db = str(tmp_path / "smoke.duckdb")
    con = store.connect(db)
    ensure_world(con, preset("smoke"))
    con.close()
    events = []
    from workbench.method import proposer

    real_rollout, real_score = loop.rollout, proposer.score_many
    monkeypatch.setattr(loop, "rollout", lambda *a, **k: events.append("rollout") or real_rollout(*a, **k))
    monkeypatch.setattr(proposer, "score_many", lambda *a, **k: events.append("score") or real_score(*a, **k))
    seen = []
    real_reward_proposer = loop.Trainer.reward_proposer

    def reward_proposer(self, t, tasks):
        real_reward_proposer(self, t, tasks)
        seen.extend((c.verdict.passed, c.verdict.admitted, c.reward) for task in tasks for c in task.candidates)

    monkeypatch.setattr(loop.Trainer, "reward_proposer", reward_proposer)
    outcome_reads = []
    real_outcome = R._outcome
    monkeypatch.setattr(R, "_outcome", lambda x: outcome_reads.append(1) or real_outcome(x))
    rows = train(db, run="drfree-before-rollouts", method="drfree", preset="smoke", steps=1, progress=False,
                 log=None, overrides={"method.candidates_per_chain": 3})
    assert events[:2] == ["score", "rollout"]  # the proposer's reward came first
    assert not outcome_reads  # and read no solver outcome
    assert rows[0]["admitted_rate"] > 0 and rows[0]["time_proposer_reward"] >= 0
    con = store.connect(db, read_only=True)
    stored = [r for (r,) in con.execute("SELECT reward FROM candidates WHERE run = 'drfree-before-rollouts' "
                                        "ORDER BY candidate_id").fetchall()]
    method = con.execute("SELECT method FROM runs WHERE run = 'drfree-before-rollouts'").fetchone()[0]
    con.close()
    assert method == "drfree"
    assert stored == [r for _, _, r in seen]
    admitted = [r for _, a, r in seen if a]
    beyond_top_k = [r for p, a, r in seen if p and not a]
    assert admitted and all(r is not None and r >= 0 for r in admitted)
    assert beyond_top_k and all(r is not None and r >= 0 for r in beyond_top_k)  # scored, never posed
    assert math.isfinite(rows[0]["proposer_reward"])


def test_without_proposer_training_no_candidate_is_rewarded(tmp_path, forced_gate):
    from workbench.method.train import train

    rows = train(str(tmp_path / "s.duckdb"), run="nopt", method="drfree_no_proposer_training", preset="smoke",
                 steps=1, progress=False, log=None)
    con = store.connect(str(tmp_path / "s.duckdb"), read_only=True)
    rewards = [r for (r,) in con.execute("SELECT reward FROM candidates WHERE run = 'nopt'").fetchall()]
    con.close()
    assert rows[0]["admitted_rate"] > 0 and rows[0]["proposer_reward"] == 0.0
    assert all(r is None for r in rewards)


def test_bench_drfree_times_both_in_one_run(tmp_path):
    from workbench.method.bench_drfree import bench_drfree

    r = bench_drfree(preset="smoke", candidates=2)  # the preset's world and G_0, built in memory
    assert r["candidates"] == 2 and r["group_size"] == preset("smoke").method.group_size
    assert r["speedup_batched_vs_difficulty"] == pytest.approx(r["difficulty_rollouts_s"] / r["info_gain_batched_s"],
                                                               rel=0.02)
    assert r["max_gain_difference_batched_vs_single"] < 1e-3 and r["rollout_tokens"] > 0
    with pytest.raises(ValueError, match="--candidates"):
        bench_drfree(preset="smoke", candidates=0)
