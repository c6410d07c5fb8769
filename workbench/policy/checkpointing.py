"""Gradient checkpointing of the update (``method.gradient_checkpointing``, ours; issue 44).

Modes: ``off`` (autograd keeps every block's activations: no recompute), ``standard`` (each
block's activations recomputed in the backward pass, Transformers' / Unsloth's non-offloading
checkpointing), ``offload`` (Unsloth's ``"unsloth"`` checkpointing: recomputed, and the kept block
inputs moved to CPU memory; LoRA through Unsloth only) and ``auto``: ``off`` on the CPU (the tiny
tier's update, as before), and on CUDA ``off`` when :func:`activation_bytes` of a worst-case
micro-batch (``method.micro_batch`` rows of ``rollout.max_total_tokens``) is at most
:data:`HEADROOM` of the free memory when the policy is set up (after vLLM took its share), else
``standard``. Unsloth's offload ran on the H200 with ~80 GiB free (issue 44); it saves GPU memory
the paper shapes do not need, and recomputation costs a third more update FLOPs (8 N T against
6 N T).

Example:
    >>> from transformers import Qwen2Config
    >>> c = Qwen2Config(hidden_size=2048, intermediate_size=11008, num_hidden_layers=36)
    >>> round(activation_bytes(c, 8 * 1024) / 2 ** 30, 1)  # the issue's 3B update, 8 x 1,024 tokens
    29.4
    >>> choose("auto", "cuda", c, 8 * 1024, free_bytes=130 * 2 ** 30), choose("auto", "cuda", c, 8 * 4096, 80 * 2 ** 30)
    ('off', 'standard')
"""

from __future__ import annotations

MODES = ("auto", "off", "standard", "offload")
HEADROOM = 0.5  # ours: auto keeps activations only when the estimate is at most this share of the free memory


def activation_bytes(config, tokens: int, dtype_bytes: int = 2) -> int:
    """Bytes autograd keeps for ``tokens`` tokens through every block without checkpointing: per
    block and token 10 x hidden + 3 x MLP width values (the estimate ``plan.memory_per_gpu`` makes
    for the one block a checkpointed backward recomputes), bfloat16 by default.

    Example: see the module docstring.
    """
    per_block = 10 * config.hidden_size + 3 * config.intermediate_size
    return int(tokens) * config.num_hidden_layers * per_block * dtype_bytes


def choose(setting: str, device, config, tokens: int, free_bytes: int | None = None) -> str:
    """The mode ``setting`` means for a policy on ``device`` with model ``config`` whose largest
    micro-batch holds ``tokens`` tokens (``auto``: module docstring; ``free_bytes`` defaults to the
    device's free memory now).

    Example: see the module docstring.
    """
    if setting not in MODES:
        raise ValueError(f"method.gradient_checkpointing={setting!r}: expected one of {list(MODES)}")
    if setting != "auto":
        return setting
    if not str(device).startswith("cuda"):
        return "off"
    if free_bytes is None:  # pragma: no cover - CUDA only
        import torch

        free_bytes = torch.cuda.mem_get_info(torch.device(device))[0]
    return "off" if activation_bytes(config, tokens) <= HEADROOM * free_bytes else "standard"
