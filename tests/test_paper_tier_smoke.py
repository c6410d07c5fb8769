"""scripts/paper_tier_smoke.py at its CPU shape: the paper tier's whole path (model, world, G_0, E5-shaped
index, training with the LLM verifier and extractor, resume, evaluation, figures), each GPU-holding
stage in its own process (slow: ~1 minute)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


DATA_STAGES = {"tinyworld": ["world", "pool G_0", "encoder", "dense index"],
               "kilt": ["kilt inputs", "encoder", "data paper"]}


@pytest.mark.slow
@pytest.mark.parametrize("source", sorted(DATA_STAGES))
def test_paper_tier_smoke_runs_every_stage_at_the_tiny_shape(tmp_path, source):
    proc = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "paper_tier_smoke.py"), "--out", str(tmp_path), "--shape", "tiny",
         "--source", source, "--entities", "2000" if source == "tinyworld" else "300", "--rounds", "1", "--slots", "2",
         "--set", "rollout.max_new_tokens=32",
         "--set", "rollout.max_total_tokens=512", "--set", "method.group_size=2", "--set", "method.val_questions=1"],
        capture_output=True, text=True, timeout=900, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr[-4000:]
    rows = [json.loads(line) for line in proc.stdout.strip().splitlines()]  # stdout is JSON lines only
    summary = rows[-1]
    assert summary["summary"] == rows[:-1]
    assert [row["stage"] for row in summary["summary"]] == [
        "model", *DATA_STAGES[source], "train 1 rounds", "resume +1 round", "evaluate best", "figures"]
    assert (tmp_path / "runs" / "paper-smoke" / "checkpoints" / "round-000002" / "state.json").exists()
    assert (tmp_path / "figures" / "table1_main_results_paper.md").exists()
    if source == "kilt":  # the loop read the imported files: seed pool from the QA training sets, G_0 from KILT's links
        import duckdb

        con = duckdb.connect(str(tmp_path / "data" / "paper.duckdb"), read_only=True)
        try:
            splits = dict(((d, s), n) for d, s, n in con.execute(
                "SELECT dataset, split, count(*) FROM questions GROUP BY ALL").fetchall())
            steps = [s for (s,) in con.execute("SELECT step FROM pipeline_steps").fetchall()]
            evaluated = con.execute("SELECT DISTINCT dataset FROM eval_outcomes").fetchall()
        finally:
            con.close()
        assert splits[("nq_hotpotqa", "seed")] > 0 and splits[("nq", "test")] > 0 and evaluated == [("nq",)]
        assert {"kilt", "wiki18", "e5-index", "seed-pool", "pool"} <= set(steps)
