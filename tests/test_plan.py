"""``workbench plan``: input checks on real stores and folders, and the estimates' arithmetic (issue 16)."""

from __future__ import annotations

import json

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
