"""Seconds to write a LoRA policy's merged model: ``lora.save_merged`` (built on the meta device)
against the way it was built before 2026-12-02 (a randomly initialised model given the merged
weights), at a Qwen2 shape with random weights, on this machine's CPU; and whether the two
directories hold the same tensors. Each way runs twice, alternating, and its faster time counts
(the first call of either pays one-time costs).

    PYTHONPATH=$PWD python3 dev/save_merged_bench.py   # Qwen2.5-0.5B's shape
    PYTHONPATH=$PWD python3 dev/save_merged_bench.py --layers 36 --hidden 2048 --inter 11008 --heads 16  # 3B's
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import torch
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM, Qwen2Config, Qwen2ForCausalLM

from workbench.policy import lora


def random_init_save(model, directory):
    """The replaced way: a model initialised at random on the CPU, then given the merged weights."""
    base = model.get_base_model()
    state = {k: v.to("cpu") for k, v in lora.merged_state_dict(model).items()}
    plain = AutoModelForCausalLM.from_config(base.config).to(next(iter(state.values())).dtype)
    plain.load_state_dict(state, strict=True)
    plain.save_pretrained(directory)


def tensors(directory):
    out = {}
    for f in sorted(Path(directory).glob("*.safetensors")):
        out.update(load_file(str(f)))
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--layers", type=int, default=24)
    p.add_argument("--hidden", type=int, default=896)
    p.add_argument("--inter", type=int, default=4864)
    p.add_argument("--vocab", type=int, default=151_936)
    p.add_argument("--heads", type=int, default=14)
    p.add_argument("--kv-heads", dest="kv_heads", type=int, default=2)
    args = p.parse_args()
    cfg = Qwen2Config(hidden_size=args.hidden, num_hidden_layers=args.layers, num_attention_heads=args.heads,
                      num_key_value_heads=args.kv_heads, intermediate_size=args.inter, vocab_size=args.vocab,
                      tie_word_embeddings=True)
    torch.manual_seed(0)
    model = lora.add_lora(Qwen2ForCausalLM(cfg).to(torch.bfloat16), rank=16, alpha=32, seed=0)
    with torch.no_grad():  # non-zero adapters, so the merge changes the weights
        for name, param in model.named_parameters():
            if "lora_B" in name:
                param.normal_(0, 0.01)
    row = {"params": sum(p.numel() for n, p in model.named_parameters() if "lora_" not in n)}
    with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
        for _ in range(2):
            for name, fn, d in (("random_init_s", random_init_save, a), ("meta_s", lora.save_merged, b)):
                start = time.perf_counter()
                fn(model, d)
                row[name] = min(row.get(name, float("inf")), round(time.perf_counter() - start, 2))
        ta, tb = tensors(a), tensors(b)
        row["same_tensors"] = ta.keys() == tb.keys() and all(torch.equal(ta[k], tb[k]) for k in ta)
    row["speedup"] = round(row["random_init_s"] / row["meta_s"], 2)
    print(json.dumps(row))


if __name__ == "__main__":
    main()
