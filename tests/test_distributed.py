"""The loop on several processes (issue 20): gloo on the CPU, two ranks against one process."""

import json
import math
import os
import re
import subprocess
import sys

import pytest
import torch

from workbench import config, store
from workbench.method import distributed
from workbench.method.distributed import shard_bounds
from workbench.method.run_store import run_metrics
from workbench.method.train import ensure_world, train

# What the equivalence check allows: 1 and 2 ranks sum the same per-token terms in another order
# and pad other micro-batches, so float32 log-probs differ in their last bits (measured: at most
# 1.5e-7 relative on every metric but the KL). The k3 KL is ~d^2/2 of d = ref - new, a difference of
# two float32 log-probs (~6 in size, ~4e-7 apart at rounding): an absolute noise ~|d| * 4e-7, about
# 1e-9 on a KL of 3e-6 (measured 1.1e-9, i.e. 3e-4 relative), hence its own absolute tolerance.
REL_TOL, ABS_TOL, KL_ABS_TOL = 1e-5, 1e-9, 1e-8


@pytest.mark.parametrize("n", [0, 1, 5, 8, 9])
@pytest.mark.parametrize("world", [1, 2, 3, 8])
def test_shard_blocks_cover_every_slot_once_in_order(n, world):
    blocks = [shard_bounds(n, r, world) for r in range(world)]
    assert [i for a, b in blocks for i in range(a, b)] == list(range(n))
    assert max(b - a for a, b in blocks) - min(b - a for a, b in blocks) <= 1


def test_one_process_joins_no_group():
    assert distributed.from_env({}) is None and distributed.from_env({"WORLD_SIZE": "1", "RANK": "0"}) is None
    assert not torch.distributed.is_initialized()


def test_config_names_the_data_parallel_modes():
    assert sorted(config.DATA_PARALLEL) == sorted(distributed.DATA_PARALLEL)
    with pytest.raises(ValueError, match="rollout.data_parallel"):
        config.preset("smoke", **{"rollout.data_parallel": "both"})


def _reduce_worker(rank: int, init: str, out: str) -> None:
    torch.distributed.init_process_group("gloo", init_method=init, rank=rank, world_size=2)
    params = [torch.nn.Parameter(torch.zeros(3)), torch.nn.Parameter(torch.zeros(2, 2)), torch.nn.Parameter(torch.zeros(4))]
    params[0].grad = torch.full((3,), rank + 1.0)
    params[1].grad = torch.arange(4.0).view(2, 2) * (rank + 1) if rank == 0 else None  # rank 1 has no grad here
    params[2].grad = torch.full((4,), 10.0 * rank)
    sums = distributed.Dist(rank, 2).all_reduce_step(params, {"loss": 0.25 * (rank + 1), "kl": 1e-9}, bucket=5)
    torch.save({"grads": [p.grad for p in params], "sums": sums}, f"{out}.{rank}")
    torch.distributed.destroy_process_group()


def test_all_reduce_step_sums_gradients_and_sums_over_two_gloo_ranks(tmp_path):
    init = f"file://{tmp_path / 'rendezvous'}"
    torch.multiprocessing.spawn(_reduce_worker, args=(init, str(tmp_path / "out")), nprocs=2)
    for rank in range(2):
        got = torch.load(tmp_path / f"out.{rank}")
        assert torch.equal(got["grads"][0], torch.full((3,), 3.0))
        assert torch.equal(got["grads"][1], torch.arange(4.0).view(2, 2))
        assert torch.equal(got["grads"][2], torch.full((4,), 10.0))
        assert got["sums"] == {"kl": 2e-9, "loss": 0.75}


def _launch(db, run, steps, *extra):
    """``workbench train --gpus 2`` in a fresh interpreter (as a user runs it)."""
    cmd = [sys.executable, "-m", "workbench.cli", "train", "--gpus", "2", "--preset", "smoke", "--run", run,
           "--steps", str(steps), "--db", db, *extra]
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout + done.stderr


def _metrics(db, run):
    con = store.connect(db, read_only=True)
    try:
        return [{k: v for k, v in r.items() if not k.startswith("time_")} for r in run_metrics(con, run)]
    finally:
        con.close()


def _reward_spread(db, run) -> bool:
    """Some round's solver rewards differ (GRPO's advantages are not all zero)."""
    con = store.connect(db, read_only=True)
    try:
        return bool(con.execute("SELECT count(*) FROM (SELECT round FROM trajectories WHERE run = ? AND role = 'solver' "
                                "GROUP BY round HAVING min(reward) < max(reward))", [run]).fetchone()[0])
    finally:
        con.close()


def _assert_close(one, two):
    assert len(one) == len(two)
    for a, b in zip(one, two):
        assert a.keys() == b.keys()
        for k in a:
            if isinstance(a[k], float) and isinstance(b[k], float):
                tol = KL_ABS_TOL if k == "kl" else ABS_TOL
                assert math.isclose(a[k], b[k], rel_tol=REL_TOL, abs_tol=tol), (a["round"], k, a[k], b[k])
            else:
                assert a[k] == b[k], (a["round"], k, a[k], b[k])


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    path = tmp_path_factory.mktemp("ddp") / "smoke.duckdb"
    con = store.connect(path)
    ensure_world(con, config.preset("smoke"))
    con.close()
    return str(path)


# DynaSearcher's multi-term solver reward (format terms): the smoke warm start gets spread rewards,
# so GRPO's advantages (and the gradient all-reduce) are not all zero
SPREAD = {"method.solver_reward": "dynasearcher"}


@pytest.mark.slow
def test_two_ranks_give_one_process_metrics_at_the_same_global_batch(db):
    """Replicated rollouts (the one-process samples on every rank): the update's data parallelism
    alone, against one process at the same global batch; rank 1 ran and only rank 0 wrote."""
    sets = {**SPREAD, "rollout.data_parallel": "replicate"}
    one = train(db, run="one", preset="smoke", steps=2, overrides=sets, progress=False, log=None)
    log = _launch(db, "two", 2, *[a for k, v in sets.items() for a in ("--set", f"{k}={v}")])
    assert "rank 1: 2 rounds done" in log
    two = _metrics(db, "two")
    assert _reward_spread(db, "two"), "no round with a reward spread: the advantages were all zero"
    _assert_close([{k: v for k, v in r.items() if not k.startswith("time_")} for r in one], two)


@pytest.mark.slow
def test_sharded_rollouts_greedy_match_one_process(db):
    """Each rank rolls out its own block of slots: greedy decoding makes the samples the one
    process's, so the gathered round (order, rewards, update) must match it."""
    sets = {**SPREAD, "rollout.temperature": 0.0}
    one = train(db, run="greedy-one", preset="smoke", steps=2, overrides=sets, progress=False, log=None)
    _launch(db, "greedy-two", 2, *[a for k, v in sets.items() for a in ("--set", f"{k}={v}")])
    _assert_close([{k: v for k, v in r.items() if not k.startswith("time_")} for r in one], _metrics(db, "greedy-two"))


@pytest.mark.slow
def test_two_ranks_resume_gives_the_uninterrupted_run(db):
    """Sharded, sampled rollouts (each rank its own seed): stopped after round 0 and resumed on two
    ranks, the run's metrics are the uninterrupted two-rank run's."""
    sets = [a for k, v in SPREAD.items() for a in ("--set", f"{k}={v}")]
    _launch(db, "whole", 2, *sets)
    _launch(db, "halves", 1, *sets)
    _launch(db, "halves", 2, "--resume", *sets)
    whole, halves = _metrics(db, "whole"), _metrics(db, "halves")
    assert [r["round"] for r in halves] == [0, 1]
    _assert_close(whole, halves)
    with pytest.raises(ValueError, match="--gpus 2"):  # the ranks' seeds depend on the world size
        train(db, run="halves", preset="smoke", steps=3, resume=True, overrides=SPREAD, progress=False, log=None)


# -- the review's fixes (2026-12-01) --------------------------------------------------------------

def test_a_world_size_not_from_the_launcher_joins_no_group():
    """A SLURM or torchrun job's WORLD_SIZE around a plain train() is not a group of ours."""
    env = {"WORLD_SIZE": "2", "RANK": "0", "LOCAL_RANK": "0"}
    assert distributed.from_env(env) is None
    assert not torch.distributed.is_initialized()


def _world_of_one(tmp_path):
    torch.distributed.init_process_group("gloo", init_method=f"file://{tmp_path / 'one'}", rank=0, world_size=1)
    return distributed.Dist(0, 1)


@pytest.mark.parametrize("ok", [True, False])
def test_close_leaves_the_gloo_group(tmp_path, ok):
    dist = _world_of_one(tmp_path)
    try:
        dist.close(ok)
        assert not torch.distributed.is_initialized()
    finally:
        if torch.distributed.is_initialized():
            torch.distributed.destroy_process_group()


def _unused_worker(rank: int, init: str, out: str) -> None:
    torch.distributed.init_process_group("gloo", init_method=init, rank=rank, world_size=2)
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 2)
    model.unused = torch.nn.Parameter(torch.ones(2))  # never in the forward
    params = list(model.parameters())
    opt = torch.optim.AdamW(params, lr=0.1, weight_decay=0.01)
    model(torch.full((4, 3), rank + 1.0)).sum().backward()
    distributed.Dist(rank, 2).all_reduce_step(params, {"loss": 0.0})
    opt.step()
    torch.save({"grad": model.unused.grad, "value": model.unused.detach().clone(),
                "stepped": [p in opt.state for p in params]}, f"{out}.{rank}")
    torch.distributed.destroy_process_group()


def test_a_parameter_no_rank_has_a_gradient_for_is_not_stepped(tmp_path):
    """One process's AdamW skips a parameter without a gradient (weight decay and all): so must N."""
    init = f"file://{tmp_path / 'rendezvous'}"
    torch.multiprocessing.spawn(_unused_worker, args=(init, str(tmp_path / "out")), nprocs=2)
    for rank in range(2):
        got = torch.load(tmp_path / f"out.{rank}")
        assert got["grad"] is None
        assert torch.equal(got["value"], torch.ones(2))
        assert got["stepped"] == [True, True, False]


def test_a_checkpoint_saved_on_a_gpu_resumes_on_this_rank_s_device(db, tmp_path):
    """The optimiser state is loaded onto the policy's device: here a checkpoint whose tensors are
    tagged cuda:0 (as rank 0 saves them on a GPU) resumes on a machine without CUDA."""
    from workbench.method.train import latest_checkpoint, run_dir

    sets = {"method.val_questions": 2}
    train(db, run="gpu-saved", preset="smoke", steps=1, overrides=sets, progress=False, log=None)
    found = latest_checkpoint(run_dir("gpu-saved"))
    state = torch.load(found / "optimizer.pt")
    assert state["state"], "no optimiser state to move"
    registry = torch.serialization._package_registry
    entry = (-1, lambda obj: "cuda:0", lambda obj, location: None)  # tags every storage cuda:0
    registry.insert(0, entry)
    try:
        torch.save(state, found / "optimizer.pt")
    finally:
        registry.remove(entry)
    if not torch.cuda.is_available():
        with pytest.raises(RuntimeError, match="CUDA"):
            torch.load(found / "optimizer.pt")  # what the resume did before
    rows = train(db, run="gpu-saved", preset="smoke", steps=2, resume=True, overrides=sets, progress=False, log=None)
    assert [r["round"] for r in rows] == [0, 1]


def _cli(argv, capsys):
    from workbench.cli import main

    code = main(argv)
    return code, capsys.readouterr().err


@pytest.mark.parametrize("sets, names", [
    (["--method", "dynasearcher", "--set", "method.kg_filter=llm"], "method.kg_filter"),
    (["--set", "rollout.backend=vllm"], "rollout.backend"),
])
def test_gpus_refuses_what_ranks_cannot_run_before_starting_them(db, capsys, sets, names):
    code, err = _cli(["train", "--gpus", "2", "--preset", "smoke", "--run", "refused", "--db", db, *sets], capsys)
    assert code == 2 and names in err and len(err.strip().splitlines()) == 1, err


def test_rank_backend_is_hf_for_auto_under_several_ranks():
    assert distributed.rank_backend("auto", 2) == "hf" and distributed.rank_backend("hf", 8) == "hf"
    assert distributed.rank_backend("auto", 1) == "auto" and distributed.rank_backend("vllm", 1) == "vllm"
    with pytest.raises(ValueError, match="rollout.backend"):
        distributed.rank_backend("vllm", 2)


def test_gpus_with_an_existing_run_is_one_line_and_exit_code_2(db, capsys):
    train(db, run="taken", preset="smoke", steps=1, overrides={"method.val_questions": 2}, progress=False, log=None)
    code, err = _cli(["train", "--gpus", "2", "--preset", "smoke", "--run", "taken", "--db", db], capsys)
    assert code == 2 and "--resume" in err and len(err.strip().splitlines()) == 1, err
    # and a resume of this one-process run on two ranks (sharded rollouts) is refused the same way
    code, err = _cli(["train", "--gpus", "2", "--preset", "smoke", "--run", "taken", "--db", db, "--resume",
                      "--steps", "2", "--set", "method.val_questions=2"], capsys)
    assert code == 2 and "--gpus 1" in err and len(err.strip().splitlines()) == 1, err


def test_a_sharded_checkpoint_of_two_ranks_is_not_resumed_on_one(db):
    from workbench.method.train import latest_checkpoint, run_dir

    sets = {"method.val_questions": 2}
    train(db, run="made-on-two", preset="smoke", steps=1, overrides=sets, progress=False, log=None)
    marker = latest_checkpoint(run_dir("made-on-two")) / "state.json"
    marker.write_text(json.dumps(distributed.with_world(json.loads(marker.read_text()), 2)))  # as 2 ranks write it
    with pytest.raises(ValueError, match="--gpus 2"):
        train(db, run="made-on-two", preset="smoke", steps=2, resume=True, overrides=sets, progress=False, log=None)


def test_every_train_option_reaches_the_ranks():
    """``_rank_argv`` forwards the parsed invocation: parsed again, it is the same (but --gpus),
    including an option added to train after it was written."""
    import argparse

    from workbench.cli import build_parser
    from workbench.commands.train import _rank_argv

    parser = build_parser()
    train_parser = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices["train"]
    train_parser.add_argument("--new-flag", default=None)
    args = parser.parse_args(["train", "--gpus", "2", "--preset", "smoke", "--method", "ssp", "--steps", "3",
                              "--run=-odd", "--seed", "4", "--resume", "--overwrite", "--model", "some/model", "--set",
                              "method.lr=1e-4", "--set", "a.b=-1", "--db", "x.duckdb", "--new-flag=-v"])
    again = parser.parse_args(_rank_argv(args, train_parser))
    assert again.gpus == 1
    assert {k: v for k, v in vars(again).items() if k != "gpus"} == {k: v for k, v in vars(args).items() if k != "gpus"}
    option_dests = {a.dest for a in train_parser._actions if a.option_strings} - {"help", "gpus"}
    assert option_dests <= {k for k, v in vars(args).items() if v not in (None, False, [])}


def test_dr_free_under_ranks_records_the_one_process_stage_timings(db, tmp_path):
    """Dr. Free's rollout-free proposer reward gets its own ``time_proposer_reward``, as in
    ``Trainer.run_round`` (a world of one rank takes the ranks' path through it)."""
    from workbench.method.loop import Trainer
    from workbench.method.methods import method_spec
    from workbench.method.train import load_policies
    from workbench.policy.warmstart import warmstart
    from workbench.search.retriever import make_retriever

    cfg = config.preset("smoke", **{"method.val_questions": 2})
    con = store.connect(db)
    try:
        base = warmstart(con, preset=cfg, seed=cfg.backbone.seed, log=None)
        policy, reference = load_policies(cfg, base, None)
        trainer = Trainer(con, cfg, method_spec("drfree"), "drfree-laps", policy, reference,
                          make_retriever(con, cfg.search))
        assert trainer.rollout_free
        one = list(trainer.run_round(0).timings)
        trainer.ranks = _world_of_one(tmp_path)
        try:
            ranks = list(trainer.run_round(1).timings)
        finally:
            trainer.ranks.close()
    finally:
        con.close()
    assert "time_proposer_reward" in one and ranks == one


def test_a_rank_that_fails_is_its_exit_code_and_a_line_not_a_traceback(db):
    """An error only a rank meets (here the base model, which the launching process does not load):
    the rank's own line, then which rank failed; the exit code is the rank's (2: bad input)."""
    cmd = [sys.executable, "-m", "workbench.cli", "train", "--gpus", "2", "--preset", "smoke", "--run", "no-base",
           "--steps", "1", "--db", db, "--model", "/nonexistent/model"]
    done = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": os.getcwd()},
                          timeout=600)
    err = done.stderr.strip().splitlines()
    assert done.returncode == 2, done.stderr[-3000:]
    # both ranks load the model, so either may be the first to fail (once seen as a flake of rank 0's line)
    assert re.fullmatch(r"workbench train --gpus 2: rank [01] failed \(exit code 2\); its error is above", err[-1])
    assert any("/nonexistent/model" in line for line in err) and "Traceback" not in done.stderr
    assert len(err) <= 3, done.stderr  # the rank's error, the other rank's lost connection, the summary
