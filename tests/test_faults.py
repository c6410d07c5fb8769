"""kill -9 at every stage of a training round, the checkpoint swap and the best swap: afterwards
the store holds whole rounds only, the last complete checkpoint is there, and ``--resume``
reproduces the uninterrupted run's metrics (issue 12). Each fault is a real SIGKILL of a
subprocess (tests/fixtures/fault_train.py), not an exception."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from workbench import store
from workbench.config import preset
from workbench.method.train import ensure_world

SCRIPT = Path(__file__).parent / "fixtures" / "fault_train.py"
TIMING = ("time_", "search_cache")
FAST_POINTS = ["write_back"]  # inside the round's transaction: the one a user most often hits
SLOW_POINTS = ["propose", "solve", "update", "trajectories", "verdicts", "before_checkpoint", "checkpoint_rename",
               "checkpoint_cleanup"]


def _run(db, runs, run, steps, *args):
    env = {**os.environ, "WORKBENCH_RUNS": str(runs)}
    return subprocess.run([sys.executable, str(SCRIPT), str(db), run, str(steps), *args], env=env,
                          capture_output=True, text=True, timeout=600)


def _comparable(rows):
    return [{k: v for k, v in r.items() if not k.startswith(TIMING)} for r in rows]


def _rounds(db, run):
    con = store.connect(db, read_only=True)
    try:
        out = {}
        for table in ("run_metrics", "trajectories", "candidates", "generated_questions"):
            out[table] = [r for (r,) in con.execute(f"SELECT DISTINCT round FROM {table} WHERE run = ? ORDER BY 1",
                                                    [run]).fetchall()]
        out["evidence"] = [r for (r,) in con.execute(
            "SELECT DISTINCT round FROM evidence WHERE run = ? ORDER BY 1", [run]).fetchall()]
        return out
    finally:
        con.close()


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    folder = tmp_path_factory.mktemp("faults")
    db = folder / "smoke.duckdb"
    con = store.connect(db)
    ensure_world(con, preset("smoke"))
    con.close()
    whole = _run(db, folder / "runs", "whole", 2)
    assert whole.returncode == 0, whole.stderr[-2000:]
    return folder, db, _comparable(json.loads(whole.stdout.splitlines()[-1]))


def _kill_and_resume(world, tmp_path, point, kill_round=1):
    folder, base_db, whole = world
    db = tmp_path / "smoke.duckdb"
    shutil.copy(base_db, db)
    runs = tmp_path / "runs"
    killed = _run(db, runs, "r", 2, "--point", point, "--kill-round", str(kill_round))
    assert killed.returncode == -9, f"{point}: not killed ({killed.returncode}): {killed.stderr[-1500:]}"
    # whole rounds only: every table of the run holds the same rounds as run_metrics
    rounds = _rounds(db, "r")
    committed = rounds["run_metrics"]
    assert committed in ([], [0], [0, 1])
    for table in ("trajectories", "candidates", "generated_questions"):
        assert set(rounds[table]) <= set(committed), (point, table, rounds)
    assert set(rounds["evidence"]) <= {t + 1 for t in committed}, (point, rounds)
    ckpts = sorted(p.name for p in (runs / "r" / "checkpoints").glob("round-*") if (p / "state.json").exists())
    if kill_round >= 1:
        assert ckpts, f"{point}: no complete checkpoint survived"
    resumed = _run(db, runs, "r", 2, "--resume")
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert _comparable(json.loads(resumed.stdout.splitlines()[-1])) == whole
    assert (runs / "r" / "best" / "workbench.json").exists()


@pytest.mark.parametrize("point", FAST_POINTS)
def test_kill_then_resume_gives_the_uninterrupted_run(world, tmp_path, point):
    _kill_and_resume(world, tmp_path, point)


@pytest.mark.slow
@pytest.mark.parametrize("point", SLOW_POINTS)
def test_kill_then_resume_at_every_other_point(world, tmp_path, point):
    _kill_and_resume(world, tmp_path, point)


@pytest.mark.slow
def test_kill_in_the_best_swap_keeps_a_best(world, tmp_path):
    _kill_and_resume(world, tmp_path, "best_swap", kill_round=0)
