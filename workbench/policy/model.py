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

import json
from pathlib import Path
from typing import Sequence

import torch
from safetensors import SafetensorError

from workbench.limits import default_device
from workbench.policy import lora
from workbench.policy.generation import Generation, HFBackend, make_backend

# ours: token_logprobs computes at most this many float32 logits at once (512 MiB); a longer batch is
# cut into position chunks, each recomputed in the backward pass (a 3B model's 152k vocabulary at
# 8 x 1,024 tokens would otherwise hold ~5 GB of float32 logits, and as much again per softmax).
LOGPROB_CHUNK_ELEMENTS = 1 << 27
# Heads that do more than a linear layer (softcapping, scaling): token_logprobs uses their logits.
_HEAD_EXTRAS = ("final_logit_softcapping", "logit_scale", "logits_scaling")


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


# The bars transformers draws around every save and load (one tiny file here: they finish at once).
WEIGHT_BARS = ("Loading weights", "Writing model shards")
_quiet = False  # quiet_weight_bars has run in this process


def quiet_weight_bars() -> None:
    """Hide transformers' "Loading weights" / "Writing model shards" bars in this process (idempotent;
    ``Policy.load`` and ``Policy.save`` call it): they finish in milliseconds here and stay at 0% in
    a saved notebook. Other transformers and Hugging Face Hub bars (a model download) are kept.

    Example:
        >>> quiet_weight_bars()  # doctest: +SKIP
    """
    global _quiet
    if _quiet:
        return
    from transformers.utils import logging as hf_logging

    def hook(factory, args, kwargs):
        if kwargs.get("desc") in WEIGHT_BARS:
            return hf_logging.EmptyTqdm(*args, **kwargs)
        return factory(*args, **kwargs)

    hf_logging.set_tqdm_hook(hook)
    _quiet = True


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
        from workbench.policy import attention

        attention.install()  # no KV-cache copies for grouped-query heads on the CPU (same bits)
        self.device = torch.device(device or default_device())
        self.model = model.to(self.device)
        self.tokenizer = tokenizer
        if tokenizer.pad_token_id is None:  # e.g. Llama-3 ships without one; pad is always masked
            tokenizer.pad_token = tokenizer.eos_token
        tokenizer.padding_side = "left"
        if not getattr(tokenizer, "chat_template", None):
            raise ValueError("the tokenizer has no chat template; the solver prompt needs one")
        self.backend = backend or HFBackend(self.model, tokenizer)
        self.unsloth = False  # loaded through Unsloth's FastLanguageModel (its LoRA path then)
        self.checkpointing = "off"  # the update's gradient checkpointing (policy.checkpointing's modes)

    @classmethod
    def load(cls, path_or_hub_id: str | Path, device: str | None = None, dtype: torch.dtype | None = None,
             backend: str = "hf", **backend_options) -> "Policy":
        """Load any Hugging Face causal LM directory or hub id, with its own chat template.

        ``backend`` ('hf', 'vllm' or 'auto', ``rollout.backend``) and ``backend_options``
        (``generation.backend_settings``, ``lora_rank``) choose its generation engine
        (``generation.make_backend``; vLLM serves ``path_or_hub_id`` itself).

        On CUDA with Unsloth installed and ``lora_rank`` > 0 in ``backend_options`` (a policy that
        will train LoRA adapters), the model loads through Unsloth's ``FastLanguageModel`` (its
        fused kernels make the update faster); otherwise
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
        quiet_weight_bars()
        device = device or default_device()
        # Unsloth only for a policy that will train LoRA: its loader casts to bf16 and patches the
        # model for its kernels, which a float32 full fine-tune (the tiny tier) must not get.
        unsloth = lora.unsloth_wanted(device, backend_options.get("lora_rank", 0))
        try:
            if unsloth:  # pragma: no cover - CUDA + unsloth only
                from unsloth import FastLanguageModel

                model, tokenizer = FastLanguageModel.from_pretrained(
                    model_name=str(path_or_hub_id), max_seq_length=4096, dtype=dtype, load_in_4bit=False)
            else:
                from transformers import AutoModelForCausalLM, AutoTokenizer

                tokenizer = AutoTokenizer.from_pretrained(str(path_or_hub_id))
                dtype = dtype or (torch.bfloat16 if str(device).startswith("cuda") else torch.float32)
                model = AutoModelForCausalLM.from_pretrained(str(path_or_hub_id), dtype=dtype).eval()
        except (OSError, ValueError, SafetensorError) as err:  # missing, or a weights file cut short
            raise ValueError(f"cannot load a causal LM from {str(path_or_hub_id)!r}: "
                             f"{str(err).splitlines()[0]}") from err
        policy = cls(model, tokenizer, device)
        policy.unsloth = unsloth
        if backend != "hf":
            policy.backend = make_backend(backend, policy.model, tokenizer, model_path=str(path_or_hub_id),
                                          device=policy.device, **backend_options)
        return policy

    # -- LoRA (method.lora_rank > 0; policy/lora.py) ------------------------------------
    @property
    def is_lora(self) -> bool:
        """Whether the policy trains LoRA adapters over a frozen base."""
        return lora.is_lora(self.model)

    def add_lora(self, rank: int, alpha: float, seed: int, adapter: str | Path | None = None,
                 gradient_checkpointing: str = "off") -> "Policy":
        """Wrap the model with trainable LoRA adapters (``lora.add_lora``; Unsloth's when the model
        was loaded through it), set to the saved ``adapter`` directory when given (a resumed run).
        ``gradient_checkpointing``: 'off', 'standard' or 'offload' (``policy.checkpointing``; a run
        chooses it by ``method.gradient_checkpointing``). Returns self.

        Example:
            >>> from workbench.config import preset
            >>> from workbench.policy.tokenizer import train_tokenizer
            >>> tok = train_tokenizer(["some text"] * 5, vocab_size=300)
            >>> p = Policy(tiny_model(preset("smoke").backbone, tok, 0), tok).add_lora(4, 8, seed=0)
            >>> p.is_lora, sum(x.numel() for x in p.model.parameters() if x.requires_grad) > 0
            (True, True)
        """
        self.model = lora.add_lora(self.model, rank, alpha, seed, gradient_checkpointing, unsloth=self.unsloth)
        self.checkpointing = gradient_checkpointing
        if adapter is not None:
            lora.load_adapter(self.model, adapter)
        self.model.eval()
        self.sync()  # the backend serves the wrapped model (HF) or its weights (vLLM)
        return self

    def checkpoint_activations(self, mode: str) -> "Policy":
        """Set a full fine-tune's gradient checkpointing: 'off' or 'standard' (Transformers'
        non-reentrant recompute of each block; 'offload' is Unsloth's, for LoRA). Returns self.

        Example:
            >>> from workbench.config import preset
            >>> from workbench.policy.tokenizer import train_tokenizer
            >>> tok = train_tokenizer(["some text"] * 5, vocab_size=300)
            >>> Policy(tiny_model(preset("smoke").backbone, tok, 0), tok).checkpoint_activations("standard").model.is_gradient_checkpointing
            True
        """
        if mode not in ("off", "standard"):
            raise ValueError(f"method.gradient_checkpointing={mode!r}: a full fine-tune (method.lora_rank = 0) takes "
                             "off, standard or auto (offload is Unsloth's, for LoRA)")
        if mode == "standard":
            self.model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        elif self.model.is_gradient_checkpointing:
            self.model.gradient_checkpointing_disable()
        self.checkpointing = mode
        return self

    def base_only(self):
        """A context in which the model is its adapter-free base: the reference policy of a LoRA run
        (no second copy of the weights)."""
        if not self.is_lora:
            raise ValueError("base_only: the policy has no LoRA adapters "
                             "(method.lora_rank = 0 keeps a separate reference)")
        return self.model.disable_adapter()

    def save_adapter(self, directory: str | Path) -> Path:
        """Write the LoRA adapter alone (what a LoRA run's checkpoint holds)."""
        return lora.save_adapter(self.model, directory)

    def sync(self) -> None:
        """Hand the trained weights to the generation backend (``backend.sync``): after each update."""
        self.backend.sync(self.model)

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
        quiet_weight_bars()
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        # a LoRA policy is saved with its adapters folded in, so the directory loads anywhere (eval, vLLM)
        if self.is_lora:
            lora.save_merged(self.model, directory)
        else:
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
        return self.backend.generate(prompt_ids, max_new_tokens=max_new_tokens, temperature=temperature,
                                     top_p=top_p, stop=tuple(stop), seed=seed, choices=choices)

    def token_logprobs(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                       entropy_mask: torch.Tensor | None = None, packed: bool = False,
                       pack_width: int | None = None):
        """Per-token log-probs ``out[b, t] = log p(input_ids[b, t] | input_ids[b, :t])`` (raw logits).

        Padding may be on either side; positions follow the attention mask. ``out[:, 0]`` and
        padded positions are 0. Differentiable (the update step calls it under autograd). With
        ``entropy_mask`` (aligned with ``input_ids``) it returns ``(out, entropy)``: the policy's
        mean entropy over the masked positions' predictions, from the same forward pass (no grad).
        ``packed`` (``method.pack_sequences``): the forward runs on the rows packed without their
        padding (``policy.packing.pack``, into rows of ``pack_width`` tokens, default the padded
        width); the same values up to float rounding, and ``out`` is 0 at each row's first token
        whichever side it is padded on.

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
        if packed:
            return self._packed_logprobs(input_ids, attention_mask, entropy_mask, pack_width)
        position_ids = (attention_mask.long().cumsum(-1) - 1).clamp(min=0)
        hidden, head = self._hidden_and_head(input_ids, attention_mask, position_ids)
        picked, entropy = gather_logprobs(hidden, head, input_ids[:, 1:], with_entropy=entropy_mask is not None)
        picked = picked * attention_mask[:, 1:].to(picked.dtype)
        out = torch.cat([torch.zeros_like(picked[:, :1]), picked], dim=1)
        if entropy_mask is None:
            return out
        mask = entropy_mask[:, 1:].to(self.device, entropy.dtype)
        return out, (entropy.detach() * mask).sum() / mask.sum().clamp(min=1.0)  # a patched model (Unsloth) may attach a graph

    def _packed_logprobs(self, input_ids, attention_mask, entropy_mask, width):
        """``token_logprobs`` through one forward over the packed rows: each prediction (b, t) is
        made from the packed position of (b, t - 1) and scattered back to [B, T]."""
        from workbench.policy import packing

        packed = packing.pack(input_ids, attention_mask, self.tokenizer.pad_token_id, width)
        if self.unsloth:  # pragma: no cover - CUDA + unsloth only
            hidden, head = self._unsloth_packed_hidden(packed)
        else:
            hidden, head = self._hidden_and_head(packed.input_ids, None, packed.position_ids)
        source = packed.source
        rows, cols = torch.nonzero((source[:, 1:] >= 0) & (source[:, :-1] >= 0), as_tuple=True)  # predicts t = cols+1
        flat = hidden.reshape(-1, hidden.shape[-1])[source[rows, cols]]
        flat = torch.cat([flat, flat[:1]])[None]  # gather_logprobs predicts from all but the last position
        picked, entropy = gather_logprobs(flat, head, input_ids[rows, cols + 1][None],
                                          with_entropy=entropy_mask is not None)
        batch, width = input_ids.shape
        out = picked.new_zeros(batch, width).index_put((rows, cols + 1), picked[0])
        if entropy_mask is None:
            return out
        mask = entropy_mask[:, 1:].to(self.device, entropy.dtype)[rows, cols]
        return out, (entropy[0].detach() * mask).sum() / mask.sum().clamp(min=1.0)

    def _unsloth_packed_hidden(self, packed):  # pragma: no cover - CUDA + unsloth only
        """The packed rows' last hidden states under Unsloth, whose attention takes packed sequences
        from a ``packed_seq_lengths`` argument over one flattened row (restarting positions alone
        leave its attention causal over the whole row; its PyTorch-attention fallback builds one
        mask over the row): one packed row per forward, each segment starting at position 0.
        Not run on this CPU; ``bench gpu``'s packed variants compare it with the padded forward."""
        from workbench.policy.packing import segment_lengths

        decoder, rows = self.model.get_decoder(), []
        for ids, positions in zip(packed.input_ids, packed.position_ids):
            rows.append(decoder(input_ids=ids[None], position_ids=positions[None], use_cache=False,
                                packed_seq_lengths=segment_lengths(positions)).last_hidden_state)
        return torch.cat(rows), self.model.get_output_embeddings()

    def _hidden_and_head(self, input_ids, attention_mask, position_ids):
        """(the last hidden states [B, T, H], the output layer) so the logits can be made in chunks;
        for a model whose head does more than a linear layer, (its logits, identity)."""
        config = getattr(self.model, "config", None)
        head = self.model.get_output_embeddings()
        if head is None or any(getattr(config, k, None) for k in _HEAD_EXTRAS):
            logits = self.model(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                                use_cache=False).logits
            return logits, torch.nn.Identity()
        hidden = self.model.get_decoder()(input_ids=input_ids, attention_mask=attention_mask,
                                          position_ids=position_ids, use_cache=False).last_hidden_state
        return hidden, head


def gather_logprobs(hidden: torch.Tensor, head, targets: torch.Tensor, with_entropy: bool = False,
                    chunk_elements: int | None = None):
    """``log_softmax(head(hidden[:, :-1]).float())`` gathered at ``targets`` ([B, T-1]), and the
    entropy of each of those positions' predictions (no grad; None unless ``with_entropy``).

    At most ``chunk_elements`` (default ``LOGPROB_CHUNK_ELEMENTS``) float32 logits exist at once:
    positions are taken in chunks, and under autograd each chunk is checkpointed (its logits are
    recomputed in the backward pass, not kept). A batch within one chunk is computed exactly as
    the full computation (the tiny tier's batches are).

    Example:
        >>> h, head = torch.randn(2, 5, 8), torch.nn.Linear(8, 11)
        >>> t = torch.randint(0, 11, (2, 4))
        >>> full, _ = gather_logprobs(h, head, t)
        >>> chunked, _ = gather_logprobs(h, head, t, chunk_elements=3 * 11)
        >>> torch.allclose(full, chunked, atol=1e-6)
        True
    """
    from torch.utils.checkpoint import checkpoint

    batch, width = targets.shape
    vocab = head.out_features if hasattr(head, "out_features") else hidden.shape[-1]
    per_chunk = max(1, (chunk_elements or LOGPROB_CHUNK_ELEMENTS) // vocab)
    if batch * (width + 1) <= per_chunk:  # one chunk: the head over every position, as the model does
        logp = torch.log_softmax(head(hidden)[:, :-1].float(), dim=-1)
        picked = logp.gather(-1, targets[..., None]).squeeze(-1)
        if not with_entropy:
            return picked, None
        with torch.no_grad():
            return picked, -(logp.exp() * logp).sum(-1)
    flat_hidden = hidden[:, :-1].reshape(batch * width, hidden.shape[-1])
    flat_targets = targets.reshape(-1)
    picked, entropy = [], []
    for start in range(0, batch * width, per_chunk):
        piece = (flat_hidden[start:start + per_chunk], flat_targets[start:start + per_chunk])
        if torch.is_grad_enabled() and flat_hidden.requires_grad:
            lp, ent = checkpoint(_chunk_logprobs, head, *piece, with_entropy, use_reentrant=False)
        else:
            lp, ent = _chunk_logprobs(head, *piece, with_entropy)
        picked.append(lp)
        entropy.append(ent)
    picked = torch.cat(picked).reshape(batch, width)
    return picked, torch.cat(entropy).reshape(batch, width) if with_entropy else None


def _chunk_logprobs(head, hidden: torch.Tensor, targets: torch.Tensor, with_entropy: bool):
    """One chunk of :func:`gather_logprobs`: (picked log-probs, entropies or an empty tensor)."""
    logp = torch.log_softmax(head(hidden).float(), dim=-1)
    picked = logp.gather(-1, targets[:, None]).squeeze(-1)
    with torch.no_grad():
        entropy = -(logp.exp() * logp).sum(-1) if with_entropy else picked.new_zeros(0)
    return picked, entropy


def model_labels(model_path: str | Path) -> dict:
    """(backbone, method) of a model directory: its ``workbench.json`` when present (the warm
    start and the trainers write one), else the folder name as backbone and method 'base'."""
    meta = Path(model_path) / "workbench.json"
    if meta.exists():
        info = json.loads(meta.read_text())
        return {"backbone": str(info.get("backbone", Path(model_path).name)),
                "method": str(info.get("method", "base"))}
    return {"backbone": Path(str(model_path).rstrip("/")).name or "model", "method": "base"}
