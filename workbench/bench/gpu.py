"""``workbench bench gpu``: the GPU engine against the hardware's limit (issue 14), as JSON.

Runs on CUDA (``--device cpu`` with ``--shape tiny-test`` checks the plumbing only: that is what
the CPU tests run). The parts (``--parts``), at a model *shape* with random weights where a speed
figure does not need trained ones (``SHAPES``: Qwen2.5-3B, Qwen2.5-7B, Llama-3.1-8B):

* ``generation``: ``batch`` token-id prompts of ``prompt_tokens``, every row sampled to
  ``new_tokens`` (eos ignored), on each engine: Hugging Face ``generate`` (KV cache, the logits
  kept as our HF backend keeps them for the log-probs) and vLLM (bfloat16, with one log-prob per
  token and without). Generated tokens/s, and the share of the HBM roofline: a decode step reads
  every weight once plus the KV cache of every row (:func:`decode_roofline`).
* ``update``: one policy-update step, the trainer's own (``update.PolicyStep``: ``Policy.token_logprobs``
  with entropy, the reference's log-probs, ``update.policy_loss``, backward, clipping, AdamW) on
  ``update_batch`` x ``update_tokens`` tokens, LoRA rank ``lora_rank`` (0: full fine-tune):
  seconds a step, the reference forward's share, the trainer's own old-policy log-probs (the
  forward the update adds when vLLM samples, for the rows of a round's second and later
  optimiser steps: ``Trainer.recompute_old_logprobs``, instead of vLLM's per-token log-probs,
  which halve its throughput), peak GPU memory, and TFLOP/s by 6 N T against a measured bf16
  matmul rate; once per ``update_variants`` (gradient checkpointing mode, sequence packing) on
  rows of ``update_lengths`` (:func:`bench_update`), and with ``unsloth_standalone`` Unsloth's own
  step at the shape beside it (:func:`bench_unsloth_standalone`).
* ``logprobs``: vLLM's log-probs against the trainer's for the same sampled tokens, on a trained
  ``model`` (:func:`bench_logprobs`).
* ``loop``: ``rollout`` itself (multi-turn, stops, masks, search) at the shape on each engine
  (:func:`bench_loop`).
* ``retrieval``: dense search of a rollout turn's 256 queries over ``retrieval_sizes`` x 768
  random unit vectors, FAISS's flat scan on the CPU vs :func:`search.index.exact_topk` on the GPU
  in float16 (``search.device``), same top-3 (:func:`bench_retrieval`).
* ``round``: one CoEvoKG round of ``train`` on ``db`` at ``preset`` with ``overrides``: seconds per
  stage (the round's ``time_*`` keys), peak GPU memory, and the paper's 314 optimiser steps
  extrapolated beside Search-R1's reported 36-126 s a step on 8 H100s.

``goals`` compares with the issue's: generation >= 20k tokens/s and >= 5x HF; an update step
within 1.25x of Unsloth's 0.36 s and under 16 GiB (3B shape, LoRA r 16, 8 x 1,024 tokens).

Example:
    >>> round(decode_roofline(SHAPES["qwen2.5-3b"], batch=256, prompt_tokens=512, new_tokens=256)["tokens_per_s"], -3)
    101000.0
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import json
import logging
import os
import tempfile
import time
from pathlib import Path

import torch

from workbench.bench.shapes import HBM_BYTES_PER_S, SHAPES, decode_roofline, param_count, step_tflops
from workbench.policy import lora

log = logging.getLogger(__name__)

UNSLOTH_STEP_S = 0.36  # issue 14: Unsloth LoRA r 16, 8 x 1,024 tokens, 3B shape, on the H200
SEARCH_R1_STEP_S = (36, 126)  # Search-R1's reported seconds a step on 8 H100s
PAPER_STEPS = 314  # the paper's optimisation steps


def goals(result: dict) -> dict:
    """The issue's goals as booleans where the result measured them at the settings they are stated
    for (the 3B shape; generation at batch 256, in the loop when ``loop`` ran, else bare; the update
    at LoRA r 16, 8 x 1,024 tokens), else None.

    Example:
        >>> goals({"shape": "qwen2.5-3b", "generation": {"batch": 256, "vllm_over_hf": 6.0,
        ...        "engines": {"vllm": {"tokens_per_s_logprobs": 21000.0}}}})["generation_20k_tokens_per_s"]
        True
        >>> goals({"shape": "tiny-test", "update": {"step_s": 0.1}})["update_within_1.25x_unsloth"] is None
        True
    """
    at_3b = result.get("shape") == "qwen2.5-3b"
    gen, upd, loop = result.get("generation") or {}, result.get("update") or {}, result.get("loop") or {}
    upd_ok = at_3b and (upd.get("lora_rank"), upd.get("batch"), upd.get("tokens_per_row")) == (16, 8, 1024)
    if at_3b and loop.get("batch") == 256:  # the goal's own setting: rollouts in the loop
        rate, ratio = ((loop.get("engines") or {}).get("vllm") or {}).get("tokens_per_s"), loop.get("vllm_over_hf")
    elif at_3b and gen.get("batch") == 256:  # bare generation, with a log-prob a token
        rate, ratio = ((gen.get("engines") or {}).get("vllm") or {}).get("tokens_per_s_logprobs"), gen.get("vllm_over_hf")
    else:
        rate = ratio = None
    step, peak = (upd.get("step_s"), upd.get("peak_gib")) if upd_ok else (None, None)
    return {"generation_20k_tokens_per_s": None if rate is None else rate >= 20_000,
            "generation_5x_hf": None if ratio is None else ratio >= 5,
            "update_within_1.25x_unsloth": None if step is None else step <= 1.25 * UNSLOTH_STEP_S,
            "update_peak_below_16_gib": None if peak is None else peak < 16}


# -- the bench ---------------------------------------------------------------------------------

PARTS = ("generation", "update", "logprobs", "loop", "round", "retrieval")


def bench_gpu(shape: str = "qwen2.5-3b", device: str = "cuda", engines=("vllm", "hf"), batch: int = 256,
              prompt_tokens: int = 512, new_tokens: int = 256, lora_rank: int = 16, update_batch: int = 8,
              update_tokens: int = 1024, update_steps: int = 3, round_model: str | None = None, db=None,
              preset: str = "tiny", overrides: dict | None = None, bandwidth: float = HBM_BYTES_PER_S,
              seed: int = 0, parts=("generation", "update"), model: str | None = None,
              retrieval_sizes=(1_000_000, 10_000_000), profile: bool = False, update_variants=("auto",),
              update_lengths: str = "equal", unsloth_standalone: bool = False) -> dict:
    """Measure the ``parts`` of the module docstring and return them as one JSON-ready dict.

    ``model`` (a model directory with its tokenizer, e.g. the warm start) is what ``logprobs``
    samples from; ``loop`` and ``round`` run a random model of ``shape`` with ``model``'s tokenizer
    padded to the shape's vocabulary (:func:`paper_shape_folder`), or ``round_model`` when given.

    Example:
        >>> r = bench_gpu("tiny-test", device="cpu", engines=["hf"], batch=2, prompt_tokens=4, new_tokens=3,
        ...               lora_rank=2, update_batch=2, update_tokens=8, update_steps=1)  # doctest: +SKIP
        >>> sorted(r)  # doctest: +SKIP
        ['device', 'dtype', 'generation', 'goals', 'params', 'shape', 'update']
    """
    spec = _check(shape, device, engines, batch, prompt_tokens, new_tokens, lora_rank, update_batch, update_tokens,
                  update_steps)
    unknown = sorted(set(parts) - set(PARTS))
    if unknown or not parts:
        raise ValueError(f"--parts {list(parts)!r}: expected some of {list(PARTS)}")
    if {"logprobs", "loop", "round"} & set(parts) and not (model or round_model):
        raise ValueError("--parts logprobs/loop/round need --model (a model directory with its tokenizer, "
                         "e.g. the warm start) or --round-model")
    order = lora.import_unsloth_first(device, max(lora_rank if "update" in parts else 0, _round_rank(parts, preset,
                                                                                                        overrides)))
    dtype = torch.bfloat16 if device.startswith("cuda") else torch.float32
    torch.manual_seed(seed)
    result = {"shape": shape, "params": param_count(spec), "device": _device_name(device), "dtype": str(dtype)[6:],
              "gpu_memory_gib": _memory_gib(device), "unsloth_import": order}
    if "generation" in parts:
        result["generation"] = bench_generation(spec, device, dtype, engines, batch, prompt_tokens, new_tokens,
                                                bandwidth)
    if "update" in parts:
        result["update"] = bench_update(spec, device, dtype, lora_rank, update_batch, update_tokens, update_steps,
                                        update_variants, update_lengths)
        if unsloth_standalone:
            try:
                result["update"]["unsloth_standalone"] = bench_unsloth_standalone(
                    spec, device, lora_rank, update_batch, update_tokens, update_steps)
            except ImportError as err:  # no Unsloth here: recorded with its own text
                result["update"]["unsloth_standalone"] = {"skipped": f"{type(err).__name__}: {err}"}
    if "retrieval" in parts:
        result["retrieval"] = bench_retrieval(device, retrieval_sizes, seed=seed)
    if "logprobs" in parts:
        result["logprobs"] = bench_logprobs(model, db, preset, device, overrides)
    with contextlib.ExitStack() as stack:
        folder = round_model
        if folder is None and {"loop", "round"} & set(parts):
            folder = stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-gpu-shape-"))
            paper_shape_folder(shape, model, folder, device, seed)
        if "loop" in parts:
            result["loop"] = bench_loop(folder, spec, db, preset, device, engines, batch, bandwidth, overrides,
                                        profile=profile)
        if "round" in parts:
            result["round"] = bench_round(folder, db, preset, overrides or {}, device)
    result["goals"] = goals(result)
    return result


def _round_rank(parts, preset: str, overrides: dict | None) -> int:
    """The LoRA rank the ``round`` part trains with (0 when it does not run)."""
    if "round" not in parts:
        return 0
    from workbench.config import preset as get_preset

    return get_preset(preset, **(overrides or {})).method.lora_rank


def _check(shape, device, engines, *sizes) -> dict:
    """The shape's spec, after refusing what cannot run (one-line errors naming the option)."""
    if shape not in SHAPES:
        raise ValueError(f"--shape {shape!r}: expected one of {sorted(SHAPES)}")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError("bench gpu: no CUDA device here (torch.cuda.is_available() is False); it measures the GPU "
                         "engine (--device cpu --shape tiny-test checks the plumbing only)")
    if not device.startswith(("cuda", "cpu")):
        raise ValueError(f"--device {device!r}: expected 'cuda', 'cuda:N' or 'cpu'")
    if device == "cpu" and shape != "tiny-test":
        raise ValueError(f"--device cpu: only --shape tiny-test (a plumbing check), not {shape!r}")
    unknown = sorted(set(engines) - {"hf", "vllm"})
    if unknown or not engines:
        raise ValueError(f"--engines {list(engines)!r}: expected one or both of 'hf', 'vllm'")
    names = ("batch", "prompt_tokens", "new_tokens", "lora_rank", "update_batch", "update_tokens", "update_steps")
    for name, value in zip(names, sizes):
        least = 0 if name == "lora_rank" else 1
        if value < least:
            raise ValueError(f"--{name.replace('_', '-')} {value}: expected an integer >= {least}")
    return SHAPES[shape]


def _device_name(device: str) -> str:
    return torch.cuda.get_device_name(torch.device(device)) if device.startswith("cuda") else "cpu"


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize(torch.device(device))


def _memory_gib(device: str) -> float | None:
    """The device's memory in GiB as torch reports it (``workbench plan --calibrate`` reads it), None on the CPU."""
    return torch.cuda.get_device_properties(torch.device(device)).total_memory / 2 ** 30 \
        if device.startswith("cuda") else None


def _peak_gib(device: str) -> float | None:
    return torch.cuda.max_memory_allocated(torch.device(device)) / 2 ** 30 if device.startswith("cuda") else None


def _reset_peak(device: str) -> None:
    gc.collect()
    if device.startswith("cuda"):
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(torch.device(device))


def hf_config(spec: dict):
    """The ``transformers`` config of a shape."""
    from transformers import LlamaConfig, Qwen2Config

    kind = Qwen2Config if spec["arch"] == "qwen2" else LlamaConfig
    return kind(**{k: v for k, v in spec.items() if k != "arch"}, max_position_embeddings=4096)


def random_model(spec: dict, device: str, dtype):
    """A randomly initialised model of the shape, built on ``device`` (no host copy)."""
    from transformers import AutoModelForCausalLM

    with torch.device(device):
        return AutoModelForCausalLM.from_config(hf_config(spec), dtype=dtype).eval()


def bench_generation(spec, device, dtype, engines, batch, prompt_tokens, new_tokens, bandwidth) -> dict:
    """Tokens/s of each engine at the shape, every row to ``new_tokens`` (module docstring)."""
    roof = decode_roofline(spec, batch, prompt_tokens, new_tokens, bandwidth)
    prompts = torch.randint(0, spec["vocab_size"], (batch, prompt_tokens)).tolist()
    out = {"batch": batch, "prompt_tokens": prompt_tokens, "new_tokens": new_tokens, "roofline": roof, "engines": {}}
    for engine in engines:
        run = _generate_hf if engine == "hf" else _generate_vllm
        try:
            out["engines"][engine] = run(spec, device, dtype, prompts, new_tokens)
        except ImportError as err:  # e.g. vLLM not installed: recorded with its own text
            out["engines"][engine] = {"skipped": f"{type(err).__name__}: {err}"}
        for key in ("tokens_per_s", "tokens_per_s_logprobs"):
            rate = out["engines"][engine].get(key)
            if rate is not None:
                out["engines"][engine][key.replace("tokens_per_s", "roofline_share")] = rate / roof["tokens_per_s"]
    hf, vllm = out["engines"].get("hf", {}), out["engines"].get("vllm", {})
    both = hf.get("tokens_per_s") and vllm.get("tokens_per_s_logprobs")
    out["vllm_over_hf"] = vllm["tokens_per_s_logprobs"] / hf["tokens_per_s"] if both else None
    return out


def _generate_hf(spec, device, dtype, prompts, new_tokens) -> dict:
    """Hugging Face ``generate`` as ``HFBackend`` calls it (KV cache, logits kept for the log-probs)."""
    model = random_model(spec, device, dtype)
    ids = torch.tensor(prompts, device=device)
    kwargs = dict(attention_mask=torch.ones_like(ids), do_sample=True, temperature=1.0, top_p=1.0, top_k=None,
                  max_new_tokens=new_tokens, min_new_tokens=new_tokens, output_logits=True,
                  return_dict_in_generate=True, use_cache=True, pad_token_id=0)
    with torch.no_grad():
        model.generate(ids[:, :8], **{**kwargs, "attention_mask": kwargs["attention_mask"][:, :8],
                                      "max_new_tokens": 2, "min_new_tokens": 2})  # warm-up
        _sync(device)
        start = time.perf_counter()
        out = model.generate(ids, **kwargs)
        _sync(device)
    seconds = time.perf_counter() - start
    generated = (out.sequences.shape[1] - ids.shape[1]) * ids.shape[0]
    del model, out
    _reset_peak(device)
    return {"seconds": seconds, "tokens": generated, "tokens_per_s": generated / seconds,
            "ms_per_step": 1000 * seconds / new_tokens}


def _generate_vllm(spec, device, dtype, prompts, new_tokens) -> dict:  # pragma: no cover - CUDA + vLLM only
    """vLLM at the shape with dummy (random) weights, token-id prompts, eos ignored: with one
    log-prob per token (what the loop asks) and without. Not run on this CPU machine."""
    from workbench.policy.generation import _import_vllm

    vllm = _import_vllm()
    from vllm import SamplingParams
    from vllm.inputs import TokensPrompt

    with tempfile.TemporaryDirectory(prefix="bench-gpu-") as folder:
        hf_config(spec).save_pretrained(folder)
        start = time.perf_counter()
        llm = vllm.LLM(model=folder, load_format="dummy", skip_tokenizer_init=True, dtype="bfloat16",
                       max_model_len=len(prompts[0]) + new_tokens, gpu_memory_utilization=0.85, seed=0)
        startup = time.perf_counter() - start
    requests = [TokensPrompt(prompt_token_ids=p) for p in prompts]
    rates = {}
    for key, logprobs in (("tokens_per_s_logprobs", 0), ("tokens_per_s", None)):
        params = SamplingParams(temperature=1.0, top_p=1.0, max_tokens=new_tokens, min_tokens=new_tokens,
                                ignore_eos=True, logprobs=logprobs, detokenize=False)
        llm.generate(requests[:2], params, use_tqdm=False)  # warm-up
        start = time.perf_counter()
        outs = llm.generate(requests, params, use_tqdm=False)
        seconds = time.perf_counter() - start
        rates[key] = sum(len(o.outputs[0].token_ids) for o in outs) / seconds
    del llm
    _reset_peak(device)
    return {"startup_s": startup, **rates}


H200_BF16_TFLOPS = 989.0  # the H200's dense bf16 peak (NVIDIA's datasheet, no sparsity): the MFU's denominator


def update_rows(vocab: int, batch: int, tokens: int, lengths: str = "equal", seed: int = 0):
    """(rows, advantages) for the update bench: ``batch`` random rows of ``tokens`` tokens
    (``lengths`` 'equal', the issue's shape), or of lengths drawn uniformly from tokens/4..tokens
    ('varied': what a round's rows look like, where padding costs), a quarter of each row
    prompt (no loss), the rest generated with every fourth block of 8 tokens retrieved (loss 0).

    Example:
        >>> rows, adv = update_rows(100, 3, 16, "varied")
        >>> [r.length for r in rows], len(adv[0]) == len(rows[0].response_ids)
        ([7, 6, 5], True)
    """
    from workbench.policy.rollout import Trajectory

    if lengths not in ("equal", "varied"):
        raise ValueError(f"--update-lengths {lengths!r}: expected 'equal' or 'varied'")
    gen = torch.Generator().manual_seed(seed)
    sizes = [tokens] * batch if lengths == "equal" else \
        torch.randint(max(2, tokens // 4), tokens + 1, (batch,), generator=gen).tolist()
    rows = []
    for i, n in enumerate(sizes):
        ids = torch.randint(0, vocab, (n,), generator=gen).tolist()
        prompt = max(1, n // 4)
        mask = [0 if (j // 8) % 4 == 3 else 1 for j in range(n - prompt)]
        rows.append(Trajectory(i, 0, "", ids[:prompt], ids[prompt:], mask, [0.0] * (n - prompt)))
    return rows, [torch.randn(len(r.response_ids), generator=gen) for r in rows]


def bench_update(spec, device, dtype, lora_rank, update_batch, update_tokens, steps, variants=("auto",),
                 lengths: str = "equal") -> dict:
    """The trainer's own optimiser step (``update.PolicyStep``, what ``loop.Trainer.update`` runs) on
    random tokens (module docstring, :func:`update_rows`), the batch in one micro-batch, once per
    variant: ``MODE`` or ``MODE+packed`` (``method.gradient_checkpointing``, ``method.pack_sequences``),
    each on a freshly made policy, 'offload' last (Unsloth's offloading checkpointing patches
    process-wide). Per variant: seconds a step (mean over ``steps`` after one warm-up step), the
    reference forward inside it, peak memory, the tokens the forward ran over (padded or packed rows
    x width) against the real ones, real and loss tokens a second, and MFU = 6 N x real tokens / step
    seconds / :data:`H200_BF16_TFLOPS` (the reference forward and a checkpointed recompute are not
    counted: it is the share of the peak that went to useful training FLOPs); a packed variant also
    reports its log-probs' largest difference from the padded ones on the same batch (no grad).
    A variant whose policy cannot be made (offload off Unsloth) or whose first step fails (an
    Unsloth without ``packed_seq_lengths``) is recorded as skipped, with why.
    The first variant's figures are also the result's own keys (``goals`` reads them)."""
    import dataclasses

    from workbench.config import MethodConfig
    from workbench.method.update import PolicyStep
    from workbench.policy.rollout import batch_tensors
    from workbench.policy.tokenizer import train_tokenizer

    tok = train_tokenizer(["bench tokens"] * 5, vocab_size=300)  # only the chat template is read
    rows, advantages = update_rows(spec["vocab_size"], update_batch, update_tokens, lengths)
    tensors = batch_tensors(rows, 0)
    real = int(tensors["attention_mask"].sum())
    loss_tokens = int(tensors["loss_mask"].sum())
    order = sorted(variants, key=lambda v: v.split("+")[0] == "offload")
    out, matmul = [], matmul_tflops(device)
    for variant in order:
        mode, _, packed = variant.partition("+")
        if packed not in ("", "packed"):
            raise ValueError(f"--update-variants {variant!r}: expected MODE or MODE+packed, MODE one of "
                             "auto, off, standard, offload")
        try:
            policy, reference, trainer_kind = _update_policies(spec, device, dtype, lora_rank, tok, mode,
                                                               micro_batch_tokens=update_batch * update_tokens)
        except ValueError as err:  # e.g. offload off Unsloth: the other variants still run
            out.append({"variant": variant, "skipped": str(err)})
            continue
        m = dataclasses.replace(MethodConfig(), micro_batch=update_batch, lr=1e-5, pack_sequences=bool(packed))
        update = PolicyStep(policy, reference, m)
        ref_seconds = []
        real_reference = update.reference_logprobs

        def timed_reference(*args):  # the reference forward's share of the step
            _sync(device)
            start = time.perf_counter()
            out = real_reference(*args)
            _sync(device)
            ref_seconds.append(time.perf_counter() - start)
            return out

        update.reference_logprobs = timed_reference

        def step() -> float:
            _sync(device)
            start = time.perf_counter()
            update(0, rows, advantages)
            _sync(device)
            return time.perf_counter() - start

        try:
            step()  # warm-up (kernel selection, allocator, Unsloth's compilation)
        except (TypeError, RuntimeError) as err:  # e.g. an Unsloth without packed_seq_lengths: the rest still run
            out.append({"variant": variant, "skipped": f"{type(err).__name__}: {str(err).splitlines()[0]}"})
            log.info("update %s", json.dumps(out[-1]))
            del policy, reference, update
            _reset_peak(device)
            continue
        _reset_peak(device)
        ref_seconds.clear()
        seconds = sum(step() for _ in range(steps)) / steps
        batches, width = update.micro_batches(rows, sorted(range(len(rows)), key=lambda i: rows[i].length))
        forward_tokens = sum(_forward_tokens([rows[i] for i in idx], width) for idx in batches)
        row = {"variant": variant, "checkpointing": policy.checkpointing, "packed": bool(packed), "trainer": trainer_kind,
               "step_s": seconds, "reference_s": sum(ref_seconds) / steps, "peak_gib": _peak_gib(device),
               "real_tokens": real, "loss_tokens": loss_tokens, "forward_tokens": forward_tokens,
               "real_tokens_per_s": real / seconds, "loss_tokens_per_s": loss_tokens / seconds,
               "tflops_6nt": step_tflops(spec, real, seconds),
               "mfu_6nt": step_tflops(spec, real, seconds) / H200_BF16_TFLOPS if device.startswith("cuda") else None}
        if packed:
            row["max_abs_logprob_diff_vs_padded"] = max(_packed_vs_padded(policy, [rows[i] for i in idx], width, device)
                                                        for idx in batches)
        if not out:  # what the update adds when the backend's log-probs are not the trainer's
            row["old_logprobs_s"] = sum(_old_logprobs(policy, tensors, device) for _ in range(steps)) / steps
        log.info("update %s", json.dumps(row))
        out.append(row)
        del policy, reference, update
        _reset_peak(device)
    first = next((r for r in out if r["variant"] == variants[0]), {})
    return {"batch": update_batch, "tokens_per_row": update_tokens, "lengths": lengths, "lora_rank": lora_rank,
            **{k: first[k] for k in ("trainer", "checkpointing", "packed", "step_s", "reference_s", "old_logprobs_s",
                                     "peak_gib") if k in first},
            "tflops_6nt": first.get("tflops_6nt"), "matmul_tflops": matmul, "unsloth_step_s": UNSLOTH_STEP_S,
            "variants": out}


def bench_unsloth_standalone(spec, device, lora_rank: int, batch: int, tokens: int, steps: int,
                             modes=("offload", "off")) -> dict:  # pragma: no cover - CUDA + unsloth only
    """Unsloth's own LoRA step at the shape, the baseline of the goal "within 1.25x of standalone
    Unsloth" (issue 14 measured 0.36 s at 3B, 8 x 1,024, r 16): a random model of ``spec`` saved and
    loaded by ``FastLanguageModel`` (bf16), adapters of ``lora_rank`` on every block linear layer,
    then ``model(input_ids, labels=input_ids).loss`` backward and AdamW on ``batch`` x ``tokens``
    random tokens; seconds a step (mean of ``steps`` after one warm-up) and peak memory per
    gradient-checkpointing mode (Unsloth's 'unsloth' = our offload, its default; False = off).
    Nothing of the trainer: no reference forward, no per-token log-probs. Not run on this CPU."""
    from unsloth import FastLanguageModel

    use = {"offload": "unsloth", "standard": True, "off": False}
    out = {"batch": batch, "tokens_per_row": tokens, "lora_rank": lora_rank}
    ids = torch.randint(0, spec["vocab_size"], (batch, tokens), generator=torch.Generator().manual_seed(0))
    with tempfile.TemporaryDirectory(prefix="bench-gpu-unsloth-") as folder:
        random_model(spec, device, torch.bfloat16).save_pretrained(folder)
        _reset_peak(device)
        for mode in sorted(modes, key=lambda m: m == "offload"):  # Unsloth's offload patches process-wide: last
            model, _ = FastLanguageModel.from_pretrained(model_name=folder, max_seq_length=tokens, dtype=None,
                                                         load_in_4bit=False)
            model = FastLanguageModel.get_peft_model(model, r=lora_rank, lora_alpha=2 * lora_rank, lora_dropout=0.0,
                                                     bias="none", target_modules=list(lora.TARGETS),
                                                     use_gradient_checkpointing=use[mode], random_state=0)
            opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-5)
            x = ids.to(device)

            def step() -> float:
                _sync(device)
                start = time.perf_counter()
                model(input_ids=x, labels=x).loss.backward()
                opt.step()
                opt.zero_grad(set_to_none=True)
                _sync(device)
                return time.perf_counter() - start

            step()
            _reset_peak(device)
            out[mode] = {"step_s": sum(step() for _ in range(steps)) / steps, "peak_gib": _peak_gib(device)}
            log.info("unsloth standalone %s %s", mode, json.dumps(out[mode]))
            del model, opt
            _reset_peak(device)
    return out


def _forward_tokens(rows, width: int | None) -> int:
    """Tokens a micro-batch's forward runs over: its right-padded rows, or (``width`` given) the
    packed rows ``policy.packing.pack`` lays them out in."""
    from workbench.policy.packing import pack
    from workbench.policy.rollout import batch_tensors

    t = batch_tensors(rows, 0)
    return t["input_ids"].numel() if width is None else pack(t["input_ids"], t["attention_mask"], 0, width).input_ids.numel()


def _packed_vs_padded(policy, rows, width: int, device) -> float:
    """The largest |packed - padded| log-prob over ``rows``' predicted tokens (no grad), packed as the
    update packs them (``rows`` in its micro-batch's order, rows of ``width``)."""
    from workbench.policy.rollout import batch_tensors

    t = batch_tensors(rows, 0)
    ids, mask = t["input_ids"].to(device), t["attention_mask"].to(device)
    with torch.no_grad():
        padded = policy.token_logprobs(ids, mask)
        packed = policy.token_logprobs(ids, mask, packed=True, pack_width=width)
    valid = mask[:, 1:].bool()
    return float((packed[:, 1:] - padded[:, 1:])[valid].abs().max())


def _old_logprobs(policy, tensors, device) -> float:
    """Seconds of the trainer's old-policy log-probs of the batch (no grad, padded)."""
    _sync(device)
    start = time.perf_counter()
    with torch.no_grad():
        policy.token_logprobs(tensors["input_ids"].to(device), tensors["attention_mask"].to(device))
    _sync(device)
    return time.perf_counter() - start


def _update_policies(spec, device, dtype, lora_rank, tok, checkpointing: str = "auto", micro_batch_tokens: int = 0):
    """(policy, reference or None, 'unsloth' | 'peft' | 'full') by a run's recipe
    (``train.make_policies``) over a random model built in memory: no weights are written to disk,
    except that Unsloth (where ``Policy.load`` picks it) loads from a directory, so there the random
    model is saved and loaded back."""
    from workbench.method.train import make_policies
    from workbench.policy import lora
    from workbench.policy.model import Policy

    def load(dtype, role: str):
        if lora_rank and lora.unsloth_available(device):  # pragma: no cover - CUDA + unsloth only
            with tempfile.TemporaryDirectory(prefix="bench-gpu-model-") as folder:
                Policy(random_model(spec, device, dtype), tok, device=device).save(folder)
                return Policy.load(folder, device=device, dtype=dtype, lora_rank=lora_rank)
        return Policy(random_model(spec, device, dtype), tok, device=device)
    policy, reference = make_policies(load, lora_rank, 2 * lora_rank, 0, dtype, checkpointing=checkpointing,
                                      micro_batch_tokens=micro_batch_tokens)
    return policy, reference, "full" if not lora_rank else "unsloth" if policy.unsloth else "peft"


def matmul_tflops(device: str, n: int = 8192, repeats: int = 10) -> float | None:
    """The measured bf16 matmul rate (the 6 N T figure's ceiling); None on the CPU."""
    if not device.startswith("cuda"):
        return None
    a = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    a @ b
    _sync(device)
    start = time.perf_counter()
    for _ in range(repeats):
        a @ b
    _sync(device)
    return 2 * n ** 3 * repeats / (time.perf_counter() - start) / 1e12


def bench_retrieval(device: str, sizes=(1_000_000, 10_000_000), dim: int = 768, n_queries: int = 256,
                    k: int = 3, seed: int = 0) -> dict:
    """Seconds for one batch of ``n_queries`` top-``k`` searches over each size of random unit
    vectors: FAISS ``IndexFlatIP`` on the CPU (all its threads) and ``exact_topk`` on ``device``
    (float16 vectors, copied once: the copy is reported apart); the share of top-k rows the two
    agree on (float16 can swap near-ties); the seconds to draw the vectors and fill the FAISS index.
    Each size's row is logged as soon as it is measured.

    Example:
        >>> r = bench_retrieval("cpu", sizes=[1000], dim=8, n_queries=4)
        >>> r["sizes"][0]["vectors"], r["sizes"][0]["same_topk_share"] > 0.9
        (1000, True)
    """
    import faiss
    import numpy as np

    from workbench.search.index import exact_topk

    rng = np.random.default_rng(seed)
    out = {"dim": dim, "queries": n_queries, "k": k, "faiss_threads": faiss.omp_get_max_threads(), "sizes": []}
    queries = unit_vectors(rng, n_queries, dim)
    for n in sizes:
        start = time.perf_counter()
        vectors = unit_vectors(rng, int(n), dim)
        flat = faiss.IndexFlatIP(dim)
        flat.add(vectors)
        build_s = time.perf_counter() - start
        start = time.perf_counter()
        _, want = flat.search(queries, k)
        cpu_s = time.perf_counter() - start
        start = time.perf_counter()
        matrix = torch.from_numpy(vectors).to(device, torch.float16)
        _sync(device)
        copy_s = time.perf_counter() - start
        exact_topk(matrix, torch.from_numpy(queries[:2]), k)  # warm-up
        _sync(device)
        start = time.perf_counter()
        rows, _ = exact_topk(matrix, torch.from_numpy(queries), k)
        gpu_s = time.perf_counter() - start
        same = np.mean([len(set(a) & set(b)) / k for a, b in zip(rows.tolist(), want.tolist())])
        row = {"vectors": int(n), "faiss_cpu_s": cpu_s, "torch_s": gpu_s, "copy_s": copy_s,
               "speedup": cpu_s / gpu_s, "same_topk_share": float(same), "vectors_and_index_s": build_s}
        out["sizes"].append(row)
        log.info("retrieval %s", json.dumps(row))
        del vectors, flat, matrix
        _reset_peak(device)
    return out


def unit_vectors(rng, n: int, dim: int, block: int = 1 << 20):
    """``n`` random unit vectors (float32 [n, dim]) drawn and normalised a block of rows at a
    time, so 10M x 768 needs its own 31 GB and no full-size temporary (the norm of the whole
    array would take as much again); the same numbers as one draw of the whole array.

    Example:
        >>> import numpy as np
        >>> v = unit_vectors(np.random.default_rng(0), 5, 3, block=2)
        >>> v.shape, bool(np.allclose(np.linalg.norm(v, axis=1), 1))
        ((5, 3), True)
    """
    import numpy as np

    out = np.empty((n, dim), dtype=np.float32)
    for start in range(0, n, block):
        part = out[start:start + block]
        rng.standard_normal(part.shape, dtype=np.float32, out=part)
        part /= np.linalg.norm(part, axis=1, keepdims=True)
    return out


def paper_shape_folder(shape: str, tokenizer_dir, folder, device: str = "cpu", seed: int = 0,
                       dtype=torch.bfloat16) -> str:
    """A model folder of ``shape`` with random weights and ``tokenizer_dir``'s tokenizer (and chat
    template) padded with added tokens ``<|padN|>`` to the shape's vocabulary (Qwen2.5's 151,936):
    a paper-shape policy the loop can run end to end where no pretrained weights can be downloaded.

    Example:
        >>> import tempfile  # doctest: +SKIP
        >>> paper_shape_folder("tiny-test", "data/pretrained/warmstart/KEY", tempfile.mkdtemp())  # doctest: +SKIP
    """
    from transformers import AutoTokenizer

    spec = SHAPES[shape]
    tok = AutoTokenizer.from_pretrained(str(tokenizer_dir))
    if len(tok) > spec["vocab_size"]:
        raise ValueError(f"{tokenizer_dir}: its tokenizer has {len(tok)} tokens, more than {shape}'s vocabulary "
                         f"({spec['vocab_size']})")
    tok.add_tokens([f"<|pad{i}|>" for i in range(spec["vocab_size"] - len(tok))])
    torch.manual_seed(seed)
    model = random_model(spec, device, dtype)
    for config in (model.config, model.generation_config):
        config.eos_token_id, config.pad_token_id = tok.eos_token_id, tok.pad_token_id
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    del model
    _reset_peak(device)
    return str(folder)


def _loop_inputs(db, preset: str, n_questions: int, overrides: dict | None = None):
    """(config, search tool, questions) of ``preset`` with ``overrides`` on the store ``db``: the tiny world's
    test questions, ``n_questions`` of them drawn with a fixed seed."""
    from workbench import store
    from workbench.config import preset as get_preset
    from workbench.policy.rollout import load_questions
    from workbench.search.tool import SearchTool

    if db is None:
        raise ValueError("--parts logprobs/loop need --db (a store with a world)")
    cfg = get_preset(preset, **(overrides or {}))
    con = store.connect(db, read_only=True)
    try:  # closed before a round's own read-write connection to the same store
        df = load_questions(con, "tinyworld", "test")
        questions = df.sample(n=min(n_questions, len(df)), random_state=0).question.tolist()
        return cfg, SearchTool(con, index=cfg.search.index, topk=cfg.search.topk), questions
    finally:
        con.close()


def bench_logprobs(model, db, preset: str, device: str, overrides: dict | None = None, n_questions: int = 64,
                   group: int = 4, clip_eps: float = 0.2) -> dict:  # pragma: no cover - CUDA + vLLM only
    """vLLM's per-token log-probs (served in bfloat16, raw logits) against the trainer's own
    recomputation of the same sampled tokens (``Policy.token_logprobs``), float32 and bfloat16:
    ``rollout`` of ``n_questions`` x ``group`` trajectories from ``model`` (multi-turn, searches),
    then the difference over generated tokens: mean/p99/max |delta| (nats), the share of tokens
    whose ratio exp(delta) leaves PPO's clip range [1 - eps, 1 + eps] from precision alone, and the
    mean |sum of delta| a trajectory."""
    from workbench.policy.generation import VLLMBackend
    from workbench.policy.model import Policy
    from workbench.policy.rollout import response_logprobs, rollout

    cfg, search, questions = _loop_inputs(db, preset, n_questions, overrides)
    policy = Policy.load(model, device=device, dtype=torch.float32)
    policy.backend = VLLMBackend(model, policy.tokenizer, logprobs=True, gpu_memory_utilization=0.3, seed=0)
    r = cfg.rollout
    rows = rollout(policy, search, questions, group, max_turns=r.max_turns, topk=cfg.search.topk,
                   temperature=r.temperature, top_p=r.top_p, max_new_tokens=r.max_new_tokens,
                   max_total_tokens=r.max_total_tokens, seed=0)
    masks = [torch.tensor(t.loss_mask, dtype=torch.bool) for t in rows]
    served = [torch.tensor(t.old_logprobs, dtype=torch.float32) for t in rows]
    out = {"model": str(model), "trajectories": len(rows), "generated_tokens": int(sum(m.sum() for m in masks)),
           "mean_turns": sum(t.turns for t in rows) / len(rows), "served_dtype": "bfloat16", "clip_eps": clip_eps}
    for name, dtype in (("float32", torch.float32), ("bfloat16", torch.bfloat16)):
        policy.model.to(dtype)
        deltas = [(s - t)[m] for s, t, m in zip(served, response_logprobs(policy, rows, 32), masks)]
        d = torch.cat(deltas)
        out[f"vs_trainer_{name}"] = {
            "mean_abs": float(d.abs().mean()), "p99_abs": float(d.abs().quantile(0.99)), "max_abs": float(d.abs().max()),
            "share_outside_clip": float(((d.exp() - 1).abs() > clip_eps).float().mean()),
            "mean_abs_sequence_sum": float(torch.stack([x.sum() for x in deltas]).abs().mean())}
    del policy
    _reset_peak(device)
    return out


@contextlib.contextmanager
def gc_seconds():
    """Seconds the garbage collector ran inside the block, by generation (``gc.callbacks``): the
    rollout's Python work per decode step includes it, and a large heap makes full collections slow.

    Example:
        >>> with gc_seconds() as spent:
        ...     _ = gc.collect()
        >>> spent["collections"][2] >= 1 and spent["seconds"] >= 0
        True
    """
    spent = {"seconds": 0.0, "collections": [0, 0, 0]}
    started = []

    def callback(phase, info):
        if phase == "start":
            started.append(time.perf_counter())
        elif started:
            spent["seconds"] += time.perf_counter() - started.pop()
            spent["collections"][info["generation"]] += 1
    gc.callbacks.append(callback)
    try:
        yield spent
    finally:
        gc.callbacks.remove(callback)


def profile_top(profiler, n: int = 25) -> list[dict]:
    """The ``n`` functions with the most time of their own in a finished ``cProfile.Profile``.

    Example:
        >>> import cProfile
        >>> pr = cProfile.Profile(); _ = pr.runcall(sorted, range(1000)); top = profile_top(pr, 3)
        >>> sorted(top[0]) == ["calls", "cumtime_s", "function", "tottime_s"]
        True
    """
    import pstats

    stats = pstats.Stats(profiler).stats
    rows = sorted(stats.items(), key=lambda kv: -kv[1][2])[:n]
    return [{"function": f"{Path(file).name}:{line}:{name}", "calls": calls, "tottime_s": round(tt, 4),
             "cumtime_s": round(ct, 4)} for (file, line, name), (_, calls, tt, ct, _) in rows]


def bench_loop(folder, spec, db, preset: str, device: str, engines, batch: int, bandwidth: float,
               overrides: dict | None = None, group: int = 4, profile: bool = False) -> dict:
    """``rollout`` as the round calls it (multi-turn, stop strings, masks, the search tool, the
    preset's turn and token budgets) on the model in ``folder``, ``batch`` trajectories (questions x
    ``group``) per engine: generated tokens/s, turns, and the decode share of the roofline at the
    measured mean context. A random model never answers: every row uses its turns. Each engine is
    timed cold (``<engine>_cold``: a fresh engine's first pass, which pays one-time costs), then
    warm. vLLM is timed on one engine as the loop runs it (stop strings, one seed per row), with two
    experiments alone and together: ``VLLMBackend.row_seeds`` off (``*_engine_seed``: the engine's
    one sampling stream; vLLM's V1 runner draws the noise of each seeded request with a kernel of
    its own) and, where every stop string is one token, ``VLLMBackend.stop_by_token``
    (``vllm_stop_tokens*``: no per-step detokenisation), then as the loop runs it again
    (``vllm_again``: the drift) and after loading the weights as an update does
    (``vllm_after_sync``; not with the engine core in a process of its own, where merged weights
    would be pickled across). The prefix cache is emptied before each timing. Each timing reports
    the garbage collector's seconds in it (``gc_s``); with ``profile`` vLLM runs the loop's way once
    more under ``cProfile`` (``vllm_profiled``, slower by the profiler's overhead) and ``profile``
    lists the functions with the most time of their own: where this process's time goes between
    decode steps. The engine's settings come from the environment (``VLLM_USE_V2_MODEL_RUNNER``,
    ``VLLM_ENABLE_V1_MULTIPROCESSING``), so ``scripts/gpu_engine.sh`` runs variants apart."""
    from workbench.policy import protocol
    from workbench.policy.model import Policy
    from workbench.policy.rollout import rollout

    cfg, search, questions = _loop_inputs(db, preset, max(1, batch // group), overrides)
    r = cfg.rollout
    kwargs = dict(max_turns=r.max_turns, topk=cfg.search.topk, temperature=r.temperature, top_p=r.top_p,
                  max_new_tokens=r.max_new_tokens, max_total_tokens=r.max_total_tokens)
    out = {"batch": batch, "group": group, "rollout": dataclasses.asdict(r), "engines": {},
           "env": {k: os.environ.get(k) for k in ("VLLM_USE_V2_MODEL_RUNNER", "VLLM_ENABLE_V1_MULTIPROCESSING")}}

    def timed(policy, name: str) -> dict:
        if hasattr(policy.backend, "llm"):  # no variant reads prefixes another one cached
            policy.backend.llm.reset_prefix_cache()
        search.clear_cache()  # nor searches: each timing searches as the loop's first pass does
        _sync(device)
        start = time.perf_counter()
        with gc_seconds() as spent:
            rows = rollout(policy, search, questions, group, **kwargs, seed=0)
        seconds = time.perf_counter() - start
        generated = sum(sum(t.loss_mask) for t in rows)
        context, per_row = sum(t.length for t in rows) / len(rows), generated / len(rows)
        roof = decode_roofline(spec, len(rows), int(context - per_row), int(per_row), bandwidth)
        row = {"seconds": seconds, "generated_tokens": generated, "tokens_per_s": generated / seconds,
               "mean_turns": sum(t.turns for t in rows) / len(rows), "mean_length": context,
               "generation_s": sum(t.gen_seconds for t in rows), "roofline_tokens_per_s": roof["tokens_per_s"],
               "roofline_share": generated / seconds / roof["tokens_per_s"], "gc_s": spent["seconds"],
               "gc_collections": spent["collections"]}
        log.info("loop %s %s", name, json.dumps(row))  # a call cut short still shows what was measured
        return row

    for engine in engines:
        try:
            extra = {"gpu_memory_utilization": 0.5} if engine == "vllm" else {}
            policy = Policy.load(folder, device=device, dtype=torch.bfloat16, backend=engine, **extra)
        except ImportError as err:
            out["engines"][engine] = {"skipped": f"{type(err).__name__}: {err}"}
            continue
        # a fresh engine's first pass pays one-time costs (vLLM's: 10-14k tokens/s, then 17-20.5k on the H200)
        out["engines"][f"{engine}_cold"] = timed(policy, f"{engine}_cold")
        out["engines"][engine] = timed(policy, engine)
        if engine == "vllm":  # the experiments on the same engine, the loop's way again (drift), then after a sync
            variants = [("vllm_engine_seed", False, False)]
            if policy.backend.stop_tokens(protocol.STOP_STRINGS):
                variants += [("vllm_stop_tokens", True, True), ("vllm_stop_tokens_engine_seed", True, False)]
            for name, stop_by_token, row_seeds in (*variants, ("vllm_again", False, True)):
                policy.backend.stop_by_token, policy.backend.row_seeds = stop_by_token, row_seeds
                out["engines"][name] = timed(policy, name)
            if os.environ.get("VLLM_ENABLE_V1_MULTIPROCESSING") != "1":  # merged weights cross no process
                policy.backend.sync(policy.model)  # as after each update: does a weight load cost the next pass?
                out["engines"]["vllm_after_sync"] = timed(policy, "vllm_after_sync")
            if profile:
                import cProfile

                profiler = cProfile.Profile()
                out["engines"]["vllm_profiled"] = profiler.runcall(timed, policy, "vllm_profiled")
                out["profile"] = profile_top(profiler)
                log.info("loop profile %s", json.dumps(out["profile"]))
        del policy
        _reset_peak(device)
    hf, vllm = out["engines"].get("hf", {}), out["engines"].get("vllm", {})
    out["vllm_over_hf"] = vllm["tokens_per_s"] / hf["tokens_per_s"] if hf.get("tokens_per_s") and \
        vllm.get("tokens_per_s") else None
    return out


class _ModeLog(logging.Handler):
    """Keeps the gradient checkpointing mode ``train.make_policies`` logs when it sets the policy up."""

    def __init__(self):
        super().__init__()
        self.mode = None

    def emit(self, record):
        if record.msg.startswith("update: gradient checkpointing"):
            self.mode = record.args[0]


def bench_round(model: str, db, preset: str, overrides: dict, device: str) -> dict:
    """One CoEvoKG round with ``model`` on ``db`` (the bench's own run, replaced each time):
    seconds per stage, peak GPU memory, and the paper's 314 steps extrapolated. The rollouts'
    seconds are split into generation and retrieval (``rollouts_split_s``: the solver trajectories'
    ``gen_seconds`` and ``search_seconds``, whose sum is ``rollout``'s own time within the stage).
    What ``workbench plan --calibrate`` needs beside them: the solver trajectories' mean tokens
    (prompt by ``model``'s tokenizer, generated, retrieved), their searches, and the update's
    gradient checkpointing mode as the run chose it (None where it logs none: a full fine-tune)."""
    from transformers import AutoTokenizer

    from workbench import store
    from workbench.method.train import train

    if db is None:
        raise ValueError("--round-model needs --db (a store with a world and its chain pool)")
    _reset_peak(device)
    con = store.connect(db)
    modes, logger = _ModeLog(), logging.getLogger("workbench.method.train")
    level = logger.level
    logger.addHandler(modes)
    logger.setLevel(logging.INFO)  # the line is at INFO: a quieter logger would never hand it over
    try:
        (row,) = train(con, run="bench-gpu-round", method="coevokg", preset=preset, steps=1, model=model,
                       overrides=overrides, progress=False, log=None, overwrite=True)
        generate, retrieve, generated, retrieved, searches = con.execute(
            "SELECT coalesce(sum(gen_seconds), 0), coalesce(sum(search_seconds), 0), avg(n_generated), "
            "avg(n_retrieved), coalesce(sum(len(queries)), 0) FROM trajectories "
            "WHERE run = 'bench-gpu-round' AND role = 'solver'").fetchone()
        prompts = [p for (p,) in con.execute("SELECT prompt FROM trajectories WHERE run = 'bench-gpu-round' "
                                               "AND role = 'solver'").fetchall()]
    finally:
        logger.removeHandler(modes)
        logger.setLevel(level)
        con.close()
    tok = AutoTokenizer.from_pretrained(str(model))
    prompt = sum(len(tok(p, add_special_tokens=False)["input_ids"]) for p in prompts) / max(1, len(prompts))
    stages = {k[5:]: v for k, v in row.items() if k.startswith("time_")}
    seconds = sum(v for k, v in stages.items() if k != "validation")
    from workbench.config import preset as get_preset

    per_step = seconds / get_preset(preset, **overrides).method.minibatches  # optimiser steps a round
    return {"model": str(model), "preset": preset, "overrides": overrides, "stages_s": stages,
            "rollouts_split_s": {"generate": generate, "retrieve": retrieve}, "round_s": seconds,
            "checkpointing": modes.mode, "trajectories": len(prompts), "searches": int(searches),
            "trajectory_tokens_mean": prompt + float(generated or 0) + float(retrieved or 0),
            "generated_tokens_mean": float(generated or 0),
            "peak_gib": _peak_gib(device), "s_per_optimiser_step": per_step,
            "paper_314_steps_h": per_step * PAPER_STEPS / 3600, "search_r1_s_per_step_8xh100": list(SEARCH_R1_STEP_S)}
