"""``workbench plan``: input checks on real stores and folders, and the estimates' arithmetic (issue 16)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from workbench import store
from workbench.cli import main
from workbench.config import preset
from workbench.plan import ARCHITECTURES, ENGINE_OVERHEAD, GIB, Assumptions, Shape, check_inputs, format_plan, \
    generation_seconds, kv_cache, memory_per_gpu, model_shape, plan, rows_at_once, time_per_round, vllm_memory_for_batch

QWEN3B = {"model_type": "qwen2", "hidden_size": 2048, "num_hidden_layers": 36, "num_attention_heads": 16,
          "num_key_value_heads": 2, "intermediate_size": 11008, "vocab_size": 151936, "tie_word_embeddings": True}


def test_parameter_counts_match_the_published_models():
    counts = {name: s.parameters() for name, s in ARCHITECTURES.items()}
    assert counts["Qwen/Qwen2.5-3B-Instruct"] == 3_085_938_688  # "3.09B" on the model card
    assert round(counts["Qwen/Qwen2.5-7B-Instruct"] / 1e9, 2) == 7.62
    assert round(counts["meta-llama/Llama-3.1-8B-Instruct"] / 1e9, 2) == 8.03


def test_a_model_folders_config_json_gives_its_shape(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(QWEN3B))
    assert model_shape(str(tmp_path)) == ARCHITECTURES["Qwen/Qwen2.5-3B-Instruct"]
    (tmp_path / "config.json").write_text(json.dumps({"hidden_size": 8}))
    with pytest.raises(ValueError, match="config.json: no 'num_hidden_layers'"):
        model_shape(str(tmp_path))
    with pytest.raises(ValueError, match="--model 'nope'"):
        model_shape("nope")


def test_memory_by_hand_for_lora_and_full_fine_tune():
    s = Shape(hidden=64, layers=2, heads=2, kv_heads=1, intermediate=256, vocab=1000, tied=True)
    n = 1000 * 64 + 2 * (64 * 64 * 2 + 2 * 64 * 32 + 3 * 64 * 256 + 2 * 64) + 64
    assert s.parameters() == n
    full = memory_per_gpu(preset("smoke", **{"rollout.backend": "hf"}), s)
    assert (full["weights"], full["reference"], full["gradients+adam"]) == (4 * n, 4 * n, 12 * n)
    lora = memory_per_gpu(preset("smoke", **{"method.lora_rank": 8, "rollout.backend": "vllm"}), s,
                          a=Assumptions(gpu_memory_gib=80.0))
    r = 2 * 8 * ((64 + 64) * 2 + (64 + 32) * 2 + (64 + 256) * 2 + (256 + 64))
    assert s.lora_parameters(8) == r
    assert (lora["weights"], lora["reference"], lora["gradients+adam"]) == (2 * n, 0, 16 * r)
    # KV: 2 (k, v) x layers x kv_heads x head_dim x 2 bytes per token, batch x mean length
    cfg = preset("smoke")
    batch = cfg.method.chains_per_round * cfg.method.group_size
    kv = batch * min(1500, cfg.rollout.max_total_tokens) * 2 * 2 * 1 * 32 * 2
    assert full["kv cache the rollout batch needs"] == lora["kv cache the rollout batch needs"] == kv
    # the engine: HF holds the batch's KV cache; vLLM reserves rollout.vllm_memory of the GPU, whatever the batch
    assert full["rollout engine"] == kv and lora["rollout engine"] == int(cfg.rollout.vllm_memory * 80 * GIB)
    for m in (full, lora):
        beside = ("total", "kv cache", "rollout engine needs")  # reported beside the total, not in it
        assert m["total"] == sum(v for k, v in m.items() if not k.startswith(beside))
    assert full["rollout engine needs at least"] == 0 and lora["rollout engine needs at least"] == \
        2 * n + cfg.rollout.max_total_tokens * s.kv_bytes_per_token()


def test_a_dense_index_searched_on_the_gpu_counts_its_float16_vectors():
    shape = ARCHITECTURES["Qwen/Qwen2.5-3B-Instruct"]
    paper = preset("paper")
    assert paper.search.device == "auto"  # the paper preset searches on the GPU when one is visible
    assert memory_per_gpu(paper, shape, passages=21_000_000)["dense index (search.device)"] == 21_000_000 * 768 * 2
    on_cpu = preset("paper", **{"search.device": "cpu"})
    assert memory_per_gpu(on_cpu, shape, passages=21_000_000)["dense index (search.device)"] == 0
    served = preset("paper", **{"search.url": "http://localhost:8000/retrieve"})
    assert memory_per_gpu(served, shape, passages=21_000_000)["dense index (search.device)"] == 0


def test_more_gpus_split_the_batch_and_the_token_work():
    cfg, shape = preset("paper-7b"), ARCHITECTURES["Qwen/Qwen2.5-7B-Instruct"]
    one, eight = time_per_round(cfg, shape, 1), time_per_round(cfg, shape, 8)
    assert eight["update"] == pytest.approx(one["update"] / 8)
    assert memory_per_gpu(cfg, shape, 8)["weights"] == memory_per_gpu(cfg, shape, 1)["weights"]
    kv = "kv cache the rollout batch needs"
    assert memory_per_gpu(cfg, shape, 8)[kv] < memory_per_gpu(cfg, shape, 1)[kv]
    # the update's FLOPs: (4 + 2) x N per token for LoRA at the assumed share of peak
    a = Assumptions()
    tokens = 64 * 8 * a.mean_tokens
    assert one["update"] == pytest.approx(tokens * 6 * shape.parameters() / (a.peak_tflops * 1e12 * a.mfu))
    # one step a round: the reference's forward only (the step's old log-probs are its own); 4 steps with
    # vLLM: the old log-probs of the last 3 steps' rows too; HF's come from generation
    forward = tokens * 2 * shape.parameters() / (a.peak_tflops * 1e12 * a.mfu)
    assert one["old and reference log-probs"] == pytest.approx(forward)
    four = {"method.minibatches": 4}
    vllm_four = time_per_round(preset("paper-7b", **four), shape)
    assert vllm_four["old and reference log-probs"] == pytest.approx(1.75 * forward)
    hf = preset("paper-7b", **four, **{"rollout.backend": "hf"})
    assert time_per_round(hf, shape)["old and reference log-probs"] == pytest.approx(forward)
    with pytest.raises(ValueError, match="--gpus 0"):
        plan(cfg, "/nonexistent.duckdb", gpus=0)


def test_generation_is_a_roofline_of_the_decode_step_in_waves_when_the_kv_cache_overflows(tmp_path):
    shape = ARCHITECTURES["meta-llama/Llama-3.1-8B-Instruct"]
    cfg, a = preset("paper-8b"), Assumptions()
    kv = 2 * 32 * 8 * 128 * 2  # 128 KiB a token: k and v x layers x KV heads x head_dim x bf16
    assert shape.kv_bytes_per_token() == kv
    needed, held = kv_cache(cfg, shape, 1, a)
    assert needed == 64 * 8 * 1500 * kv
    assert held == int(0.3 * a.gpu_memory_gib * GIB) - 2 * shape.parameters() - ENGINE_OVERHEAD
    rows, at_once = rows_at_once(cfg, shape, 1, a)
    assert (rows, at_once) == (512, held // (1500 * kv)) and at_once == 130  # 4 waves: 3 x 130 and 122
    # a decode step reads the weights and the in-flight rows' KV cache at half their length
    step = lambda active: 2 * shape.parameters() + active * 750 * kv  # noqa: E731
    by_hand = 450 * (3 * step(130) + step(122)) / (4.8e12 * 0.4)
    assert generation_seconds(shape, 512, 450, 1500, 130, a) == pytest.approx(by_hand)
    assert time_per_round(cfg, shape, 1, a)["solver rollouts"] == pytest.approx(by_hand + 8 * a.search_s)
    # more steps but each cheaper: slower than holding every row, faster than 4 x the whole batch's step
    whole = generation_seconds(shape, 512, 450, 1500, 512, a)
    assert whole < by_hand < 4 * whole
    # the share that holds the batch, rounded up to 0.05, and the plan's line that says so
    share = vllm_memory_for_batch(cfg, shape, 1, a)
    bigger = preset("paper-8b", **{"rollout.vllm_memory": share})
    assert share == 0.8 and rows_at_once(bigger, shape, 1, a) == (512, 512)
    p = plan(cfg, tmp_path / "none.duckdb", gpus=1, a=a)
    total = p["memory_per_gpu"]["total"] - p["memory_per_gpu"]["rollout engine"] + int(0.8 * a.gpu_memory_gib * GIB)
    assert (p["rollout_rows"], p["rollout_rows_at_once"], p["total_with_it"]) == (512, 130, total)
    assert "holds 130 of the 512 rollout rows at once: they generate in 4 waves" in format_plan(p)
    assert "rollout.vllm_memory=0.80" in format_plan(p)
    # 8 GPUs split the batch: each engine holds its 64 rows; the HF backend holds whatever the batch needs
    assert rows_at_once(cfg, shape, 8, a) == (64, 64)
    assert "vllm_memory_for_batch" not in plan(cfg, tmp_path / "n", gpus=8)
    hf = preset("paper-8b", **{"rollout.backend": "hf"})
    assert kv_cache(hf, shape, 1, a) == (needed, needed) and rows_at_once(hf, shape, 1, a) == (512, 512)


def _inputs(tmp_path):
    """A model folder, an encoder folder and a store holding everything the paper tier reads."""
    model, encoder = tmp_path / "model", tmp_path / "e5-base-v2"
    model.mkdir()
    encoder.mkdir()
    (model / "config.json").write_text(json.dumps(QWEN3B))
    (encoder / "modules.json").write_text("[]")
    db = tmp_path / "paper.duckdb"
    con = store.connect(db)
    con.execute("INSERT INTO entities VALUES (1, 'A', 'x', 'entity', 't'), (2, 'B', 'x', 'entity', 't')")
    con.execute("INSERT INTO passages VALUES (1, 1, 0, 'A links B.'), (2, 2, 0, 'B.')")
    con.execute("INSERT INTO edges VALUES (1, 2, 'links', 't')")
    rows = [(i, d, s, None, "Q?", ["A"], [], 1, "t") for i, (d, s) in enumerate(
        [("nq_hotpotqa", "seed"), ("nq_hotpotqa", "val"), ("nq", "test")])]
    con.executemany("INSERT INTO questions VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
    con.close()
    return model, encoder, db


def test_check_inputs_names_what_is_missing(tmp_path):
    model, encoder, db = _inputs(tmp_path)
    cfg = preset("paper", **{"search.dense_model": str(encoder)})
    checks = {c.name: c for c in check_inputs(cfg, db, str(model), datasets=("nq", "popqa"))}
    assert checks["model"].ok and checks["dense encoder"].ok and checks["entities (knowledge source)"].ok
    assert checks["seed pool"].ok and checks["validation split"].ok and checks["test set nq"].ok
    assert not checks["test set popqa"].ok and "popqa/test: 0 questions" in checks["test set popqa"].detail
    assert not checks["chain pool G_0"].ok  # no walks yet: workbench pool
    assert not check_inputs(cfg, tmp_path / "none.duckdb", str(model))[-1].ok


def test_cli_plan_exit_status_and_output(tmp_path, capsys):
    model, encoder, db = _inputs(tmp_path)
    con = store.connect(db)
    con.execute("INSERT INTO chains (chain_id, hash, hops) VALUES (1, 'h', 2)")
    con.close()
    args = ["plan", "--preset", "paper", "--db", str(db), "--model", str(model), "--dataset", "nq",
            "--set", f"search.dense_model={encoder}"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "MISSING" not in out and "3.09B parameters" in out and "memory per GPU (estimate)" in out
    assert main(args + ["--dataset", "bamboogle"]) == 1
    assert "[MISSING] test set bamboogle" in capsys.readouterr().out
    assert main(args + ["--json", "--gpus", "8", "--gpu-memory-gib", "139.8"]) == 0  # not the test machine's GPU
    p = json.loads(capsys.readouterr().out)
    assert p["gpus"] == 8 and p["memory_per_gpu"]["total"] / GIB < 141 and p["rounds"] == 314 and p["fits"]
    assert main(args + ["--gpu-memory-gib", "40"]) == 0  # vLLM's 0.3 of 40 GiB leaves room for the 3B trainer
    assert "fits a GPU of 40.0 GiB" in capsys.readouterr().out
    assert main(args + ["--gpu-memory-gib", "16"]) == 0
    assert "DOES NOT FIT a GPU of 16.0 GiB" in capsys.readouterr().out
    eight_b = ["plan", "--preset", "paper-8b", "--db", str(db), "--dataset", "nq",
               "--set", f"search.dense_model={encoder}"]
    assert main(eight_b + ["--gpu-memory-gib", "40", "--json"]) == 1  # no 8B folder here: MISSING, but planned
    p = json.loads(capsys.readouterr().out)  # 0.3 of 40 GiB under 8B's 15 GiB of weights: vLLM would not start
    assert p["memory_per_gpu"]["total"] / GIB < 40 and not p["fits"]
    assert main(args + ["--gpu-memory-gib", "0"]) != 0
    assert "--gpu-memory-gib 0.0: expected a number > 0" in capsys.readouterr().err
    assert main(args + ["--decode-efficiency", "1.5"]) != 0
    assert "--decode-efficiency 1.5: expected a share in (0, 1]" in capsys.readouterr().err
    runs = []
    for more in ([], ["--decode-efficiency", "0.2", "--hbm-tb-s", "3.35"]):  # an H100's bandwidth
        assert main(args + ["--json", "--gpu-memory-gib", "139.8"] + more) == 0
        runs.append(json.loads(capsys.readouterr().out))
    assert runs[1]["assumptions"]["hbm_tb_s"] == 3.35 and runs[1]["hours_per_run"] > runs[0]["hours_per_run"]
    assert runs[1]["seconds_per_round"]["update"] == runs[0]["seconds_per_round"]["update"]  # decoding alone


# ---------------------------------------------------------------- issue 44: checkpointing and calibration

def test_checkpointing_follows_the_runs_setting_in_memory_and_time():
    shape, a = ARCHITECTURES["Qwen/Qwen2.5-3B-Instruct"], Assumptions(gpu_memory_gib=139.8)
    runs = {mode: preset("paper", **{"method.gradient_checkpointing": mode}) for mode in ("off", "standard", "offload")}
    key = "activations (checkpointing {})"
    mem = {mode: memory_per_gpu(cfg, shape, a=a)[key.format(mode)] for mode, cfg in runs.items()}
    time = {mode: time_per_round(cfg, shape, a=a)["update"] for mode, cfg in runs.items()}
    # no recompute keeps every block's activations and saves the recomputed forward (2 N of 6 N a token)
    assert mem["off"] > 5 * mem["standard"] > 5 * mem["offload"]
    assert mem["standard"] - mem["offload"] == 4 * 4096 * shape.hidden * 2 * shape.layers  # the block inputs, on CPU
    assert time["off"] == pytest.approx(time["standard"] * 4 / 6) and time["offload"] == time["standard"]
    assert memory_per_gpu(runs["off"], shape, a=a)["total"] > memory_per_gpu(runs["standard"], shape, a=a)["total"]
    # validation every k-th round (method.val_every) costs a round 1/k of it
    every = time_per_round(preset("paper", **{"method.val_every": 4}), shape, a=a)["validation"]
    assert every == pytest.approx(time_per_round(runs["off"], shape, a=a)["validation"] / 4)


def test_auto_is_decided_by_the_updates_own_function(monkeypatch):
    from workbench.plan import checkpointing
    from workbench.policy import checkpointing as policy_checkpointing

    shape, a = ARCHITECTURES["Qwen/Qwen2.5-3B-Instruct"], Assumptions(gpu_memory_gib=139.8)
    cfg = preset("paper")  # auto; a micro-batch of 4 x 4,096 tokens: ~59 GiB of activations
    free = int(139.8 * GIB - 0.3 * 139.8 * GIB - 2 * shape.parameters())  # after vLLM's share and the weights
    want = policy_checkpointing.choose("auto", "cuda", SimpleNamespace(hidden_size=2048, intermediate_size=11008,
                                                                       num_hidden_layers=36), 4 * 4096, free)
    assert checkpointing(cfg, shape, a) == want == "standard"
    assert "activations (checkpointing standard)" in memory_per_gpu(cfg, shape, a=a)
    assert checkpointing(preset("paper", **{"method.micro_batch": 1}), shape, a) == "off"
    monkeypatch.setattr(policy_checkpointing, "HEADROOM", 0.99)  # the update's rule moves: the plan's with it
    assert checkpointing(cfg, shape, a) == "off"
    assert time_per_round(cfg, shape, a=a)["update"] < time_per_round(preset("paper", **{
        "method.gradient_checkpointing": "standard"}), shape, a=a)["update"]


def _bench_round(**round_fields):
    """A `bench gpu --parts round` document at the 3B shape (the layout bench_round writes)."""
    doc = {"shape": "qwen2.5-3b", "gpu_memory_gib": 139.8, "round": {
        "preset": "tiny", "overrides": {"method.chains_per_round": 64, "method.group_size": 5, "rollout.max_turns": 8,
                                        "method.lora_rank": 16, "rollout.backend": "vllm", "rollout.max_new_tokens": 500,
                                        "rollout.max_total_tokens": 4096, "method.micro_batch": 8,
                                        "rollout.vllm_memory": 0.35, "method.minibatches": 1},
        "stages_s": {"proposer_gate": 15.0, "rollouts": 200.0, "rewards": 3.0, "update": 400.0, "sync": 1.0,
                     "write_back": 2.0},
        "rollouts_split_s": {"generate": 180.0, "retrieve": 16.0}, "checkpointing": "standard", "searches": 900,
        "trajectory_tokens_mean": 3000, "generated_tokens_mean": 1200, "peak_gib": 62.0}}
    doc["round"].update(round_fields)
    return doc


def test_calibration_fitted_from_a_bench_json_reproduces_its_figures(tmp_path, capsys):
    from workbench import plan_calibration as pc

    bench = _bench_round()
    (round_,) = pc.parse(bench, "b.json")
    before = pc.estimate(round_, Assumptions())
    # far from the defaults' estimates, so a fit that is ignored fails below
    for figure in ("update (s)", "solver generation (s)", "solver retrieval (s)", "other stages (s)"):
        assert abs(before[figure] / round_.figures[figure] - 1) > 0.15
    a, fits = pc.fit([round_])
    assert [f.constant for f in fits] == ["mfu", "decode_efficiency", "search_s", "other_stages_s",
                                          "proposer_overhead_s"]
    assert all(f.sources == ("b.json: round (standard) " + s,) for f, s in zip(fits, (
        "update stage", "solver generation", "solver retrieval", "stages not modelled (rewards, write-back, sync)",
        "proposer stage beyond its generation")))
    after = pc.estimate(round_, a)
    for figure in ("update (s)", "solver generation (s)", "solver retrieval (s)", "other stages (s)", "rollouts (s)",
                   "proposer_gate (s)", "round (s)", "round peak (GiB)"):
        assert after[figure] == pytest.approx(round_.figures[figure], rel=0.15), figure
    assert a.search_s == pytest.approx(16.0 / 8) and a.other_stages_s == pytest.approx(6.0)
    # an update step without checkpointing fits the activations' share from its peak
    steps = {"shape": "qwen2.5-3b", "update": {"batch": 8, "tokens_per_row": 1024, "lora_rank": 16, "variants": [
        {"variant": "auto", "checkpointing": "off", "packed": False, "step_s": 0.9, "peak_gib": 20.0},
        {"variant": "auto+packed", "checkpointing": "off", "packed": True, "step_s": 0.5, "peak_gib": 19.0}]}}
    (step,) = pc.parse(steps, "u.json")  # the packed variant: not modelled, skipped
    a_step, fits = pc.fit([step])
    assert [f.constant for f in fits] == ["mfu", "activation_share"]
    assert pc.estimate(step, Assumptions())["update step peak (GiB)"] > 1.15 * 20.0
    for figure, value in pc.estimate(step, a_step).items():
        assert value == pytest.approx(step.figures[figure], rel=0.01)
    # the command: constants printed with their sources, the plan run with them
    path = tmp_path / "bench.json"
    path.write_text(json.dumps(bench))
    args = ["plan", "--preset", "paper", "--db", str(tmp_path / "none.duckdb"), "--gpu-memory-gib", "139.8"]
    main(args + ["--json"])
    plain = json.loads(capsys.readouterr().out)
    main(args + ["--json", "--calibrate", str(path)])
    p = json.loads(capsys.readouterr().out)
    assert p["assumptions"]["mfu"] == pytest.approx(a.mfu) and p["assumptions"]["search_s"] == pytest.approx(2.0)
    assert p["seconds_per_round"]["update"] == pytest.approx(plain["seconds_per_round"]["update"] * 0.24 / a.mfu)
    assert all(abs(r["difference"]) < 0.15 for r in p["calibration"]["measured_vs_plan"])
    # --check: another measurement compared, not fitted (here one whose update took twice as long)
    slower = tmp_path / "slower.json"
    slower.write_text(json.dumps(_bench_round(stages_s={**bench["round"]["stages_s"], "update": 800.0})))
    main(args + ["--json", "--calibrate", str(path), "--check", str(slower)])
    p = json.loads(capsys.readouterr().out)
    assert p["assumptions"]["mfu"] == pytest.approx(a.mfu)
    (held,) = [r for r in p["calibration"]["measured_vs_plan"] if r.get("held_out") and r["figure"] == "update (s)"]
    assert held["difference"] == pytest.approx(-0.5)
    assert main(args + ["--check", str(slower)]) == 2
    assert "--check: compares measurements with a calibrated plan; give --calibrate" in capsys.readouterr().err
    main(args + ["--calibrate", str(path), "--mfu", "0.5"])  # a flag still overrides a fitted constant
    out = capsys.readouterr().out
    assert f"mfu = {a.mfu:.4g}  from {path}: round (standard) update stage" in out and "mfu=0.5," in out


def test_the_shipped_3b_calibration_reproduces_its_measurements():
    from pathlib import Path

    from workbench import plan_calibration as pc

    files = sorted(Path(__file__).parents[1].glob("data/reference/bench_h200_*.json"))
    measured = [m for f in files for m in pc.read(f)]
    a, fits = pc.fit(measured)
    assert {f.constant for f in fits} == {"mfu", "decode_efficiency", "other_stages_s", "proposer_overhead_s",
                                          "activation_share"}
    rows = {(Path(r["file"]).name, r["what"], r["figure"]): r["difference"] for r in pc.compare(measured, a)}
    assert abs(rows["bench_h200_round3b_session19.json", "round (offload)", "round (s)"]) < 0.15
    auto = "update auto (chose off) (off)"
    assert abs(rows["bench_h200_update3b_session23.json", auto, "update step peak (GiB)"]) < 0.01
    offload = "update main before issue 44 (Unsloth's offload) (offload)"
    assert abs(rows["bench_h200_update3b_session23.json", offload, "update step peak (GiB)"]) < 0.15


@pytest.mark.parametrize("change, message", [
    (lambda d: d.update(shape="qwen-9b"), "bad.json: shape: expected one of"),
    (lambda d: d["round"].pop("trajectory_tokens_mean"), "bad.json: round.trajectory_tokens_mean (missing): expected"),
    (lambda d: d["round"].update(checkpointing="auto"), "bad.json: round.checkpointing: expected one of"),
    (lambda d: d["round"]["stages_s"].pop("update"), "bad.json: round.stages_s.update (missing): expected a number"),
    (lambda d: d["round"].update(generated_tokens_mean=5000), "bad.json: round.generated_tokens_mean: expected"),
    (lambda d: d["round"]["overrides"].update({"method.nope": 1}), "bad.json: round.preset / round.overrides:"),
    (lambda d: d.pop("round"), "bad.json: update / round: expected the part"),
])
def test_a_bad_calibration_file_is_one_line_naming_the_file_and_the_field(tmp_path, capsys, change, message):
    doc = _bench_round()
    change(doc)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    assert main(["plan", "--preset", "paper", "--db", str(tmp_path / "n.duckdb"), "--calibrate", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert message.replace("bad.json", str(bad)) in err and len(err.splitlines()) == 1, err
    bad.write_text("{not json")
    assert main(["plan", "--preset", "paper", "--db", str(tmp_path / "n.duckdb"), "--calibrate", str(bad)]) == 2
    assert f"--calibrate {bad}: not JSON (line 1" in capsys.readouterr().err
