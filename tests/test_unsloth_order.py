"""Issue 44: on the GPU path Unsloth is imported before Transformers, PEFT and TRL (else it runs
unpatched: "may run slower or encounter memory issues"). Unsloth is not installed on this CPU, so
these tests check the decision (``lora.unsloth_wanted``) and that each entry point makes it before
anything has imported the libraries Unsloth patches, in a fresh process."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

from workbench.policy import lora

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _fresh(code: str, tmp_path) -> str:
    env = {**os.environ, "WORKBENCH_RUNS": str(tmp_path / "runs"), "WORKBENCH_DATA": str(tmp_path / "data")}
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def test_unsloth_is_wanted_only_for_lora_on_cuda_with_the_package():
    installed = importlib.util.find_spec("unsloth") is not None
    assert lora.unsloth_wanted("cuda", 16) is installed and lora.unsloth_wanted("cuda:1", 1) is installed
    assert not lora.unsloth_wanted("cpu", 16) and not lora.unsloth_wanted("cuda", 0)


def test_train_decides_before_anything_imports_what_unsloth_patches(tmp_path):
    (tmp_path / "bad.duckdb").write_text("not a store")  # train stops at the store, after the decision
    out = _fresh(f"""
import json
from workbench.method.train import train
from workbench.policy import lora
try:
    train({str(tmp_path / 'bad.duckdb')!r}, run="order", preset="smoke", steps=1, overrides={{"method.lora_rank": 2}},
          progress=False, log=None)
except Exception as err:
    print("stopped:", type(err).__name__)
print(json.dumps(lora.IMPORT_ORDER))
""", tmp_path)
    assert "stopped:" in out
    assert json.loads(out.splitlines()[-1]) == {"unsloth": False, "imported_before": []}


def test_bench_gpu_decides_before_anything_imports_what_unsloth_patches(tmp_path):
    out = _fresh("""
import sys
from workbench.cli import main
sys.exit(main(["bench", "gpu", "--device", "cpu", "--shape", "tiny-test", "--engines", "hf", "--parts", "update",
               "--lora-rank", "2", "--update-batch", "2", "--update-tokens", "8", "--update-steps", "1"]))
""", tmp_path)
    assert json.loads(out)["unsloth_import"] == {"unsloth": False, "imported_before": []}
