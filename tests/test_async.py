"""method.async_staleness (issue 44): the synchronous round unchanged at 0; at 1 round t+1's rollouts
are sampled by a frozen copy of the policy while round t updates, deterministic by seed, its ratios
against the behaviour log-probs, and resumable from the pending rollouts a checkpoint holds."""

import pytest
import torch

from workbench import store
from workbench.config import preset
from workbench.method import loop, update as update_module
from workbench.method.asynchronous import PENDING_FILE, behaviour_snapshot
from workbench.method.metrics import without_clock
from workbench.method.train import ensure_world, latest_checkpoint, run_dir, train
from workbench.policy.rollout import response_logprobs

STALE = {"method.async_staleness": 1}


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    path = tmp_path_factory.mktemp("async") / "smoke.duckdb"
    con = store.connect(path)
    ensure_world(con, preset("smoke"))
    con.close()
    return str(path)


def _train(db, run, steps, overrides=None, **kw):
    return train(db, run=run, method="coevokg", preset="smoke", steps=steps, progress=False, log=None,
                 overrides=overrides, **kw)


@pytest.mark.parametrize("bad", [-1, 2])
def test_a_staleness_other_than_0_or_1_is_a_one_line_error(bad):
    with pytest.raises(ValueError, match=r"^config field 'method.async_staleness': expected 0 .* or 1 .*got "
                                         f"{bad}$") as err:
        preset("smoke", **{"method.async_staleness": bad})
    assert "\n" not in str(err.value)


def test_what_the_asynchronous_round_cannot_run_is_refused_before_any_work(db):
    from workbench.method.distributed import check_config
    from workbench.method.methods import method_spec

    with pytest.raises(ValueError, match=r"^method.async_staleness=1 under --gpus 2: .* use method.async_staleness=0"):
        check_config(preset("smoke", **STALE), method_spec("coevokg"), 2)
    with pytest.raises(ValueError, match=r"^method.async_staleness=1 with method.kg_filter='llm'"):
        train(db, run="stale-kg", method="dynasearcher", preset="smoke", steps=1, progress=False, log=None,
              overrides={**STALE, "method.kg_filter": "llm"})
    assert not run_dir("stale-kg").exists()


def test_staleness_0_is_the_synchronous_round(db):
    """0 runs the paper's order itself (no overlap: no wait time), with the default's metrics."""
    default = _train(db, "sync-default", 2)
    zero = _train(db, "sync-zero", 2, {"method.async_staleness": 0})
    assert without_clock(zero) == without_clock(default)
    assert not any("time_wait" in r for r in zero)


def test_staleness_1_is_deterministic_by_seed_and_one_update_behind(db):
    first = _train(db, "stale-a", 3, STALE)
    again = _train(db, "stale-b", 3, STALE)
    assert without_clock(first) == without_clock(again)
    assert all("time_wait" in r for r in first)
    sync = _train(db, "stale-sync", 3)
    # round 0 samples with the initial policy in both; from round 1 on the rollouts are one update old
    assert without_clock(first)[0] == without_clock(sync)[0]
    assert without_clock(first)[1] != without_clock(sync)[1]


def test_the_ratio_is_taken_against_the_behaviour_policys_logprobs(db, monkeypatch):
    """Round 1's rows were sampled by pi_0 while round 0 updated: their old log-probs are pi_0's, not
    the updating policy's, and the surrogate's ratio exp(new - old) moves away from 1 (a ratio
    against the current policy's log-probs is 1 on every token)."""
    seen = {"initial": None, "rows": {}, "ratio_gap": {}, "t": None}
    real_update, real_loss = loop.Trainer.update, update_module.policy_loss

    def spy_update(self, t, tasks, slots):
        seen["t"] = t
        if t == 0:
            seen["initial"] = behaviour_snapshot(self.step.policy)  # pi_0, the behaviour policy of round 1
        if t == 1:
            rows = [r.trajectory for s in slots for r in s.rollouts]
            seen["rows"] = {"old": [torch.tensor(r.old_logprobs) for r in rows],
                            "behaviour": response_logprobs(seen["initial"], rows, 16),
                            "current": response_logprobs(self.step.policy, rows, 16)}
        return real_update(self, t, tasks, slots)

    def spy_loss(new, old, ref, adv, mask, *args, **kwargs):
        gap = float(((new.detach() - old).exp() - 1).abs().mul(mask).max())
        seen["ratio_gap"][seen["t"]] = max(seen["ratio_gap"].get(seen["t"], 0.0), gap)
        return real_loss(new, old, ref, adv, mask, *args, **kwargs)

    monkeypatch.setattr(loop.Trainer, "update", spy_update)
    monkeypatch.setattr(update_module, "policy_loss", spy_loss)
    # a large step without warm-up, one optimiser step a round: pi_1 is far from pi_0
    _train(db, "behaviour", 2, {**STALE, "method.lr": 1e-3, "method.warmup_steps": 0, "method.minibatches": 1})
    rows = seen["rows"]
    for old, behaviour in zip(rows["old"], rows["behaviour"]):
        torch.testing.assert_close(old, behaviour, atol=1e-4, rtol=0)
    assert max(float((o - c).abs().max()) for o, c in zip(rows["old"], rows["current"])) > 0.05
    assert seen["ratio_gap"][1] > 0.05


def test_an_interrupted_run_resumes_on_its_pending_rollouts(db, monkeypatch):
    whole = _train(db, "stale-whole", 3, STALE)
    real = loop.Trainer._run_round_async

    def stop_at_round_2(self, t):
        if t == 2:
            raise KeyboardInterrupt("stopped")
        return real(self, t)

    monkeypatch.setattr(loop.Trainer, "_run_round_async", stop_at_round_2)
    with pytest.raises(KeyboardInterrupt):
        _train(db, "stale-parts", 3, STALE)
    assert (latest_checkpoint(run_dir("stale-parts")) / PENDING_FILE).exists()  # round 2's rollouts, by pi_1
    monkeypatch.setattr(loop.Trainer, "_run_round_async", real)
    resumed = _train(db, "stale-parts", 3, STALE, resume=True)
    assert without_clock(resumed) == without_clock(whole)
    # the last round samples nothing ahead: its checkpoint holds no pending rollouts, and a run extended
    # past it samples its first new round with the current policy
    assert not (latest_checkpoint(run_dir("stale-parts")) / PENDING_FILE).exists()
    longer = _train(db, "stale-parts", 4, STALE, resume=True)
    assert without_clock(longer)[:3] == without_clock(whole) and longer[3]["round"] == 3
