"""The GPU engine's CPU-testable parts (issue 14): backend selection, the chunked log-prob gather,
the old-policy log-probs from the trainer's forward, and LoRA training with adapter-only checkpoints."""

from __future__ import annotations

import sys

import pytest
import torch

from workbench import store
from workbench.config import preset
from workbench.policy import generation, lora
from workbench.policy import model as model_mod
from workbench.policy.generation import HFBackend, make_backend, resolve_backend
from workbench.policy.model import Policy, gather_logprobs, tiny_model
from workbench.policy.tokenizer import train_tokenizer


@pytest.fixture(scope="module")
def tok():
    return train_tokenizer(["some text with a few more words in it"] * 20, vocab_size=300)


@pytest.fixture
def policy(tok):
    return Policy(tiny_model(preset("smoke").backbone, tok, 0), tok, device="cpu")


# -- backend selection ------------------------------------------------------------------------

def test_auto_is_hf_on_the_cpu_and_vllm_on_cuda_when_installed(monkeypatch):
    assert resolve_backend("auto", "cpu") == "hf"
    monkeypatch.setattr(generation.importlib.util, "find_spec", lambda name: object() if name == "vllm" else None)
    assert resolve_backend("auto", "cuda:0") == "vllm"
    assert resolve_backend("hf", "cuda:0") == "hf"
    monkeypatch.setattr(generation.importlib.util, "find_spec", lambda name: None)
    assert resolve_backend("auto", "cuda:0") == "hf"


def test_policy_load_builds_the_configured_backend(policy, tmp_path):
    policy.save(tmp_path / "m")
    settings = generation.backend_settings(preset("smoke").rollout)
    loaded = Policy.load(tmp_path / "m", device="cpu", **settings)
    assert isinstance(loaded.backend, HFBackend) and loaded.backend.model is loaded.model
    assert loaded.backend.trainer_logprobs


def test_a_missing_vllm_shows_its_own_import_error(monkeypatch, policy, tmp_path):
    monkeypatch.setitem(sys.modules, "vllm", None)  # what Python raises for a package that is not there
    policy.save(tmp_path / "m")
    with pytest.raises(ImportError) as err:
        Policy.load(tmp_path / "m", device="cpu", backend="vllm")
    text = str(err.value)
    assert "rollout.backend='vllm' needs vLLM" in text and "import of vllm halted" in text
    assert isinstance(err.value.__cause__, ImportError)


def test_make_backend_names_the_parameter():
    with pytest.raises(ValueError, match="rollout.backend='tgi'"):
        make_backend("tgi", None, None)


# -- the chunked log-prob gather ----------------------------------------------------------------

@pytest.mark.parametrize("chunk", [1, 7, 40])
def test_chunked_gather_equals_the_full_computation(chunk):
    torch.manual_seed(0)
    vocab = 13
    head = torch.nn.Linear(6, vocab)
    hidden = torch.randn(3, 8, 6, requires_grad=True)
    targets = torch.randint(0, vocab, (3, 7))
    full_lp, full_ent = gather_logprobs(hidden, head, targets, with_entropy=True)
    full_lp.sum().backward()
    grads = [hidden.grad.clone(), head.weight.grad.clone()]
    hidden.grad, head.weight.grad = None, None
    lp, ent = gather_logprobs(hidden, head, targets, with_entropy=True, chunk_elements=chunk * vocab)
    lp.sum().backward()
    reference = torch.log_softmax(head(hidden)[:, :-1].float(), -1).gather(-1, targets[..., None]).squeeze(-1)
    assert torch.allclose(full_lp, reference) and torch.allclose(lp, full_lp, atol=1e-6)
    assert torch.allclose(ent, full_ent, atol=1e-6)
    assert torch.allclose(hidden.grad, grads[0], atol=1e-6) and torch.allclose(head.weight.grad, grads[1], atol=1e-6)


def test_token_logprobs_chunked_equals_unchunked(policy, monkeypatch):
    ids = torch.randint(3, len(policy.tokenizer), (3, 9))
    mask = torch.ones_like(ids)
    mask[0, :2] = 0  # left padding
    whole, whole_ent = policy.token_logprobs(ids, mask, entropy_mask=mask)
    whole.sum().backward()
    grads = [p.grad.clone() for p in policy.model.parameters()]
    policy.model.zero_grad()
    monkeypatch.setattr(model_mod, "LOGPROB_CHUNK_ELEMENTS", 4 * len(policy.tokenizer))  # 4 positions a chunk
    parts, parts_ent = policy.token_logprobs(ids, mask, entropy_mask=mask)
    parts.sum().backward()
    assert torch.allclose(parts, whole, atol=1e-6) and torch.allclose(parts_ent, whole_ent, atol=1e-6)
    assert all(torch.allclose(p.grad, g, atol=1e-6) for p, g in zip(policy.model.parameters(), grads))


def test_a_head_with_extras_uses_the_models_own_logits(policy):
    ids = torch.randint(3, len(policy.tokenizer), (2, 6))
    mask = torch.ones_like(ids)
    plain = policy.token_logprobs(ids, mask)
    policy.model.config.final_logit_softcapping = None  # present but off: still the chunked head path
    assert torch.equal(policy.token_logprobs(ids, mask), plain)
    policy.model.config.logit_scale = 1.0  # a head that scales: its logits, computed by the model
    assert torch.allclose(policy.token_logprobs(ids, mask), plain, atol=1e-6)


# -- old-policy log-probs from the trainer's own forward ------------------------------------------

def test_recomputed_old_logprobs_match_the_hf_generation(policy):
    from types import SimpleNamespace

    from workbench.method.loop import Trainer
    from workbench.method.ranks import OneProcess
    from workbench.policy.rollout import Trajectory

    prompts = [policy.encode("some text"), policy.encode("a few more words in it")]
    gens = policy.generate_ids(prompts, max_new_tokens=6, temperature=1.0, top_p=1.0, seed=3)
    rows = [Trajectory(i, 0, "", p, list(g.token_ids) + [5, 6], [1] * len(g.token_ids) + [0, 0],
                       list(g.logprobs) + [0.0, 0.0]) for i, (p, g) in enumerate(zip(prompts, gens))]
    stub = SimpleNamespace(policy=policy, cfg=preset("smoke"), ranks=OneProcess())
    fresh = Trainer.recompute_old_logprobs(stub, rows)
    for old, new in zip(rows, fresh):
        assert new.response_ids == old.response_ids and new.old_logprobs[-2:] == [0.0, 0.0]
        assert new.old_logprobs == pytest.approx(old.old_logprobs, abs=1e-4)


# -- LoRA -----------------------------------------------------------------------------------

def test_lora_adapters_start_as_the_base_and_merge_exactly(policy, tmp_path):
    ids = torch.randint(3, len(policy.tokenizer), (2, 6))
    mask = torch.ones_like(ids)
    base = policy.token_logprobs(ids, mask)
    policy.add_lora(4, 8, seed=0)
    assert torch.equal(policy.token_logprobs(ids, mask), base)  # B = 0 at the start
    with torch.no_grad():
        for name, p in policy.model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.05)
    tuned = policy.token_logprobs(ids, mask)
    with policy.base_only():
        assert torch.equal(policy.token_logprobs(ids, mask), base)
    assert not torch.allclose(tuned, base)
    policy.save(tmp_path / "merged")
    merged = Policy.load(tmp_path / "merged", device="cpu")
    assert not merged.is_lora and torch.allclose(merged.token_logprobs(ids, mask), tuned, atol=1e-5)


def test_merged_weights_come_one_at_a_time(policy, monkeypatch):
    """The merge computes each adapter's delta only as its weight is reached, so the vLLM sync and
    save_merged hold one extra weight, not a second model (15.7 GiB less at 3B, LOG.md session 19)."""
    from peft.tuners.lora import LoraLayer

    policy.add_lora(4, 8, seed=0)
    made = []
    layer = next(type(m) for m in policy.model.modules() if isinstance(m, LoraLayer))  # PEFT's lora Linear
    real = layer.get_delta_weight
    monkeypatch.setattr(layer, "get_delta_weight", lambda self, a: made.append(1) or real(self, a))
    stream = lora.merged_tensors(policy.model)
    for name, _ in stream:
        if name.endswith("proj.weight"):
            break
    assert len(made) == 1  # the first adapted weight's delta, none of the others yet
    rest = dict(stream)
    n_adapted = sum(isinstance(m, LoraLayer) for m in policy.model.modules())
    assert len(made) == n_adapted > 1 and rest.keys() < lora.merged_state_dict(policy.model).keys()


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    from workbench.method.train import ensure_world

    path = tmp_path_factory.mktemp("engine") / "smoke.duckdb"
    con = store.connect(path)
    ensure_world(con, preset("smoke"))
    con.close()
    return str(path)


LORA = {"method.lora_rank": 4, "method.lr": 1e-2, "method.warmup_steps": 0}


def test_lora_training_keeps_the_base_and_checkpoints_the_adapter_only(db, monkeypatch):
    from safetensors.torch import load_file

    from workbench.method import train as train_mod

    made, syncs = [], []
    real_load, real_sync = train_mod.load_policies, Policy.sync
    monkeypatch.setattr(train_mod, "load_policies", lambda *a: made.append(real_load(*a)) or made[-1])
    monkeypatch.setattr(Policy, "sync", lambda self: syncs.append(1) or real_sync(self))
    rows = train_mod.train(db, run="lora-whole", method="coevokg", preset="smoke", steps=2, progress=False,
                           log=None, overrides=LORA)
    assert [r["round"] for r in rows] == [0, 1] and all("time_sync" in r for r in rows)
    (policy, reference), = made
    assert reference is None and policy.is_lora and len(syncs) == 1 + 2  # at add_lora, then after each update
    base = Policy.load(policy_base(db), device="cpu")
    frozen = lora.merged_state_dict(policy.model)
    trained = {k: v for k, v in policy.model.get_base_model().state_dict().items() if "lora_" not in k}
    assert all(torch.equal(v, base.model.state_dict()[k.replace(".base_layer.", ".")]) for k, v in trained.items())
    assert any(not torch.equal(frozen[k], base.model.state_dict()[k]) for k in frozen)  # the adapter moved
    ckpt = train_mod.latest_checkpoint(train_mod.run_dir("lora-whole"))
    assert sorted(p.name for p in ckpt.iterdir()) == ["adapter", "optimizer.pt", "state.json"]
    saved = load_file(str(ckpt / "adapter" / "adapter_model.safetensors"))
    assert saved and all("lora_" in k for k in saved)
    assert any(float(v.abs().sum()) > 0 for k, v in saved.items() if "lora_B" in k)  # B starts at 0
    best = Policy.load(train_mod.run_dir("lora-whole") / "best", device="cpu")  # a merged, standalone model
    assert not best.is_lora


def policy_base(db) -> str:
    """The smoke warm start the runs of ``db`` train from."""
    from workbench.policy.warmstart import warmstart

    con = store.connect(db)
    try:
        return str(warmstart(con, preset=preset("smoke"), seed=0, log=None))
    finally:
        con.close()


def test_evaluation_builds_its_backend_from_the_config_or_its_option(db, monkeypatch):
    from workbench.cli import main

    monkeypatch.setitem(sys.modules, "vllm", None)
    with pytest.raises(ImportError, match="rollout.backend='vllm' needs vLLM"):
        main(["eval", "--db", db, "--model", policy_base(db), "--dataset", "tinyworld", "--limit", "1",
              "--backend", "vllm"])
    assert main(["eval", "--db", db, "--model", policy_base(db), "--dataset", "tinyworld", "--limit", "1",
                 "--backend", "hf"]) == 0


def test_a_run_started_before_the_engine_settings_resumes(db):
    """Runs stored before rollout.backend, method.lora_rank and the rest existed resume as they were."""
    import json

    from workbench.method.train import train

    train(db, run="older", method="search_r1", preset="smoke", steps=1, progress=False, log=None)
    con = store.connect(db)
    (config,) = con.execute("SELECT config FROM runs WHERE run = 'older'").fetchone()
    old = json.loads(config)
    for section, keys in (("rollout", ("backend", "vllm_memory", "vllm_sync")), ("method", ("lora_rank", "lora_alpha"))):
        for key in keys:
            del old[section][key]
    con.execute("UPDATE runs SET config = ? WHERE run = 'older'", [json.dumps(old)])
    con.close()
    rows = train(db, run="older", method="search_r1", preset="smoke", steps=2, resume=True, progress=False, log=None)
    assert [r["round"] for r in rows] == [0, 1]


def test_lora_resume_gives_the_uninterrupted_run(db):
    from workbench.method.train import train

    whole = train(db, run="lora-a", method="coevokg", preset="smoke", steps=2, progress=False, log=None,
                  overrides=LORA)
    train(db, run="lora-b", method="coevokg", preset="smoke", steps=1, progress=False, log=None, overrides=LORA)
    resumed = train(db, run="lora-b", method="coevokg", preset="smoke", steps=2, resume=True, progress=False,
                    log=None, overrides=LORA)
    strip = [{k: v for k, v in r.items() if not k.startswith(("time_", "search_cache"))} for r in (whole + resumed)]
    assert strip[2:] == strip[:2]


# -- the vLLM backend's glue, against a stand-in for vllm (the real one needs CUDA) ------------------

class _Params:
    def __init__(self, **kw):
        self.__dict__.update(kw)


class _FakeLLM:
    """Answers like ``vllm.LLM``: a first pass writes ``x <answer>`` (stopping at the marker when
    asked to), a constrained pass writes its first choice."""

    def __init__(self, **kw):
        self.kw, self.calls, self.loaded, self.resets = kw, [], [], 0

    def generate(self, prompts, params, use_tqdm=False, lora_request=None):
        from types import SimpleNamespace as NS

        self.calls.append((prompts, params, lora_request))
        outs = []
        for p in params:
            so = getattr(p, "structured_outputs", None)
            if so is not None:
                ids, text, hit = [21, 22], so.choice[0], "</answer>"
            elif getattr(p, "stop_token_ids", None):  # stops on its first id; no text without detokenize
                ids, text, hit = [11, p.stop_token_ids[0]], "", p.stop_token_ids[0]
            elif "<answer>" in p.stop:
                ids, text, hit = [11, 12], "x <answer>", "<answer>"
            else:
                ids, text, hit = [11, 13], "x y", None
            lps = [{t: NS(logprob=-0.5)} for t in ids]
            outs.append(NS(outputs=[NS(token_ids=ids, text=text, logprobs=lps, stop_reason=hit,
                                       finish_reason="stop")]))
        return outs

    def collective_rpc(self, fn, args=()):
        from types import SimpleNamespace as NS

        fn(NS(model_runner=NS(model=NS(load_weights=lambda weights: self.loaded.append(dict(weights))))), *args)

    def reset_prefix_cache(self):
        self.resets += 1


@pytest.fixture
def fake_vllm(monkeypatch):
    from types import ModuleType, SimpleNamespace as NS

    mods = {name: ModuleType(name) for name in ("vllm", "vllm.inputs", "vllm.sampling_params", "vllm.lora",
                                                 "vllm.lora.request")}
    mods["vllm"].LLM, mods["vllm"].SamplingParams = _FakeLLM, _Params
    mods["vllm.inputs"].TokensPrompt = lambda prompt_token_ids: {"ids": prompt_token_ids}
    mods["vllm.sampling_params"].StructuredOutputsParams = _Params
    mods["vllm.lora.request"].LoRARequest = lambda name, n, path: NS(lora_name=name, lora_int_id=n, path=path)
    for name, mod in mods.items():
        monkeypatch.setitem(sys.modules, name, mod)
    monkeypatch.setenv("VLLM_ENABLE_V1_MULTIPROCESSING", "1")  # so that teardown restores the real state
    monkeypatch.delenv("VLLM_ENABLE_V1_MULTIPROCESSING")


def test_vllm_backend_seeds_rows_apart_and_answers_choices_in_two_passes(fake_vllm, tok):
    from workbench.policy.generation import Choices, VLLMBackend

    import math

    b = VLLMBackend("model-dir", tok, logprobs=True)
    plain = b.generate([[1, 2], [1, 2]], max_new_tokens=8, temperature=0.6, top_p=0.9, stop=("</answer>",), seed=7)
    assert [g.finish_reason for g in plain] == ["eos", "eos"] and plain[0].logprobs == [-0.5, -0.5]
    assert b.llm.calls[0][1][0].logprobs == 0
    seeds = [p.seed for p in b.llm.calls[0][1]]
    assert len(set(seeds)) == 2  # G copies of a prompt must not share a sampling stream
    gens = b.generate([[1, 2], [3]], max_new_tokens=8, temperature=0.6, top_p=0.9, stop=("</answer>",), seed=7,
                      choices=Choices("<answer>", [["Rome</answer>"], ["Ann</answer>"]]))
    assert [g.text for g in gens] == ["x <answer>Rome</answer>", "x <answer>Ann</answer>"]
    assert gens[0].token_ids == [11, 12, 21, 22] and gens[0].finish_reason == "stop"
    prompts, params, _ = b.llm.calls[-1]
    assert prompts[0] == {"ids": [1, 2, 11, 12]} and params[0].max_tokens == 6  # the rest of the budget
    assert b.llm.kw["logprobs_mode"] == "raw_logprobs"
    lean = VLLMBackend("model-dir", tok)  # the default: no per-token log-probs, the trainer computes them
    (g,) = lean.generate([[1]], max_new_tokens=4, temperature=0.6, top_p=1.0, seed=1)
    assert lean.llm.calls[0][1][0].logprobs is None and all(math.isnan(x) for x in g.logprobs)
    assert not lean.trainer_logprobs


def test_vllm_backend_can_stop_on_token_ids_and_decode_once(fake_vllm, tok):
    """stop_by_token (an experiment for the in-loop throughput, issue 14): single-token stop strings
    become stop_token_ids with vLLM's detokenisation off; the text is decoded once, as HF's."""
    from workbench.policy.generation import VLLMBackend

    b = VLLMBackend("model-dir", tok, stop_by_token=True)
    found = b.stop_tokens(("</search>", "</answer>"))
    assert found is not None and sorted(found.values()) == ["</answer>", "</search>"]  # the tags are whole tokens
    assert b.stop_tokens(("two words",)) is None
    (g,) = b.generate([[1, 2]], max_new_tokens=8, temperature=0.6, top_p=0.9, stop=("</search>", "</answer>"), seed=1)
    (p,) = b.llm.calls[-1][1]
    assert p.stop_token_ids == list(found) and p.detokenize is False and not hasattr(p, "stop")
    assert g.finish_reason == "stop" and g.text == tok.decode(g.token_ids, skip_special_tokens=True)
    assert g.text.endswith("</search>")
    plain = VLLMBackend("model-dir", tok)  # the default: stop strings, vLLM's own text
    plain.generate([[1, 2]], max_new_tokens=8, temperature=0.6, top_p=0.9, stop=("</answer>",), seed=1)
    assert plain.llm.calls[-1][1][0].stop == ["</answer>"]


def test_vllm_backend_row_seeds_off_leaves_sampling_to_the_engine_stream(fake_vllm, tok):
    """row_seeds=False (an experiment, issue 14): no request carries its own seed, so vLLM draws the
    batch's noise from its one generator (its V1 runner draws a seeded request's alone); the default
    seeds every row."""
    from workbench.policy.generation import Choices, VLLMBackend

    b = VLLMBackend("model-dir", tok, row_seeds=False)
    b.generate([[1, 2], [1, 2]], max_new_tokens=8, temperature=0.6, top_p=0.9, stop=("</answer>",), seed=7,
               choices=Choices("<answer>", [["Rome</answer>"], ["Ann</answer>"]]))
    assert len(b.llm.calls) == 2 and all(p.seed is None for _, params, _ in b.llm.calls for p in params)
    b.row_seeds = True
    b.generate([[1, 2]], max_new_tokens=8, temperature=0.6, top_p=0.9, seed=7)
    assert b.llm.calls[-1][1][0].seed is not None


def test_vllm_backend_sync_loads_merged_weights_or_serves_the_adapter(fake_vllm, policy):
    import os

    from workbench.policy.generation import VLLMBackend

    merged = VLLMBackend("model-dir", policy.tokenizer)
    assert os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] == "0"  # weights reach the worker in this process
    policy.add_lora(4, 8, seed=0)
    merged.sync(policy.model)
    (weights,) = merged.llm.loaded
    assert weights.keys() == lora.merged_state_dict(policy.model).keys() and merged.llm.resets == 1
    hot = VLLMBackend("model-dir", policy.tokenizer, sync="lora", lora_rank=4)
    assert hot.llm.kw["enable_lora"] and hot.llm.kw["max_lora_rank"] == 8  # the smallest rank vLLM takes
    hot.sync(policy.model)
    hot.sync(policy.model)
    assert hot.lora_request.lora_int_id == 2 and not hot.llm.loaded
    assert sorted(p.name for p in hot._adapters.iterdir()) == ["v2"]  # older adapters are removed
    hot.generate([[1]], max_new_tokens=2, temperature=0, top_p=1)
    assert hot.llm.calls[-1][2] is hot.lora_request


def test_bench_loop_times_the_loops_way_cold_warm_each_experiment_again_and_after_a_sync(fake_vllm, db):
    """``bench gpu --parts loop`` on vLLM (here the stand-in): the loop's way cold and warm, the
    experiments the tokenizer allows (its tags are single tokens, so all three), the loop's way
    again and after a weight sync; each timing starts from an empty prefix cache, and vLLM receives
    what its name says."""
    from workbench.bench import gpu as gb, shapes

    marks = []  # (engine, its calls so far) at each prefix-cache reset: a timing begins
    reset = _FakeLLM.reset_prefix_cache

    def watched(llm):
        marks.append((llm, len(llm.calls)))
        reset(llm)

    with pytest.MonkeyPatch.context() as m:
        m.setattr(_FakeLLM, "reset_prefix_cache", watched)
        out = gb.bench_loop(policy_base(db), shapes.SHAPES["tiny-test"], db, "smoke", "cpu", ["vllm"], batch=4,
                            bandwidth=shapes.HBM_BYTES_PER_S)
    assert list(out["engines"]) == ["vllm_cold", "vllm", "vllm_engine_seed", "vllm_stop_tokens",
                                    "vllm_stop_tokens_engine_seed", "vllm_again", "vllm_after_sync"]
    llm = marks[0][0]
    first = [llm.calls[n][1][0] for n in sorted({n for _, n in marks})]  # the first request of each timing
    assert [(hasattr(p, "stop_token_ids"), p.seed is not None) for p in first] == [
        (False, True), (False, True), (False, False), (True, True), (True, False), (False, True), (False, True)]
    assert len(llm.loaded) == 1 and len(marks) == 8  # the sync loaded the weights and emptied the cache
    assert out["engines"]["vllm_cold"]["generated_tokens"] == out["engines"]["vllm"]["generated_tokens"]
    assert all(r["generated_tokens"] > 0 for r in out["engines"].values())
    assert all(r["gc_s"] >= 0 and len(r["gc_collections"]) == 3 for r in out["engines"].values())
    assert set(out["env"]) == {"VLLM_USE_V2_MODEL_RUNNER", "VLLM_ENABLE_V1_MULTIPROCESSING"}
    assert "profile" not in out


def test_bench_loop_loads_no_weights_into_an_engine_core_of_its_own(fake_vllm, db, monkeypatch):
    """With vLLM's engine core in another process (``loop3b_mp``) merged weights would be pickled
    across: no sync, so no ``vllm_after_sync`` timing."""
    from workbench.bench import gpu as gb, shapes

    monkeypatch.setenv("VLLM_ENABLE_V1_MULTIPROCESSING", "1")
    out = gb.bench_loop(policy_base(db), shapes.SHAPES["tiny-test"], db, "smoke", "cpu", ["vllm"], batch=4,
                        bandwidth=shapes.HBM_BYTES_PER_S)
    assert list(out["engines"])[-1] == "vllm_again" and out["env"]["VLLM_ENABLE_V1_MULTIPROCESSING"] == "1"


def test_bench_loop_profiles_the_loops_way_once_more_when_asked(fake_vllm, db):
    """``--profile``: one more timing of the loop's way under cProfile, after the clean ones, and
    the functions with the most time of their own (the rollout's own among them)."""
    from workbench.bench import gpu as gb, shapes

    out = gb.bench_loop(policy_base(db), shapes.SHAPES["tiny-test"], db, "smoke", "cpu", ["vllm"], batch=4,
                        bandwidth=shapes.HBM_BYTES_PER_S, profile=True)
    assert list(out["engines"])[-2:] == ["vllm_after_sync", "vllm_profiled"]
    assert out["engines"]["vllm_profiled"]["generated_tokens"] == out["engines"]["vllm"]["generated_tokens"]
    top = out["profile"]
    assert 0 < len(top) <= 25 and top == sorted(top, key=lambda r: -r["tottime_s"])
    assert all(r["calls"] >= 1 and r["cumtime_s"] >= r["tottime_s"] for r in top)
