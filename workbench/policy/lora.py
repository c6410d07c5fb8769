"""LoRA adapters on the policy (``method.lora_rank`` > 0): PEFT, or Unsloth on CUDA when installed.

The reference policy of the KL term is the adapter-free base (``model.disable_adapter()``), so
LoRA training holds one copy of the base and no second model. A checkpoint holds the adapter only
(:func:`save_adapter`, :func:`load_adapter`); :func:`merged_tensors` gives the base's weights
with the adapter folded in, one at a time and beside the base (never in place: the base stays
bit-exact as the reference), for the vLLM weight sync and for a standalone ``best`` model
(:func:`save_merged`).

Example:
    >>> from workbench.config import preset
    >>> from workbench.policy.tokenizer import train_tokenizer
    >>> from workbench.policy.model import tiny_model
    >>> tok = train_tokenizer(["some text"] * 5, vocab_size=300)
    >>> m = add_lora(tiny_model(preset("smoke").backbone, tok, 0), rank=4, alpha=8, seed=0)
    >>> is_lora(m), sorted(merged_state_dict(m))[0]
    (True, 'lm_head.weight')
"""

from __future__ import annotations

import copy
import importlib.util
import logging
import sys
from collections.abc import Iterator
from pathlib import Path

import torch

# The linear layers of a Qwen2 / Llama block: "all linear layers" in the Unsloth measurement.
TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
ADAPTER = "default"  # PEFT's name for the one adapter
# Unsloth patches these when it is imported; imported before it, they run unpatched ("may run slower or
# encounter memory issues", its warning on the H200 in issue 44)
PATCHED_BY_UNSLOTH = ("transformers", "peft", "trl")
log = logging.getLogger(__name__)


def is_lora(model) -> bool:
    """Whether ``model`` carries LoRA adapters (a PEFT model)."""
    return hasattr(model, "peft_config")


def _peft():
    try:
        import peft
    except ImportError as err:  # the original error, shown as it is
        raise ImportError(f"method.lora_rank > 0 needs peft (pip install peft==0.21.2): {err}") from err
    return peft


def _devices(model) -> list[int]:
    device = next(model.parameters()).device
    return [device.index or 0] if device.type == "cuda" else []


def add_lora(model, rank: int, alpha: float, seed: int, gradient_checkpointing: str = "off", unsloth: bool = False):
    """``model`` with trainable rank-``rank`` adapters on every block linear layer (the base frozen).

    The adapters' initial values come from ``seed`` alone (the caller's RNG is untouched). With
    ``unsloth`` (a model that ``FastLanguageModel`` loaded; CUDA only, not run on this CPU) the
    adapters are Unsloth's; else PEFT's. ``gradient_checkpointing`` is a mode of
    ``policy.checkpointing`` other than 'auto' ('off', 'standard': each block's activations
    recomputed in the backward pass, the same values; 'offload': Unsloth's only).

    Example: see the module docstring.
    """
    if rank < 1:
        raise ValueError(f"method.lora_rank={rank}: add_lora needs a rank >= 1 (0 = full fine-tune)")
    if gradient_checkpointing not in ("off", "standard", "offload"):
        raise ValueError(f"add_lora: gradient_checkpointing={gradient_checkpointing!r}: expected 'off', 'standard' "
                         "or 'offload' (checkpointing.choose resolves 'auto')")
    if unsloth:  # pragma: no cover - CUDA + unsloth only
        from unsloth import FastLanguageModel

        # Unsloth's values: False, True (recompute) or "unsloth" (recompute, block inputs offloaded to the CPU)
        use = {"off": False, "standard": True, "offload": "unsloth"}[gradient_checkpointing]
        return FastLanguageModel.get_peft_model(
            model, r=rank, lora_alpha=alpha, lora_dropout=0.0, bias="none", target_modules=list(TARGETS),
            use_gradient_checkpointing=use, random_state=seed)
    if gradient_checkpointing == "offload":
        raise ValueError("method.gradient_checkpointing=offload is Unsloth's (a CUDA device with unsloth installed "
                         "and method.lora_rank > 0); use standard or auto")
    peft = _peft()
    if gradient_checkpointing == "standard":
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    present = {name.rsplit(".", 1)[-1] for name, _ in model.named_modules()}
    targets = [t for t in TARGETS if t in present] or "all-linear"  # another architecture: PEFT's rule
    config = peft.LoraConfig(r=rank, lora_alpha=alpha, lora_dropout=0.0, bias="none", target_modules=targets,
                             task_type="CAUSAL_LM")
    with torch.random.fork_rng(devices=_devices(model)):
        torch.manual_seed(seed)
        return peft.get_peft_model(model, config)


def save_adapter(model, directory: str | Path) -> Path:
    """Write the adapter alone (``adapter_config.json``, ``adapter_model.safetensors``)."""
    directory = Path(directory)
    model.save_pretrained(directory)
    return directory


def load_adapter(model, directory: str | Path) -> None:
    """Set ``model``'s adapter to the one saved in ``directory`` (same rank and targets), in place."""
    from safetensors.torch import load_file

    result = _peft().set_peft_model_state_dict(model, load_file(str(Path(directory) / "adapter_model.safetensors")),
                                               adapter_name=ADAPTER)
    missing = [k for k in getattr(result, "missing_keys", []) if "lora_" in k]
    if missing:
        raise ValueError(f"adapter {directory}: it lacks {len(missing)} adapter tensors of this model "
                         f"(e.g. {missing[0]}); was it saved with another method.lora_rank?")


def merged_tensors(model) -> Iterator[tuple[str, torch.Tensor]]:
    """The base model's weights (Hugging Face names) with each adapter's delta added, one tensor at
    a time: new tensors, the base unchanged. Each delta is computed as its weight is reached, so a
    consumer that keeps none of them (the vLLM sync, :func:`save_merged`'s copy to the CPU) holds
    one extra weight on the GPU, not a second model (the merge that held every delta and every
    merged weight added 15.7 GiB at 3B and 36.7 GiB at 7B, this one 0.2 / 0.6 GiB:
    ``dev/merge_peak.py``, LOG.md session 19). Tied weights appear under both names, as in the
    base's own.

    Example: see the module docstring.
    """
    from peft.tuners.lora import LoraLayer

    base = model.get_base_model()
    adapted = {name: module for name, module in base.named_modules()
               if isinstance(module, LoraLayer) and ADAPTER in module.lora_A}
    with torch.no_grad():
        for key, value in base.state_dict().items():
            if ".lora_" in key:
                continue
            owner, sep, leaf = key.rpartition(".base_layer.")
            if sep and leaf == "weight" and owner in adapted:
                value = value + adapted[owner].get_delta_weight(ADAPTER).to(value.dtype)
            yield key.replace(".base_layer.", "."), value.detach()


def merged_state_dict(model) -> dict[str, torch.Tensor]:
    """:func:`merged_tensors` as one dict (every merged weight held at once: for tests and small
    models).

    Example: see the module docstring.
    """
    return dict(merged_tensors(model))


def save_merged(model, directory: str | Path) -> Path:
    """Write a plain Hugging Face model whose weights are ``merged_state_dict(model)``: what
    ``Policy.save`` writes for a LoRA policy, so the saved directory loads anywhere (eval, vLLM).

    The model written is built on the meta device and given the merged tensors: no random
    initialisation of weights that are all replaced (Qwen2 0.5B shape on a 2-core CPU: 25.0 s
    against 1.97 s; ``dev/save_merged_bench.py``).
    """
    from transformers import AutoModelForCausalLM

    base = model.get_base_model()
    state = {k: v.to("cpu") for k, v in merged_tensors(model)}
    with torch.device("meta"):
        plain = AutoModelForCausalLM.from_config(base.config, dtype=next(iter(state.values())).dtype)
    plain.load_state_dict(state, strict=True, assign=True)
    plain.tie_weights()  # assign gave tied names separate tensors
    if getattr(base, "generation_config", None) is not None:  # e.g. Qwen-Instruct's second eos id
        plain.generation_config = copy.deepcopy(base.generation_config)
    plain.save_pretrained(directory)
    return Path(directory)


def unsloth_available(device) -> bool:
    """Whether Unsloth can be used: a CUDA device and the package installed (the gpu extra)."""
    return str(device).startswith("cuda") and importlib.util.find_spec("unsloth") is not None


def unsloth_wanted(device, lora_rank: int) -> bool:
    """Whether a policy on ``device`` training LoRA of ``lora_rank`` loads through Unsloth
    (``Policy.load``'s rule): rank > 0, a CUDA device and the package installed.

    Example:
        >>> unsloth_wanted("cpu", 16), unsloth_wanted("cuda", 0)
        (False, False)
    """
    return lora_rank > 0 and unsloth_available(device)


IMPORT_ORDER: dict = {}  # what the first import_unsloth_first call of this process found (bench gpu reports it)


def import_unsloth_first(device, lora_rank: int) -> dict:
    """Import Unsloth now when this process will load its policy through it (:func:`unsloth_wanted`),
    so that it comes before Transformers, PEFT and TRL; the entry points (``train``, ``bench gpu``)
    call this before anything imports those. Returns (and keeps in :data:`IMPORT_ORDER`, first call
    only) ``{"unsloth": wanted, "imported_before": [the patched libraries already imported]}``; a
    non-empty list with Unsloth wanted is logged as a warning (an entry point imported them first).

    Example:
        >>> import_unsloth_first("cpu", 16)["unsloth"]
        False
    """
    before = [name for name in PATCHED_BY_UNSLOTH if name in sys.modules]
    wanted = unsloth_wanted(device, lora_rank)
    if wanted and "unsloth" not in sys.modules:  # pragma: no cover - CUDA + unsloth only
        if before:
            log.warning("Unsloth is imported after %s: that code path imported them first", ", ".join(before))
        import unsloth  # noqa: F401  (its import patches Transformers, PEFT and TRL)
    found = {"unsloth": wanted, "imported_before": before}
    if not IMPORT_ORDER:
        IMPORT_ORDER.update(found)
    return found
