"""kill -9 at every stage of a training round, the checkpoint swap and the best swap: afterwards
the store holds whole rounds only, the last complete checkpoint is there, and ``--resume``
reproduces the uninterrupted run's metrics (issue 12). Each fault is a real SIGKILL of a
subprocess (tests/fixtures/fault_train.py), not an exception."""

import gzip
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from workbench import store
from workbench.config import preset
from workbench.method.metrics import without_clock
from workbench.method.train import ensure_world

SCRIPT = Path(__file__).parent / "fixtures" / "fault_train.py"
FAST_POINTS = ["write_back"]  # inside the round's transaction: the one a user most often hits
SLOW_POINTS = ["propose", "solve", "update", "trajectories", "verdicts", "before_checkpoint", "checkpoint_rename",
               "checkpoint_cleanup"]


def _run(db, runs, run, steps, *args):
    env = {**os.environ, "WORKBENCH_RUNS": str(runs)}
    return subprocess.run([sys.executable, str(SCRIPT), str(db), run, str(steps), *args], env=env,
                          capture_output=True, text=True, timeout=600)


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
    return folder, db, without_clock(json.loads(whole.stdout.splitlines()[-1]))


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
    assert without_clock(json.loads(resumed.stdout.splitlines()[-1])) == whole
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


@pytest.mark.parametrize("share, point", [(1.0, "average_swap"), (0.5, "before_checkpoint")])
def test_kill_in_an_averaged_round_then_resume_averages_as_the_uninterrupted_run(world, tmp_path, share, point):
    """``method.weight_average``: killed between moving round 1's old ``average`` aside and putting the
    new one in (every round averaged), or before round 1's checkpoint (the last half: round 0's
    checkpoint holds an empty mean), the resumed run redoes round 1 and ends with the uninterrupted
    run's mean."""
    from safetensors.torch import load_file

    folder, base_db, _ = world
    db, runs, on = tmp_path / "smoke.duckdb", tmp_path / "runs", json.dumps({"method.weight_average": share})
    shutil.copy(base_db, db)
    whole = _run(db, runs, "avg-whole", 2, "--set", on)
    assert whole.returncode == 0, whole.stderr[-2000:]
    killed = _run(db, runs, "r", 2, "--point", point, "--set", on)
    assert killed.returncode == -9, f"not killed ({killed.returncode}): {killed.stderr[-1500:]}"
    if point == "average_swap":
        assert (runs / "r" / ".average-old").exists() and not (runs / "r" / "average").exists()
    resumed = _run(db, runs, "r", 2, "--resume", "--set", on)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert without_clock(json.loads(resumed.stdout.splitlines()[-1])) == without_clock(json.loads(whole.stdout.splitlines()[-1]))
    a, b = (load_file(runs / r / "average" / "model.safetensors") for r in ("avg-whole", "r"))
    assert a.keys() == b.keys() and all((a[k] == b[k]).all() for k in a)
    assert not list((runs / "r").glob(".average-*"))


# ----------------------------------------------------------------- imports and pool builds (issue 12)
# The same style: a real SIGKILL of a subprocess at a named point (tests/fixtures/fault_import.py);
# afterwards the store is exactly as before or exactly as after an uninterrupted run, and a rerun
# of the same command completes (or, once the import committed, is refused as already done).

IMPORT_SCRIPT = Path(__file__).parent / "fixtures" / "fault_import.py"
ROOT = Path(__file__).resolve().parents[1]
FAST_IMPORT_POINTS = ["import_before_commit", "pool_evidence", "gz_before_commit"]
SLOW_IMPORT_POINTS = ["import_first_batch", "import_staged", "import_edges", "import_after_commit",
                      "qa_before_commit", "pool_walks", "pool_deleted", "pool_after_commit",
                      "wiki18_first_batch", "wiki18_before_commit", "w5m_aliases", "w5m_before_commit",
                      "gz_first_batch"]


def _workbench(point, *argv, file_limit=None):
    """``workbench ARGV`` in a subprocess killed at ``point`` ("none": not killed); ``file_limit``
    caps the size of any file it writes (RLIMIT_FSIZE: a disk that fills, injected)."""
    import resource
    import signal

    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}

    def limit():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a failing write returns EFBIG instead of killing
        resource.setrlimit(resource.RLIMIT_FSIZE, (file_limit, file_limit))

    return subprocess.run([sys.executable, str(IMPORT_SCRIPT), point, "--", *map(str, argv)], env=env,
                          capture_output=True, text=True, timeout=300, preexec_fn=limit if file_limit else None)


def snapshot(db) -> dict:
    """Every table's row count and an order-free hash of its rows (creation times left out)."""
    con = store.connect(db, read_only=True)
    try:
        out = {}
        for (table,) in con.execute("SHOW TABLES").fetchall():
            columns = [c for (c,) in con.execute(f"SELECT column_name FROM (DESCRIBE {table})").fetchall()]
            rows = f"(SELECT {', '.join(c for c in columns if c != 'created_at')} FROM {table})"
            out[table] = con.execute(f"SELECT count(*), sum(hash(t)) FROM {rows} t").fetchall()[0]
        return out
    finally:
        con.close()


COMMANDS = {  # point prefix -> (the command's arguments given db and files, the in-process whole run)
    "import": lambda db, f: ["import", "kilt", f["kilt"], "--db", db, "--no-progress"],
    "qa": lambda db, f: ["import", "qa", f["qa"], "--name", "nq", "--db", db],
    "wiki18": lambda db, f: ["import", "wiki18", f["wiki18"], "--db", db, "--no-progress"],
    "w5m": lambda db, f: ["import", "wikidata5m", f["triples"], "--aliases", f["aliases"], "--db", db, "--no-progress"],
    "gz": lambda db, f: ["import", "kilt", f["kilt_gz"], "--db", db, "--no-progress"],
    "pool": lambda db, f: ["pool", "build", "--db", db, "--preset", "smoke", "--walks", 400, "--seed", 7],
}


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    """A smoke store with a G_0 (seed 1), input files, and each command's result run whole."""
    from test_sources import write_kilt_like

    from workbench.cli import main
    from workbench.kg.pool import build_pool
    from workbench.kg.tinyworld import build_world

    folder = tmp_path_factory.mktemp("import_faults")
    base = folder / "base.duckdb"
    con = store.connect(base)
    build_world(con, preset="smoke")
    build_pool(con, walks=300, seed=1)
    con.close()
    files = {"kilt": folder / "kilt.jsonl", "qa": folder / "nq.jsonl", "wiki18": folder / "psgs.jsonl",
             "triples": folder / "triples.txt", "aliases": folder / "aliases.txt", "kilt_gz": folder / "kilt2.jsonl.gz"}
    write_kilt_like(files["kilt"], 300)
    files["qa"].write_text("".join(json.dumps({"id": i, "question": f"q{i}?", "answers": [f"a{i}"]}) + "\n"
                                   for i in range(50)))
    files["wiki18"].write_text("".join(json.dumps({"id": str(i), "contents": f'"Page {i % 40}"\nText {i}.'}) + "\n"
                                       for i in range(300)))
    files["triples"].write_text("".join(f"Q{i}\tP{i % 5}\tQ{i + 1}\n" for i in range(300)))
    files["aliases"].write_text("".join(f"Q{i}\tPage {i}\n" for i in range(301)))
    write_kilt_like(folder / "kilt2.jsonl", 200, seed=2)  # another source, stored as .gz
    files["kilt_gz"].write_bytes(gzip.compress((folder / "kilt2.jsonl").read_bytes()))
    whole = {}
    for kind, argv in COMMANDS.items():
        db = folder / f"whole-{kind}.duckdb"
        shutil.copy(base, db)
        assert main(list(map(str, argv(db, files)))) == 0
        whole[kind] = snapshot(db)
    return base, files, whole


def _kill_and_rerun(inputs, tmp_path, point):
    base, files, whole = inputs
    kind = point.split("_")[0]
    db = tmp_path / "s.duckdb"
    shutil.copy(base, db)
    before, after = snapshot(db), whole[kind]
    argv = COMMANDS[kind](db, files)
    killed = _workbench(point, *argv)
    assert killed.returncode == -9, f"{point}: not killed ({killed.returncode}): {killed.stderr[-1500:]}"
    now = snapshot(db)
    assert now in (before, after), f"{point}: the store is neither as before nor whole"
    assert now == (after if point.endswith("after_commit") else before), f"{point}: committed too early or late"
    rerun = _workbench("none", *argv)
    if now == after and kind != "pool":  # the import committed: doing it again is refused, nothing changes
        assert rerun.returncode == 2 and "already" in rerun.stderr, rerun.stderr
    else:
        assert rerun.returncode == 0, rerun.stderr[-2000:]
    final = snapshot(db)
    if kind == "pool" and now == after:  # a second build of the same G_0: one more pool_builds row
        final.pop("pool_builds"), after.pop("pool_builds")
    assert final == after


@pytest.mark.parametrize("point", FAST_IMPORT_POINTS)
def test_kill_during_import_or_pool_build_leaves_before_or_whole(inputs, tmp_path, point):
    _kill_and_rerun(inputs, tmp_path, point)


@pytest.mark.slow
@pytest.mark.parametrize("point", SLOW_IMPORT_POINTS)
def test_kill_at_every_other_point_of_import_and_pool_build(inputs, tmp_path, point):
    _kill_and_rerun(inputs, tmp_path, point)


def test_kill_while_a_second_form_of_a_source_is_hashed_leaves_the_store_and_the_rerun_refuses(inputs, tmp_path):
    """The same KILT source as .gz, onto a store that holds it: killed while its content is hashed for
    the comparison, the store is as it was; run again, it is refused as already imported (issue 39)."""
    base, files, whole = inputs
    db = tmp_path / "s.duckdb"
    shutil.copy(base.parent / "whole-import.duckdb", db)
    packed = tmp_path / "kilt.jsonl.gz"
    packed.write_bytes(gzip.compress(files["kilt"].read_bytes()))
    argv = ["import", "kilt", packed, "--db", db, "--no-progress"]
    killed = _workbench("again_hashed", *argv)
    assert killed.returncode == -9, killed.stderr[-1500:]
    assert snapshot(db) == whole["import"]
    rerun = _workbench("none", *argv)
    assert rerun.returncode == 2 and rerun.stderr.count("\n") == 1 and "with the same content" in rerun.stderr
    assert snapshot(db) == whole["import"]


def test_a_disk_that_fills_at_commit_is_one_line_and_changes_nothing(inputs, tmp_path):
    base, files, whole = inputs
    db = tmp_path / "s.duckdb"
    shutil.copy(base, db)
    before = snapshot(db)
    argv = COMMANDS["import"](db, files)
    full = _workbench("none", *argv, file_limit=64 * 1024)  # the WAL cannot hold the commit
    assert full.returncode == 1, full.stderr[-2000:]
    assert full.stderr.count("\n") == 1 and "File too large" in full.stderr and "rolled back" in full.stderr
    assert snapshot(db) == before
    assert _workbench("none", *argv).returncode == 0
    assert snapshot(db) == whole["import"]


@pytest.mark.parametrize("point", ["before_second", pytest.param("after_second", marks=pytest.mark.slow)])
def test_kill_during_a_batch_then_rerun_finishes_every_point(tmp_path, point):
    """kill -9 between the points of a batch or after a point ran but before its record: the rerun
    skips what finished and completes the rest, one record row per point."""
    script = SCRIPT.parent / "fault_batch.py"
    out = tmp_path / "out"
    killed = subprocess.run([sys.executable, str(script), str(out), point], capture_output=True, text=True, timeout=600)
    assert killed.returncode == -9, killed.stderr[-1500:]
    rerun = subprocess.run([sys.executable, str(script), str(out), "none"], capture_output=True, text=True, timeout=600)
    assert rerun.returncode == 0, rerun.stderr[-1500:]
    statuses = json.loads(rerun.stdout.splitlines()[-1])
    assert [s for s, _ in statuses][0] == "skipped" and [q for _, q in statuses] == [4, 9]
    con = store.connect(out / "batch.duckdb", read_only=True)
    rows = con.execute("SELECT point, status FROM batch_results ORDER BY point").fetchall()
    con.close()
    assert len(rows) == 2 and {s for _, s in rows} == {"done"}
