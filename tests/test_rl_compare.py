"""scripts/rl_compare.sh end to end at smoke size (slow: three trainings and four evaluations)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_rl_compare_reports_each_run_and_the_seed_table(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("OUT", "GPUS", "CUDA_VISIBLE_DEVICES")}
    env.update(SCRATCH=str(tmp_path), OUT=str(tmp_path / "out"), PY=sys.executable)
    done = subprocess.run(["bash", "scripts/rl_compare.sh", "smoke", "1", "2", "600",
                           "a:coevokg:", "b:coevokg:method.seed=1", "s:search_r1:"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    summary = (tmp_path / "out" / "summary.txt").read_text()
    for name in "abs":
        assert f"{name} (B) vs base (A): B - A macro EM" in summary
    seeds = summary[summary.index("macro EM over seeds"):].splitlines()
    assert "against coevokg" in seeds[0]
    assert [line.split()[:2] for line in seeds[2:]] == [["coevokg", "2"], ["search_r1", "1"]]  # a, b: seeds
    metrics = json.loads((tmp_path / "out" / "metrics.json").read_text())
    assert sorted(metrics) == ["a", "b", "s"] and all(len(rows) == 1 for rows in metrics.values())
    assert (tmp_path / "out" / "eval_base.txt").read_text().startswith("tiny-smoke/base/tinyworld/test#0")
