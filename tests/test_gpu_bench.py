"""``workbench bench gpu`` (issue 14): its arithmetic, argument handling and JSON shape on the CPU.
The measurements themselves need a CUDA device (LOG.md records them)."""

from __future__ import annotations

import json
import re

import pytest
import torch

from workbench.bench import gpu as gb
from workbench.bench import shapes
from workbench.cli import main


def test_param_count_matches_the_built_model_and_the_published_sizes():
    model = gb.random_model(shapes.SHAPES["tiny-test"], "cpu", torch.float32)
    assert shapes.param_count(shapes.SHAPES["tiny-test"]) == sum(p.numel() for p in model.parameters())
    sizes = {name: round(shapes.param_count(spec) / 1e9, 2) for name, spec in shapes.SHAPES.items() if name != "tiny-test"}
    assert sizes == {"qwen2.5-3b": 3.09, "qwen2.5-7b": 7.62, "llama-3.1-8b": 8.03}


def test_roofline_and_tflops_reproduce_the_issues_figures():
    roof = shapes.decode_roofline(shapes.SHAPES["qwen2.5-3b"], batch=256, prompt_tokens=512, new_tokens=256)
    assert 95_000 < roof["tokens_per_s"] < 105_000  # issue 14: "~100k tokens/s"
    assert roof["step_bytes"] == roof["weight_bytes"] + roof["kv_bytes"]
    assert shapes.kv_bytes_per_token(shapes.SHAPES["qwen2.5-3b"]) == 2 * 36 * 2 * 128 * 2
    # Unsloth's 0.36 s step at 8 x 1,024 tokens: ~53% of the measured 790 TFLOP/s
    assert shapes.step_tflops(shapes.SHAPES["qwen2.5-3b"], 8 * 1024, 0.36) / 790 == pytest.approx(0.53, abs=0.01)


@pytest.mark.parametrize("argv, message", [
    ([], "no CUDA device here"),
    (["--device", "cpu"], "only --shape tiny-test"),
    (["--shape", "gpt-5", "--device", "cpu"], "--shape 'gpt-5': expected one of"),
    (["--device", "tpu"], "--device 'tpu'"),
    (["--device", "cpu", "--shape", "tiny-test", "--batch", "0"], "--batch 0: expected an integer >= 1"),
    (["--device", "cpu", "--shape", "tiny-test", "--lora-rank", "-1"], "--lora-rank -1: expected an integer >= 0"),
])
def test_bench_gpu_refuses_clearly(argv, message, capsys):
    if torch.cuda.is_available() and not argv:
        pytest.skip("this machine has CUDA")
    assert main(["bench", "gpu", *argv]) == 2
    assert message in capsys.readouterr().err


def test_bench_gpu_json_shape_on_the_cpu_at_a_tiny_shape(tmp_path, capsys):
    from workbench import store
    from workbench.config import preset
    from workbench.method.train import ensure_world
    from workbench.policy.warmstart import warmstart

    db = tmp_path / "smoke.duckdb"
    con = store.connect(db)
    ensure_world(con, preset("smoke"))
    model = warmstart(con, preset=preset("smoke"), seed=0, log=None)
    con.close()
    r = gb.bench_gpu("tiny-test", device="cpu", engines=["hf", "vllm"], batch=2, prompt_tokens=4, new_tokens=3,
                     lora_rank=2, update_batch=2, update_tokens=8, update_steps=1, model=str(model), db=str(db),
                     preset="smoke", overrides={"method.minibatches": 2}, parts=["generation", "update", "loop", "round"])
    assert sorted(r) == ["device", "dtype", "generation", "goals", "gpu_memory_gib", "loop", "params", "round", "shape",
                         "unsloth_import", "update"]
    hf = r["generation"]["engines"]["hf"]
    assert hf["tokens"] == 2 * 3 and hf["tokens_per_s"] > 0 and 0 < hf["roofline_share"] < 1
    if "skipped" in r["generation"]["engines"]["vllm"]:  # CPU machines: the import error, shown as it is
        assert "needs vLLM" in r["generation"]["engines"]["vllm"]["skipped"]
    upd = r["update"]
    assert upd["trainer"] == "peft" and upd["step_s"] > 0 and upd["reference_s"] > 0 and upd["old_logprobs_s"] > 0
    assert upd["peak_gib"] is None
    loop = r["loop"]["engines"]["hf"]  # rollout() on the random tiny-test model with the smoke tokenizer, padded
    assert loop["generated_tokens"] > 0 and loop["tokens_per_s"] > 0 and loop["mean_turns"] >= 1
    assert r["round"]["model"] != str(model)  # the random shape's folder, not the warm start
    rnd = r["round"]
    assert {"proposer_gate", "rollouts", "rewards", "update", "sync", "write_back"} <= set(rnd["stages_s"])
    assert rnd["s_per_optimiser_step"] == pytest.approx(rnd["round_s"] / 2)
    split = rnd["rollouts_split_s"]  # the rollouts stage's wall time, generation and retrieval
    assert split["generate"] > 0 and split["retrieve"] >= 0  # a random tiny model seldom writes a search call
    assert split["generate"] + split["retrieve"] <= rnd["stages_s"]["rollouts"]
    assert set(r["goals"].values()) == {None}  # the goals are stated for the 3B shape
    # what `workbench plan --calibrate` reads (issue 44): the round's tokens and checkpointing mode as chosen
    assert rnd["checkpointing"] == "off" and rnd["trajectories"] == 2 * 4 and rnd["searches"] >= 0
    assert rnd["trajectory_tokens_mean"] > rnd["generated_tokens_mean"] > 0  # the prompt is in the first
    assert r["gpu_memory_gib"] is None  # the CPU: the plan keeps its own
    from workbench import plan_calibration as pc

    bench = tmp_path / "bench.json"
    bench.write_text(json.dumps(r))
    assert main(["plan", "--preset", "paper", "--db", str(db), "--calibrate", str(bench)]) == 1  # no 3B model here
    out = capsys.readouterr().out
    assert "no measurement at the planned model's shape" in out and "  mfu = " in out and "decode_efficiency = " in out
    measured = pc.read(bench)
    assert [m.kind for m in measured] == ["update", "round"]
    a, _ = pc.fit(measured[1:])
    for row in pc.compare(measured[1:], a):  # the fitted figures come back as measured, at the tiny shape too
        if row["figure"] in ("update (s)", "solver generation (s)", "other stages (s)"):
            assert row["plan"] == pytest.approx(row["measured"], rel=0.15)


def test_the_command_prints_the_json(capsys):
    import json

    argv = ["bench", "gpu", "--device", "cpu", "--shape", "tiny-test", "--engines", "hf", "--batch", "2",
            "--prompt-tokens", "4", "--new-tokens", "2", "--lora-rank", "0", "--update-batch", "2",
            "--update-tokens", "8", "--update-steps", "1"]
    assert main(argv) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["update"]["trainer"] == "full" and r["generation"]["engines"]["hf"]["tokens"] == 4
    assert set(r) == {"device", "dtype", "generation", "goals", "gpu_memory_gib", "params", "shape", "unsloth_import",
                      "update"}


def test_paper_shape_folder_pads_the_tokenizer_to_the_shapes_vocabulary(tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from workbench.config import preset
    from workbench.policy.model import Policy, tiny_model
    from workbench.policy.tokenizer import train_tokenizer

    tok = train_tokenizer(["some text about rome and paris"] * 5, vocab_size=300)
    Policy(tiny_model(preset("smoke").backbone, tok, 0), tok).save(tmp_path / "small")
    folder = gb.paper_shape_folder("tiny-test", tmp_path / "small", tmp_path / "shape")
    padded = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder)
    assert len(padded) == model.config.vocab_size == shapes.SHAPES["tiny-test"]["vocab_size"]
    assert padded("rome")["input_ids"] == tok("rome")["input_ids"]  # the original tokens keep their ids
    assert padded.decode([len(tok)]) == "<|pad0|>" and model.config.eos_token_id == tok.eos_token_id
    with pytest.raises(ValueError, match="more than tiny-test's vocabulary"):
        gb.paper_shape_folder("tiny-test", _bigger(tmp_path, tok), tmp_path / "again")


def _bigger(tmp_path, tok):
    """A tokenizer folder with more tokens than tiny-test's 1,024."""
    tok.add_tokens([f"<|x{i}|>" for i in range(1100)])
    tok.save_pretrained(tmp_path / "big")
    return tmp_path / "big"


def test_parts_are_checked(capsys):
    with pytest.raises(ValueError, match="--parts"):
        gb.bench_gpu("tiny-test", device="cpu", parts=["gen"])
    with pytest.raises(ValueError, match="need --model"):
        gb.bench_gpu("tiny-test", device="cpu", parts=["loop"])


def test_bench_gpu_makes_its_policies_by_the_runs_recipe_without_writing_weights(tmp_path, monkeypatch):
    """``bench gpu --parts update`` and a run share ``train.make_policies`` (full fine-tune: two
    float32 models; LoRA: one base at the given dtype with adapters, no separate reference); the
    bench's random model never goes to disk (off Unsloth)."""
    import tempfile

    from workbench.method.train import make_policies
    from workbench.policy.model import Policy
    from workbench.policy.tokenizer import train_tokenizer

    tok = train_tokenizer(["bench tokens"] * 5, vocab_size=300)
    spec = shapes.SHAPES["tiny-test"]
    calls = []

    def load(dtype, role):
        calls.append((role, dtype))
        return Policy(gb.random_model(spec, "cpu", dtype), tok, device="cpu")
    policy, reference = make_policies(load, 0, 0, 0, torch.bfloat16)
    assert calls == [("policy", torch.float32), ("reference", torch.float32)] and reference is not policy
    calls.clear()
    policy, reference = make_policies(load, 2, 4, 0, torch.bfloat16)
    assert calls == [("policy", torch.bfloat16)] and reference is None and policy.is_lora
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where a temporary save would go
    monkeypatch.chdir(tmp_path)
    for rank, kind in ((0, "full"), (2, "peft")):
        policy, reference, trainer = gb._update_policies(spec, "cpu", torch.bfloat16, rank, tok)
        dtypes = {p.dtype for p in policy.model.parameters() if not p.requires_grad or rank == 0}
        assert trainer == kind and (reference is None) == bool(rank) and dtypes == {torch.float32 if not rank
                                                                                    else torch.bfloat16}
    assert not any(tmp_path.iterdir())


def test_the_update_bench_times_the_trainers_own_step(monkeypatch):
    """Issue 41: ``bench gpu``'s update part runs ``update.PolicyStep`` (the trainer's step), not a
    copy of it that could drift from what the round runs."""
    from workbench.method.update import PolicyStep

    calls = []
    real = PolicyStep.__call__

    def counted(self, t, rows, advantages, **kwargs):
        calls.append((len(rows), sum(len(r.response_ids) for r in rows)))
        return real(self, t, rows, advantages, **kwargs)

    monkeypatch.setattr(PolicyStep, "__call__", counted)
    upd = gb.bench_update(shapes.SHAPES["tiny-test"], "cpu", torch.float32, 2, 3, 8, 2)
    assert calls == [(3, 3 * 6)] * 3  # one warm-up and two timed steps, 3 rows of 8 tokens (2 of prompt)
    assert upd["step_s"] > 0 and 0 < upd["reference_s"] < upd["step_s"] and upd["trainer"] == "peft"


def test_the_update_bench_times_each_variant_packed_and_padded():
    """Issue 44: one timing per ``MODE[+packed]`` variant on the same rows; with varied lengths the
    packed forward runs over fewer tokens than the padded one, the same real tokens, and its
    log-probs equal the padded ones on the batch."""
    upd = gb.bench_update(shapes.SHAPES["tiny-test"], "cpu", torch.float32, 2, 6, 16, 1,
                          variants=("auto+packed", "standard"), lengths="varied")
    padded, packed = sorted(upd["variants"], key=lambda r: r["packed"])
    assert [r["variant"] for r in upd["variants"]] == ["auto+packed", "standard"]
    assert upd["step_s"] == packed["step_s"] and upd["packed"] is True  # the first variant's figures
    assert (padded["checkpointing"], packed["checkpointing"]) == ("standard", "off")  # auto: off on the CPU
    assert padded["real_tokens"] == packed["real_tokens"] < packed["forward_tokens"] < padded["forward_tokens"]
    assert 0 < packed["loss_tokens"] < packed["real_tokens"] and padded["mfu_6nt"] is None
    assert packed["max_abs_logprob_diff_vs_padded"] < 1e-4 and "max_abs_logprob_diff_vs_padded" not in padded
    with pytest.raises(ValueError, match=re.escape("--update-variants 'auto+fast': expected MODE or MODE+packed")):
        gb.bench_update(shapes.SHAPES["tiny-test"], "cpu", torch.float32, 2, 2, 8, 1, variants=("auto+fast",))


def test_the_update_bench_records_what_it_cannot_run_here(capsys):
    """The GPU-only rows of ``bench gpu --parts update`` on this CPU: Unsloth's offloading variant and
    its standalone step are recorded as skipped, with why; the other variants still run."""
    import json

    argv = ["bench", "gpu", "--device", "cpu", "--shape", "tiny-test", "--parts", "update", "--lora-rank", "2",
            "--update-batch", "2", "--update-tokens", "8", "--update-steps", "1", "--update-variants", "offload",
            "auto", "--unsloth-standalone"]
    assert main(argv) == 0
    upd = json.loads(capsys.readouterr().out)["update"]
    ran, skipped = upd["variants"]  # offload last (Unsloth's offloading patches process-wide)
    assert skipped == {"variant": "offload", "skipped": skipped["skipped"]} and "offload is Unsloth's" in skipped["skipped"]
    assert ran["variant"] == "auto" and ran["step_s"] > 0 and "step_s" not in upd  # the first variant did not run
    assert upd["unsloth_standalone"] == {"skipped": "ModuleNotFoundError: No module named 'unsloth'"}
