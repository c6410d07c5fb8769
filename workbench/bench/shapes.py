"""The model shapes of Table 1's backbones (their published ``config.json`` values) and the
arithmetic on them that needs no GPU: parameters, KV-cache bytes, the HBM roofline of decoding, a
step's TFLOP/s. ``workbench plan`` reads the shapes to estimate memory; ``bench gpu`` builds random
models of them.

Example:
    >>> round(param_count(SHAPES["qwen2.5-3b"]) / 1e9, 2)
    3.09
    >>> round(decode_roofline(SHAPES["qwen2.5-3b"], batch=256, prompt_tokens=512, new_tokens=256)["tokens_per_s"], -3)
    101000.0
"""

from __future__ import annotations


# Architecture shapes (the models' published configs): hidden, MLP width, layers, heads, KV heads, vocab.
SHAPES = {
    "qwen2.5-3b": {"arch": "qwen2", "hidden_size": 2048, "intermediate_size": 11008, "num_hidden_layers": 36,
                   "num_attention_heads": 16, "num_key_value_heads": 2, "vocab_size": 151936,
                   "tie_word_embeddings": True},
    "qwen2.5-7b": {"arch": "qwen2", "hidden_size": 3584, "intermediate_size": 18944, "num_hidden_layers": 28,
                   "num_attention_heads": 28, "num_key_value_heads": 4, "vocab_size": 152064,
                   "tie_word_embeddings": False},
    "llama-3.1-8b": {"arch": "llama", "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
                     "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 128256,
                     "tie_word_embeddings": False},
    # a few hundred thousand parameters: the plumbing check the CPU tests run (the smoke tokenizer's vocabulary)
    "tiny-test": {"arch": "qwen2", "hidden_size": 64, "intermediate_size": 256, "num_hidden_layers": 2,
                  "num_attention_heads": 2, "num_key_value_heads": 1, "vocab_size": 1024, "tie_word_embeddings": True},
}


HBM_BYTES_PER_S = 4.8e12  # the H200's HBM3e bandwidth


def param_count(shape: dict) -> int:
    """Parameters of a shape: embeddings, per layer attention (Qwen2 has q/k/v biases) + gated MLP +
    two norms, the final norm, and an untied output layer.

    Example:
        >>> round(param_count(SHAPES["qwen2.5-3b"]) / 1e9, 2)
        3.09
    """
    h, inter, vocab = shape["hidden_size"], shape["intermediate_size"], shape["vocab_size"]
    layers = shape["num_hidden_layers"]
    kv = shape["num_key_value_heads"] * h // shape["num_attention_heads"]
    bias = h + 2 * kv if shape["arch"] == "qwen2" else 0
    per_layer = 2 * h * h + 2 * h * kv + bias + 3 * h * inter + 2 * h
    head = 0 if shape["tie_word_embeddings"] else vocab * h
    return vocab * h + layers * per_layer + h + head


def kv_bytes_per_token(shape: dict, dtype_bytes: int = 2) -> int:
    """KV-cache bytes one token holds: K and V of every layer's KV heads."""
    head_dim = shape["hidden_size"] // shape["num_attention_heads"]
    return 2 * shape["num_hidden_layers"] * shape["num_key_value_heads"] * head_dim * dtype_bytes


def decode_roofline(shape: dict, batch: int, prompt_tokens: int, new_tokens: int,
                    bandwidth: float = HBM_BYTES_PER_S, dtype_bytes: int = 2) -> dict:
    """The HBM bound on decoding: each step reads every weight the step uses once (an untied input
    embedding is only gathered) and each row's KV cache at its mean context (prompt + half the new
    tokens); ``tokens_per_s`` = batch x steps a second.

    Example: see the module docstring (the issue's ~100k tokens/s at batch 256).
    """
    untied_embedding = 0 if shape["tie_word_embeddings"] else shape["vocab_size"] * shape["hidden_size"]
    weight_bytes = (param_count(shape) - untied_embedding) * dtype_bytes
    kv_bytes = batch * (prompt_tokens + new_tokens / 2) * kv_bytes_per_token(shape, dtype_bytes)
    step_bytes = weight_bytes + kv_bytes
    return {"weight_bytes": int(weight_bytes), "kv_bytes": int(kv_bytes), "step_bytes": int(step_bytes),
            "bandwidth_bytes_per_s": bandwidth, "tokens_per_s": batch * bandwidth / step_bytes}


def step_tflops(shape: dict, tokens: int, seconds: float) -> float:
    """A training step's TFLOP/s by the usual 6 N T (forward 2 N T, backward 4 N T)."""
    return 6 * param_count(shape) * tokens / seconds / 1e12
