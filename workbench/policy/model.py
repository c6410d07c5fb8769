"""The policy: a causal LM with its tokenizer, chat template and generation backend.

The tiny backbone is a Qwen2-architecture model (the paper's Qwen2.5 family, seed 000 section
4.1) sized by ``BackboneConfig``: smoke a few hundred thousand parameters, tiny a few million,
tied input/output embeddings. Any Hugging Face causal LM directory or hub id (Qwen2.5-3B-Instruct,
Llama-3.1-8B-Instruct) loads through ``Policy.load`` with its own chat template.

Log-probabilities: ``Policy.generate`` and ``Policy.token_logprobs`` both return log-probs under
the *unmodified* policy (softmax of the raw logits: no temperature, no top-p), because that is
the distribution the policy-gradient loss and the KL term are written in. Sampling itself uses
temperature and top-p; the sampled token's raw log-prob is what is recorded.

Example:
    >>> from workbench.config import preset
    >>> from workbench.policy.tokenizer import train_tokenizer
    >>> tok = train_tokenizer(["a tiny corpus for a tiny model"] * 10, vocab_size=300)
    >>> policy = Policy(tiny_model(preset("smoke").backbone, tok, seed=0), tok)
    >>> gens = policy.generate([policy.chat_prompt("hi")], max_new_tokens=4, temperature=0, top_p=1)
    >>> len(gens[0].token_ids) <= 4
    True
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Sequence

import torch

from workbench.policy.generation import Generation, HFBackend


def tiny_config(backbone_cfg, tokenizer):
    """The Qwen2 config of the tiny backbone: sizes from ``BackboneConfig``, vocab from the tokenizer.

    The MLP width is 4 x hidden (ours; the paper's backbones are pretrained models). The vocab is
    the tokenizer's true size, which can be below ``backbone_cfg.vocab_size`` on a small corpus.

    Example:
        >>> from workbench.config import preset
        >>> from workbench.policy.tokenizer import train_tokenizer
        >>> tok = train_tokenizer(["some text"] * 5, vocab_size=300)
        >>> tiny_config(preset("smoke").backbone, tok).hidden_size
        64
    """
    from transformers import Qwen2Config

    b = backbone_cfg
    if b.hidden_size % b.heads or b.heads % b.kv_heads:
        raise ValueError(f"backbone hidden_size={b.hidden_size}, heads={b.heads}, kv_heads={b.kv_heads}: "
                         "hidden_size must divide by heads and heads by kv_heads")
    return Qwen2Config(
        vocab_size=len(tokenizer), hidden_size=b.hidden_size, intermediate_size=4 * b.hidden_size,
        num_hidden_layers=b.layers, num_attention_heads=b.heads, num_key_value_heads=b.kv_heads,
        max_position_embeddings=4096, tie_word_embeddings=True, use_cache=True,
        pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id, bos_token_id=None,
    )


def tiny_model(backbone_cfg, tokenizer, seed: int):
    """A randomly initialised tiny Qwen2ForCausalLM; the same seed gives the same weights.

    Example:
        >>> from workbench.config import preset
        >>> from workbench.policy.tokenizer import train_tokenizer
        >>> tok = train_tokenizer(["some text"] * 5, vocab_size=300)
        >>> m = tiny_model(preset("smoke").backbone, tok, seed=0)
        >>> m.config.tie_word_embeddings
        True
    """
    from transformers import Qwen2ForCausalLM

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = Qwen2ForCausalLM(tiny_config(backbone_cfg, tokenizer))
    return model.eval()


def _default_device() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


class Policy:
    """A causal LM, its tokenizer and a generation backend, on one device.

    Example:
        >>> from workbench.config import preset
        >>> from workbench.policy.tokenizer import train_tokenizer
        >>> tok = train_tokenizer(["some text"] * 5, vocab_size=300)
        >>> p = Policy(tiny_model(preset("smoke").backbone, tok, seed=0), tok)
        >>> p.chat_prompt("Who?").endswith("<|im_start|>assistant\\n")
        True
    """

    def __init__(self, model, tokenizer, device: str | torch.device | None = None, backend=None):
        self.device = torch.device(device or _default_device())
        self.model = model.to(self.device)
        self.tokenizer = tokenizer
        if tokenizer.pad_token_id is None:  # e.g. Llama-3 ships without one; pad is always masked
            tokenizer.pad_token = tokenizer.eos_token
        tokenizer.padding_side = "left"
        if not getattr(tokenizer, "chat_template", None):
            raise ValueError("the tokenizer has no chat template; the solver prompt needs one")
        self.backend = backend or HFBackend(self.model, tokenizer)

    @classmethod
    def load(cls, path_or_hub_id: str | Path, device: str | None = None, dtype: torch.dtype | None = None) -> "Policy":
        """Load any Hugging Face causal LM directory or hub id, with its own chat template.

        On CUDA with the ``gpu`` extra installed (``unsloth``), the model loads through Unsloth's
        ``FastLanguageModel`` (its fused kernels make generation and training faster); otherwise
        through ``transformers.AutoModelForCausalLM``. The Unsloth path needs a GPU and is not
        exercised by the CPU tests. Offline runs (HF_HUB_OFFLINE=1) need the model in the cache.
        ``dtype`` defaults to bfloat16 on CUDA and float32 elsewhere; a policy that will be trained
        needs float32 weights (bf16 rounds away most optimiser steps).

        Example:
            >>> Policy.load("/no/such/model")  # doctest: +ELLIPSIS
            Traceback (most recent call last):
            ...
            ValueError: cannot load a causal LM from '/no/such/model': ...
        """
        device = device or _default_device()
        try:
            if str(device).startswith("cuda") and importlib.util.find_spec("unsloth") is not None:
                from unsloth import FastLanguageModel

                model, tokenizer = FastLanguageModel.from_pretrained(
                    model_name=str(path_or_hub_id), max_seq_length=4096, dtype=dtype, load_in_4bit=False)
                return cls(model, tokenizer, device)
            from transformers import AutoModelForCausalLM, AutoTokenizer

            tokenizer = AutoTokenizer.from_pretrained(str(path_or_hub_id))
            dtype = dtype or (torch.bfloat16 if str(device).startswith("cuda") else torch.float32)
            model = AutoModelForCausalLM.from_pretrained(str(path_or_hub_id), dtype=dtype)
        except (OSError, ValueError) as err:
            raise ValueError(f"cannot load a causal LM from {str(path_or_hub_id)!r}: "
                             f"{str(err).splitlines()[0]}") from err
        return cls(model.eval(), tokenizer, device)

    def save(self, directory: str | Path) -> Path:
        """Write a standard Hugging Face directory: config, weights, tokenizer, chat template.

        Example:
            >>> import tempfile
            >>> from workbench.config import preset
            >>> from workbench.policy.tokenizer import train_tokenizer
            >>> tok = train_tokenizer(["some text"] * 5, vocab_size=300)
            >>> d = Policy(tiny_model(preset("smoke").backbone, tok, 0), tok).save(tempfile.mkdtemp())
            >>> (d / "config.json").exists()
            True
        """
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        self.model.save_pretrained(directory)
        self.tokenizer.save_pretrained(directory)
        return directory

    def chat_prompt(self, user_message: str) -> str:
        """The model's chat template around one user turn, ready for the assistant to answer."""
        return self.tokenizer.apply_chat_template(
            [{"role": "user", "content": user_message}], tokenize=False, add_generation_prompt=True)

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` with no special tokens added (templates carry their own)."""
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    def generate(self, prompts: list[str], *, max_new_tokens: int, temperature: float, top_p: float,
                 stop: Sequence[str] = (), seed: int | None = None, choices=None) -> list[Generation]:
        """Continue each prompt; temperature 0 is greedy. See ``generate_ids``.

        Example: see the module docstring.
        """
        return self.generate_ids([self.encode(p) for p in prompts], max_new_tokens=max_new_tokens,
                                 temperature=temperature, top_p=top_p, stop=stop, seed=seed, choices=choices)

    def generate_ids(self, prompt_ids: list[list[int]], *, max_new_tokens: int, temperature: float,
                     top_p: float, stop: Sequence[str] = (), seed: int | None = None,
                     choices=None) -> list[Generation]:
        """Continue token-id prompts (multi-turn rollouts keep ids, never re-tokenise text).

        Each ``Generation`` holds only new tokens, up to and including the first stop string or
        the eos, with the raw-policy log-prob of each (module docstring). ``choices``
        (``generation.Choices``) constrains what follows a marker, per prompt.
        """
        if temperature < 0 or not 0 < top_p <= 1 or max_new_tokens < 1:
            raise ValueError(f"generate: need temperature >= 0, 0 < top_p <= 1, max_new_tokens >= 1; "
                             f"got {temperature}, {top_p}, {max_new_tokens}")
        extra = {"choices": choices} if choices is not None else {}
        return self.backend.generate(prompt_ids, max_new_tokens=max_new_tokens, temperature=temperature,
                                     top_p=top_p, stop=tuple(stop), seed=seed, **extra)

    def token_logprobs(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                       entropy_mask: torch.Tensor | None = None):
        """Per-token log-probs ``out[b, t] = log p(input_ids[b, t] | input_ids[b, :t])`` (raw logits).

        Padding may be on either side; positions follow the attention mask. ``out[:, 0]`` and
        padded positions are 0. Differentiable (the update step calls it under autograd). With
        ``entropy_mask`` (aligned with ``input_ids``) it returns ``(out, entropy)``: the policy's
        mean entropy over the masked positions' predictions, from the same forward pass (no grad).

        Example:
            >>> from workbench.config import preset
            >>> from workbench.policy.tokenizer import train_tokenizer
            >>> tok = train_tokenizer(["some text"] * 5, vocab_size=300)
            >>> p = Policy(tiny_model(preset("smoke").backbone, tok, 0), tok)
            >>> ids = torch.tensor([[5, 6, 7]])
            >>> p.token_logprobs(ids, torch.ones_like(ids)).shape
            torch.Size([1, 3])
        """
        input_ids = input_ids.to(self.device)
        attention_mask = attention_mask.to(self.device)
        position_ids = (attention_mask.long().cumsum(-1) - 1).clamp(min=0)
        logits = self.model(input_ids=input_ids, attention_mask=attention_mask,
                            position_ids=position_ids, use_cache=False).logits
        logp = torch.log_softmax(logits[:, :-1].float(), dim=-1)
        picked = logp.gather(-1, input_ids[:, 1:, None]).squeeze(-1)
        picked = picked * attention_mask[:, 1:].to(picked.dtype)
        out = torch.cat([torch.zeros_like(picked[:, :1]), picked], dim=1)
        if entropy_mask is None:
            return out
        with torch.no_grad():
            mask = entropy_mask[:, 1:].to(self.device, logp.dtype)
            entropy = -(logp.exp() * logp).sum(-1)
            return out, (entropy * mask).sum() / mask.sum().clamp(min=1.0)


def model_labels(model_path: str | Path) -> dict:
    """(backbone, method) of a model directory: its ``workbench.json`` when present (the warm
    start and the trainers write one), else the folder name as backbone and method 'base'."""
    meta = Path(model_path) / "workbench.json"
    if meta.exists():
        info = json.loads(meta.read_text())
        return {"backbone": str(info.get("backbone", Path(model_path).name)),
                "method": str(info.get("method", "base"))}
    return {"backbone": Path(str(model_path).rstrip("/")).name or "model", "method": "base"}
