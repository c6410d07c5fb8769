"""Grouped-query attention without copying the KV cache, on the CPU, where no gradient flows.

Transformers' SDPA path hands torch's ``scaled_dot_product_attention`` the grouped key/value
heads directly (``enable_gqa``) only when there is no attention mask; with one (every left-padded
batch, so every generation) it first copies each layer's keys and values once per query head
(``repeat_kv``). On the CPU that copy of the whole KV cache at every decoding step is most of a
step: a 128-row decoding step of the tiny backbone over 600 cached tokens takes 87 ms with the
copy and 11 ms without. Torch's CPU kernel takes the mask with ``enable_gqa`` and gives the same
bits for the forward pass (tested), but not for the backward pass (the gradient of the shared
heads is summed in another order), so the grouped path is taken only where autograd is off
(``torch.no_grad``: generation, evaluation, the old-policy and reference log-probs). On CUDA,
Transformers' own rule stands (with a mask, ``enable_gqa`` would fall back to the math kernel there).
"""

from __future__ import annotations

import contextlib

import torch
from transformers.integrations import sdpa_attention

_TRANSFORMERS_RULE = getattr(sdpa_attention.use_gqa_in_sdpa, "transformers_rule", sdpa_attention.use_gqa_in_sdpa)


def _rule(attention_mask, key: torch.Tensor, value: torch.Tensor) -> bool:
    if key.device.type == "cpu" and not torch.is_grad_enabled():
        return key.shape[-1] == value.shape[-1]
    return _TRANSFORMERS_RULE(attention_mask, key, value)


_rule.transformers_rule = _TRANSFORMERS_RULE  # a reloaded module still finds Transformers' own


def install() -> None:
    """Make Transformers' SDPA attention take the grouped path as described above (idempotent;
    process-wide: any Hugging Face model with grouped-query heads on the CPU, with the same bits).

    Example:
        >>> install(); sdpa_attention.use_gqa_in_sdpa is _rule
        True
    """
    sdpa_attention.use_gqa_in_sdpa = _rule


@contextlib.contextmanager
def copying_kv():
    """Transformers' own rule for the duration (the benchmark's baseline; process-wide, so not
    for use while another thread generates).

    Example:
        >>> with copying_kv(): sdpa_attention.use_gqa_in_sdpa is _TRANSFORMERS_RULE
        True
    """
    current = sdpa_attention.use_gqa_in_sdpa
    sdpa_attention.use_gqa_in_sdpa = _TRANSFORMERS_RULE
    try:
        yield
    finally:
        sdpa_attention.use_gqa_in_sdpa = current
