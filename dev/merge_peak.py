"""GPU memory the LoRA merge adds above the model: the merge as it was until session 19 (every
adapter's delta computed first, then every merged weight), every merged weight held at once
(``lora.merged_state_dict``), and ``lora.merged_tensors`` consumed one weight at a time (the vLLM
sync and ``save_merged`` now), at the paper shapes with random weights and LoRA r 16 on every
block linear layer (LOG.md, session 19).

    PYTHONPATH=$PWD python3 dev/merge_peak.py                       # on a CUDA GPU: 3B and 7B
    PYTHONPATH=$PWD python3 dev/merge_peak.py --shapes tiny-test --device cpu   # plumbing only
"""

from __future__ import annotations

import argparse
import json

import torch

from workbench.bench.gpu import random_model
from workbench.bench.shapes import SHAPES
from workbench.policy import lora

GIB = 2 ** 30


def merge_before_session_19(model) -> dict:
    """The replaced merge: all deltas, then all merged weights (both held until it returned)."""
    from peft.tuners.lora import LoraLayer

    base = model.get_base_model()
    deltas = {name: m.get_delta_weight(lora.ADAPTER) for name, m in base.named_modules()
              if isinstance(m, LoraLayer) and lora.ADAPTER in m.lora_A}
    out = {}
    with torch.no_grad():
        for key, value in base.state_dict().items():
            owner, sep, leaf = key.rpartition(".base_layer.")
            if ".lora_" not in key:
                out[key] = value + deltas[owner].to(value.dtype) if sep and leaf == "weight" and owner in deltas else value
    return out


def added_peak_gib(fn, device: str) -> float | None:
    """Peak allocated memory above what was allocated before ``fn()`` ran (None off CUDA)."""
    if device != "cuda":
        fn()
        return None
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    fn()
    torch.cuda.synchronize()
    return round((torch.cuda.max_memory_allocated() - before) / GIB, 2)


def merge_row(shape: str, device: str) -> dict:
    """The three peaks for one shape (the model is freed when this returns)."""
    torch.manual_seed(0)
    model = lora.add_lora(random_model(SHAPES[shape], device, torch.bfloat16), rank=16, alpha=32, seed=0)
    with torch.no_grad():  # non-zero adapters, so each merged weight is a new tensor
        for name, param in model.named_parameters():
            if "lora_B" in name:
                param.normal_(0, 0.01)
    weights = sum(p.numel() * p.element_size() for n, p in model.named_parameters() if "lora_" not in n)
    return {"shape": shape, "device": device, "weights_gib": round(weights / GIB, 2),
            "before_session_19_gib": added_peak_gib(lambda: merge_before_session_19(model), device),
            "all_held_gib": added_peak_gib(lambda: lora.merged_state_dict(model), device),
            "one_at_a_time_gib": added_peak_gib(lambda: [None for _ in lora.merged_tensors(model)], device)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shapes", nargs="+", default=["qwen2.5-3b", "qwen2.5-7b"], choices=sorted(SHAPES))
    p.add_argument("--device", default="cuda")
    args = p.parse_args()
    for shape in args.shapes:
        print(json.dumps(merge_row(shape, args.device)), flush=True)
        if args.device == "cuda":
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
