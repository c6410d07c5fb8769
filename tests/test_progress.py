"""What a person watching a run sees: text progress, quiet weight bars, progress.json while the store
is locked, and reading commands that start fast (issues 12 and 13)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from workbench import paths, store
from workbench.cli import main
from workbench.config import preset
from workbench.method.progress import WarmStartProgress
from workbench.method.run_store import METRIC_KEYS, run_metrics
from workbench.method.train import ensure_world


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A smoke store with a two-round run trained with progress on; (db, run, what it printed)."""
    db = str(tmp_path_factory.mktemp("progress") / "smoke.duckdb")
    con = store.connect(db)
    ensure_world(con, preset("smoke"))
    con.close()
    capture = tmp_path_factory.mktemp("out") / "train.txt"
    code = textwrap.dedent(f"""
        from workbench.method.train import train
        train({db!r}, run="watched", method="coevokg", preset="smoke", steps=2, progress=True)
    """)
    # its own process: tqdm and transformers write to the real stdout/stderr, captured whole here
    with capture.open("w") as out:
        subprocess.run([sys.executable, "-c", code], stdout=out, stderr=subprocess.STDOUT, check=True)
    return db, "watched", capture.read_text()


def test_training_shows_text_progress_that_moves_and_no_weight_bars(trained):
    _, run, printed = trained
    assert "watched (coevokg):" in printed and "2/2" in printed  # a text bar on stdout that reached the end
    assert "val EM=" in printed and "reward=" in printed and "pool=" in printed
    assert "Loading weights" not in printed and "Writing model shards" not in printed


def test_a_run_writes_progress_json_after_each_round(trained):
    db, run, _ = trained
    progress = json.loads((paths.runs_dir() / run / "progress.json").read_text())
    con = store.connect(db, read_only=True)
    rows = run_metrics(con, run)
    con.close()
    assert (progress["status"], progress["completed"], progress["steps"]) == ("done", 2, 2)
    assert progress["rounds"] == [{k: r[k] for k in METRIC_KEYS} for r in rows]


@pytest.fixture()
def locked(trained):
    """The trained store held open for writing by another process, as a training run holds it."""
    db = trained[0]
    holder = subprocess.Popen([sys.executable, "-c", f"import duckdb, sys; con = duckdb.connect({db!r}); print('held', "
                               "flush=True); sys.stdin.read()"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    yield db
    holder.communicate("")


def test_runs_show_reads_progress_json_while_the_store_is_locked(trained, locked, capsys):
    _, run, _ = trained
    assert main(["runs", "show", run, "--db", locked, "--json"]) == 0
    captured = capsys.readouterr()
    assert [r["round"] for r in json.loads(captured.out)] == [0, 1]
    assert "locked by a writing process" in captured.err and "progress.json (done, 2/2 rounds" in captured.err
    assert main(["runs", "list", "--db", locked]) == 0
    assert "watched" in capsys.readouterr().out


def test_runs_show_starts_without_torch(trained):
    db, run, _ = trained
    code = (f"import sys; from workbench.cli import main; main(['runs', 'show', {run!r}, '--db', {db!r}]); "
            "print('torch loaded:', 'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "torch loaded: False" in out and "val_em" in out


def test_the_warm_starts_own_log_lines_move_its_bar(tmp_path, monkeypatch, capsys):
    """Against the real warm start (trained afresh in an empty cache): its log lines still match."""
    from workbench.policy.warmstart import warmstart

    monkeypatch.setenv("WORKBENCH_DATA", str(tmp_path))
    con = store.connect(tmp_path / "smoke.duckdb")
    ensure_world(con, preset("smoke"))
    lines = []
    progress = WarmStartProgress(preset("smoke").backbone.sft_steps, log=lines.append)
    warmstart(con, "smoke", log=progress)
    con.close()
    assert progress.done == progress.total and progress.stage == "done"
    assert "warm start: done: 100%" in capsys.readouterr().out
    assert any("trained here once, then cached" in line for line in lines)
