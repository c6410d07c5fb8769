"""scripts/rl_compare.sh end to end at smoke size (slow: three trainings and four evaluations)."""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def quick_call(scratch: Path, preset: str = "smoke", **env) -> subprocess.CompletedProcess:
    """rl_compare.sh with one run spec and the settings ``env``, for the refusals made before any work."""
    full = {k: v for k, v in os.environ.items() if k not in ("STORE", "WARMSTARTS", "MODEL", "RESUME")}
    full.update(SCRATCH=str(scratch), PY=sys.executable, **env)
    return subprocess.run(["bash", "scripts/rl_compare.sh", preset, "1", "2", "60", "a:coevokg:"],
                          cwd=ROOT, env=full, capture_output=True, text=True, timeout=120)


@pytest.mark.slow
def test_rl_compare_reports_each_run_and_the_seed_table(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("OUT", "GPUS", "CUDA_VISIBLE_DEVICES")}
    env.update(SCRATCH=str(tmp_path), OUT=str(tmp_path / "out"), PY=sys.executable)
    done = subprocess.run(["bash", "scripts/rl_compare.sh", "smoke", "1", "2", "600",
                           "a:coevokg:", "b:coevokg:method.seed=1", "s:search_r1:", "x:coevokg:method.lr=fast"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    summary = (tmp_path / "out" / "summary.txt").read_text()
    for name in "abs":
        assert f"{name} (B) vs base (A): B - A macro EM" in summary
        assert re.search(rf"^{name}: macro F1 [0-9.]+$", summary, re.M)  # what reference_file.py records
    seeds = summary[summary.index("macro EM over seeds"):].split("\n\n")[0].splitlines()  # the EM table alone
    assert "against coevokg" in seeds[0]
    assert [line.split()[:2] for line in seeds[2:]] == [["coevokg", "2"], ["search_r1", "1"]]  # a, b: seeds
    assert "macro F1 over seeds" in summary and "searches per test question" in summary
    # a run whose training fails (here a setting train refuses) is reported, not evaluated
    assert re.search(r"^x: no evaluation \(train exit [1-9][0-9]*; logs/train_x.log\)$", summary, re.M)
    assert (tmp_path / "logs" / "eval_x.txt").read_text().startswith("not evaluated: train exit")
    assert "method.lr" in (tmp_path / "logs" / "train_x.log").read_text()
    metrics = json.loads((tmp_path / "out" / "metrics.json").read_text())
    assert sorted(metrics) == ["a", "b", "s", "x"] and all(len(metrics[r]) == 1 for r in "abs")
    assert (tmp_path / "out" / "eval_base.txt").read_text().startswith("tiny-smoke/base/tinyworld/test#0")


@pytest.mark.slow
def test_rl_compare_starts_every_run_from_model_and_copies_store(tmp_path):
    """MODEL is the base of each run and the base row (no warm start is made); STORE is copied
    instead of a new world. The model here is a smoke warm start stripped of its workbench.json,
    so it reads as a model of the user's (labelled by its folder name)."""
    env = {k: v for k, v in os.environ.items() if k not in ("OUT", "GPUS", "CUDA_VISIBLE_DEVICES", "DATASET")}
    wb = [sys.executable, "-m", "workbench.cli"]
    prep = {**env, "WORKBENCH_DATA": str(tmp_path / "prep")}
    store = tmp_path / "mine.duckdb"
    for args in (["world", "--preset", "smoke"], ["pool", "build", "--preset", "smoke"],
                 ["warmstart", "--preset", "smoke", "--out", str(tmp_path / "mine")]):
        subprocess.run([*wb, *args, "--db", str(store)], cwd=ROOT, env=prep, check=True, capture_output=True)
    (tmp_path / "mine" / "workbench.json").unlink()
    scratch = tmp_path / "scratch"
    env.update(SCRATCH=str(scratch), OUT=str(tmp_path / "out"), PY=sys.executable, MODEL=str(tmp_path / "mine"),
               STORE=str(store))
    done = subprocess.run(["bash", "scripts/rl_compare.sh", "smoke", "1", "2", "600", "a:coevokg:"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"base: {tmp_path / 'mine'}" in done.stdout and f"store: a copy of {store}" in done.stdout
    assert not (scratch / "base").exists()  # no warm start made
    assert (tmp_path / "out" / "eval_base.txt").read_text().startswith("mine-smoke/base/tinyworld/test#")
    best = json.loads((scratch / "runs" / "a" / "best" / "workbench.json").read_text())
    assert (best["base"], best["backbone"]) == (str(tmp_path / "mine"), "mine")
    assert "a (B) vs base (A): B - A macro EM" in (tmp_path / "out" / "summary.txt").read_text()


def test_rl_compare_refuses_a_missing_store(tmp_path):
    done = quick_call(tmp_path, "paper", STORE=str(tmp_path / "none.duckdb"))
    assert done.returncode == 2 and "STORE=" in done.stderr and "no such store file" in done.stderr


@pytest.mark.slow
def test_rl_compare_pairs_dynasearcher_runs_with_the_kg_base(tmp_path):
    """A run offered the KG tool starts from the KG warm start and is compared with it; the others
    with the default base. A REFERENCE the batch lacks (Table 3's rows run apart) leaves out the
    Welch tests instead of failing the summary."""
    env = {k: v for k, v in os.environ.items() if k not in ("OUT", "GPUS", "CUDA_VISIBLE_DEVICES", "DATASET")}
    env.update(SCRATCH=str(tmp_path), OUT=str(tmp_path / "out"), PY=sys.executable, REFERENCE="drfree")
    done = subprocess.run(["bash", "scripts/rl_compare.sh", "smoke", "1", "2", "600",
                           "k:dynasearcher:", "k1:dynasearcher:method.seed=1", "w:dynasearcher_wo_kg:"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    summary = (tmp_path / "out" / "summary.txt").read_text()
    assert "k (B) vs KG base (A)" in summary and "k1 (B) vs KG base (A)" in summary
    assert "w (B) vs base (A)" in summary
    assert (tmp_path / "out" / "eval_base_kg.txt").read_text().startswith("tiny-smoke/base_kg/tinyworld/test#0")
    assert "REFERENCE=drfree is not among these configurations: no Welch tests" in summary
    assert "KG base" in summary[summary.index("macro EM over seeds"):].splitlines()[0]


def test_configurations_leave_out_the_seed_and_what_every_run_shares():
    """A setting on every spec (e.g. README's method.verifier_vocabulary=exact for the older
    reference files) stays out of the configurations' names, so REFERENCE=drfree still names one."""
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        from rl_summary import configuration, settings
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    specs = ["d0:drfree:method.verifier_vocabulary=exact,method.seed=0",
             "w0:drfree:method.verifier_vocabulary=exact,method.proposer_reward=dr_free_wo_one_shot,method.seed=0"]
    shared = set.intersection(*(set(settings(s)) for s in specs))
    assert [configuration(s, shared) for s in specs] == ["drfree", "drfree method.proposer_reward=dr_free_wo_one_shot"]
    assert configuration(specs[0]) == "drfree method.verifier_vocabulary=exact"
    assert configuration("c1:coevokg:method.lr=1e-5,method.seed=1") == "coevokg method.lr=1e-5"


def test_offered_kg_tool_follows_the_method_and_its_override():
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        from rl_summary import offered_kg_tool
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    assert offered_kg_tool("k:dynasearcher:method.seed=1") and offered_kg_tool("m:dynasearcher_wo_mr:")
    assert not offered_kg_tool("w:dynasearcher_wo_kg:") and not offered_kg_tool("c:coevokg:method.lr=1e-5")
    assert offered_kg_tool("c:coevokg:method.kg_tool=on,method.seed=2")
    assert not offered_kg_tool("k:dynasearcher:method.kg_tool=off")


def test_rl_compare_trains_the_warm_starts_its_runs_start_from():
    """The one check rl_compare.sh asks (no pattern of method names in the script)."""
    done = subprocess.run([sys.executable, "scripts/rl_summary.py", "--warm-starts", "c:coevokg:method.kg_tool=on",
                           "e:eog_random_walk:", "s:search_r1:"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.split() == ["kg", "topology"]
    done = subprocess.run([sys.executable, "scripts/rl_summary.py", "--warm-starts", "s:search_r1:"],
                          cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.split() == []


@pytest.mark.slow
def test_rl_compare_pairs_eog_runs_with_the_topology_base(tmp_path):
    """The EoG rows start from EoG's topology warm start, trained once before the runs, and are
    compared with it on the answer-set questions; CoEvoKG with the default base."""
    env = {k: v for k, v in os.environ.items() if k not in ("OUT", "GPUS", "CUDA_VISIBLE_DEVICES", "REFERENCE")}
    env.update(SCRATCH=str(tmp_path), OUT=str(tmp_path / "out"), PY=sys.executable, DATASET="tinyworld_topology")
    done = subprocess.run(["bash", "scripts/rl_compare.sh", "smoke", "1", "2", "600",
                           "e:eog:", "e1:eog:method.seed=1", "w:eog_wo_solver_update:", "c:coevokg:"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    summary = (tmp_path / "out" / "summary.txt").read_text()
    for name in ("e", "e1", "w"):
        assert f"{name} (B) vs topology base (A)" in summary
    assert "c (B) vs base (A)" in summary
    assert (tmp_path / "out" / "eval_base_topology.txt").read_text().startswith(
        "tiny-smoke/base_topology/tinyworld_topology/test#0")
    assert "topology base" in summary[summary.index("macro set F1 over seeds"):].splitlines()[0]
    for name in ("e", "w"):  # each run recorded the topology warm start as its base
        best = json.loads((tmp_path / "runs" / name / "best" / "workbench.json").read_text())
        assert json.loads((Path(best["base"]) / "workbench.json").read_text())["method"] == "base_topology"
    # A later call given this call's warm starts (WARMSTARTS) reuses them instead of training again.
    keep = tmp_path.parent / f"{tmp_path.name}-warmstarts"
    shutil.copytree(tmp_path / "data" / "cache" / "warmstart", keep)
    env.update(WARMSTARTS=str(keep))
    again = subprocess.run(["bash", "scripts/rl_compare.sh", "smoke", "1", "2", "600", "e:eog:"],
                           cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert again.returncode == 0, again.stderr[-2000:]
    assert "reusing" in (tmp_path / "logs" / "warmstart_topology.log").read_text()


def test_rl_compare_refuses_missing_warmstarts(tmp_path):
    done = quick_call(tmp_path, WARMSTARTS=str(tmp_path / "none"))
    assert done.returncode == 2 and "WARMSTARTS=" in done.stderr and "no such folder" in done.stderr


def test_from_topology_base_follows_the_method():
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        from rl_summary import from_topology_base
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    assert all(from_topology_base(f"x:{m}:method.seed=1") for m in ("eog", "eog_random_walk", "eog_adversarial"))
    assert not from_topology_base("c:coevokg:") and not from_topology_base("k:dynasearcher:")


@pytest.mark.slow
def test_rl_compare_resumes_the_runs_of_an_earlier_call(tmp_path):
    """RESUME=1: a second call continues each run from its checkpoint up to the new STEPS (nothing
    rebuilt, the base not evaluated again) and reports the whole run, into a fresh OUT."""
    env = {k: v for k, v in os.environ.items() if k not in ("OUT", "GPUS", "CUDA_VISIBLE_DEVICES", "DATASET", "RESUME")}
    env.update(SCRATCH=str(tmp_path / "s"), OUT=str(tmp_path / "out1"), PY=sys.executable)
    first = subprocess.run(["bash", "scripts/rl_compare.sh", "smoke", "1", "2", "600", "a:coevokg:"],
                           cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert first.returncode == 0, first.stderr[-2000:]
    base_eval = tmp_path / "s" / "logs" / "eval_base.txt"
    stamp = base_eval.stat().st_mtime_ns
    env.update(OUT=str(tmp_path / "out2"), RESUME="1")
    again = subprocess.run(["bash", "scripts/rl_compare.sh", "smoke", "2", "2", "600", "a:coevokg:"],
                           cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert again.returncode == 0, again.stderr[-2000:]
    assert "resuming the runs in" in again.stdout and "world" not in again.stdout.split("resuming")[0]
    assert base_eval.stat().st_mtime_ns == stamp  # the earlier call's evaluation of the base, not redone
    assert (tmp_path / "out2" / "eval_base.txt").read_text() == base_eval.read_text()
    metrics = json.loads((tmp_path / "out2" / "metrics.json").read_text())
    assert [row["round"] for row in metrics["a"]] == [0, 1]
    assert "a (B) vs base (A): B - A macro EM" in (tmp_path / "out2" / "summary.txt").read_text()
    log = (tmp_path / "s" / "logs" / "train_a.log").read_text()
    assert log.count("a (coevokg)") >= 2 and "== resumed up to 2 rounds" in log  # both calls' training kept
    # a call with another spec (here another seed) is refused before anything runs
    changed = subprocess.run(["bash", "scripts/rl_compare.sh", "smoke", "3", "2", "600", "a:coevokg:method.seed=1"],
                             cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert changed.returncode == 2 and "this call differs" in changed.stderr
    assert [row["round"] for row in json.loads((tmp_path / "out2" / "metrics.json").read_text())["a"]] == [0, 1]


def test_rl_compare_resume_refuses_what_it_cannot_continue(tmp_path):
    def call(**extra):
        return quick_call(tmp_path, **{"RESUME": "1", **extra})

    done = call()
    assert done.returncode == 2 and "holds no earlier call's runs" in done.stderr
    assert call(RESUME="0").stderr.startswith("RESUME=0: expected 1")
    (tmp_path / "data").mkdir()
    (tmp_path / "logs").mkdir()
    (tmp_path / "data" / "_base.duckdb").write_bytes(b"")
    (tmp_path / "logs" / "call.txt").write_text("preset=smoke\nlimit=2\ndataset=tinyworld\nengine=hf\n"
                                                f"base={tmp_path / 'base'}\nspec=b:coevokg:\n")
    done = call(STORE=str(tmp_path.parent / f"{tmp_path.name}-mine.duckdb"))
    assert done.returncode == 2 and "leave STORE unset" in done.stderr
    done = call()  # run a, where the first call ran b
    assert done.returncode == 2 and "this call differs from the one that started the runs" in done.stderr
    assert "spec=a:coevokg:" in done.stderr and "spec=b:coevokg:" in done.stderr
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["_base.duckdb", "call.txt", "data", "logs", "out"]  # nothing touched (OUT made empty)
