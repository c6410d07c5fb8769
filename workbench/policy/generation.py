"""Generation backends behind ``Policy.generate``: Hugging Face generate (default) and vLLM.

A backend has one method, ``generate(prompt_ids, *, max_new_tokens, temperature, top_p, stop,
seed) -> list[Generation]``: token-id prompts in, new tokens out, each cut after the first stop
string or eos, with the log-prob of every new token under the raw policy (softmax of the
unmodified logits; temperature and top-p shape only the sampling). Temperature 0 is greedy.

- ``HFBackend`` (CPU and GPU): batched ``model.generate`` with left padding and the KV cache; a
  ``StoppingCriteria`` decodes each row's newest tokens and stops the row once a stop string
  appears in its *generated* text (the prompt may contain the same tags). Sampling is made
  deterministic by seeding torch's RNG inside ``fork_rng`` (callers' RNG state is untouched).
  ``choices`` (:class:`Choices`) constrains what may follow a marker, per row: once a row has
  generated the marker, only tokens that continue one of its strings are sampled (the log-probs
  stay the raw policy's).
- ``VLLMBackend`` (``gpu`` extra, CUDA only): the same interface over ``vllm.LLM`` loaded from a
  saved model directory, with ``logprobs_mode="raw_logprobs"`` so log-probs mean the same thing.
  It serves the weights it loaded: after a policy update, save and rebuild it (it is meant for
  evaluation and large-batch sampling of a fixed checkpoint). It cannot run on this CPU machine
  (STACK.md: the PyPI vllm is a CUDA build) and is not covered by the CPU tests.

Example:
    >>> g = Generation(text="<answer> x </answer>", token_ids=[7, 8, 9], logprobs=[-1.0, -0.5, -0.1])
    >>> g.finish_reason
    'stop'
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import torch


@dataclass
class Generation:
    """New tokens of one prompt: ``text`` decodes ``token_ids``; ``logprobs`` align with them.

    ``finish_reason`` is 'stop' (a stop string), 'eos' (end of turn token) or 'length'.
    Because tokens are whole, ``text`` may run a few characters past the stop string when the
    stop string ends inside a token.
    """

    text: str
    token_ids: list[int]
    logprobs: list[float]
    finish_reason: str = field(default="stop")


def _eos_ids(model, tokenizer) -> list[int]:
    eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    eos = tokenizer.eos_token_id if eos is None else eos
    return [eos] if isinstance(eos, int) else list(eos)


def _first_stop_prefix(tokenizer, ids: list[int], stop: Sequence[str]) -> int | None:
    """The shortest k such that decode(ids[:k]) contains a stop string (None if none does)."""
    if not stop or not any(s in tokenizer.decode(ids) for s in stop):
        return None
    lo, hi = 1, len(ids)  # containment is monotone in k, so bisect
    while lo < hi:
        mid = (lo + hi) // 2
        if any(s in tokenizer.decode(ids[:mid]) for s in stop):
            hi = mid
        else:
            lo = mid + 1
    return lo


class _StopOnStrings:
    """Per-row stopping once a stop string shows up in the newest generated tokens.

    A stop string can only complete at a token whose text holds its last character, so only
    rows whose newest token is such a token are decoded (``enders``: computed once per backend).
    """

    def __init__(self, tokenizer, stop: Sequence[str], prompt_len: int, enders: torch.Tensor):
        self.tokenizer, self.stop, self.prompt_len, self.enders = tokenizer, tuple(stop), prompt_len, enders
        # A string of n bytes spans at most n tokens (each token is at least one byte).
        self.window = max(len(s.encode()) for s in stop) + 1

    def __call__(self, input_ids: torch.Tensor, scores, **kwargs) -> torch.Tensor:
        done = torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)
        rows = torch.isin(input_ids[:, -1], self.enders.to(input_ids.device)).nonzero().flatten().tolist()
        if rows:
            start = max(self.prompt_len, input_ids.shape[1] - self.window)
            tails = self.tokenizer.batch_decode(input_ids[rows, start:].tolist())
            done[rows] = torch.tensor([any(s in t for s in self.stop) for t in tails], device=input_ids.device)
        return done


@dataclass(frozen=True)
class Choices:
    """After ``marker`` (a string the tokenizer keeps as whole tokens, e.g. ``<answer>``), row i
    may only continue with one of ``per_row[i]`` (strings that end where generation should stop).

    Example:
        >>> Choices("<answer>", [["Rome</answer>", "Ann</answer>"]]).per_row[0][1]
        'Ann</answer>'
    """

    marker: str
    per_row: Sequence[Sequence[str]]


class _ChoiceProcessor:
    """A logits processor for :class:`Choices`: masks every token that would leave the row's
    allowed continuations, once the row's generated tokens contain the marker."""

    def __init__(self, tokenizer, choices: Choices, prompt_len: int):
        marker = tokenizer(choices.marker, add_special_tokens=False)["input_ids"]
        self.prompt_len, self.marker = prompt_len, marker
        self.sequences = []
        for row in choices.per_row:
            seqs = []
            for text in row:
                ids = tokenizer(choices.marker + text, add_special_tokens=False)["input_ids"]
                if ids[:len(marker)] != marker:
                    raise ValueError(f"choices: the tokenizer does not keep {choices.marker!r} whole before "
                                     f"{text!r}; constrained answers need a tokenizer that does (the tiny tier's)")
                seqs.append(ids[len(marker):])
            self.sequences.append(seqs)

    def _after_marker(self, ids: list[int]) -> list[int] | None:
        m = len(self.marker)
        for k in range(len(ids) - m, -1, -1):
            if ids[k:k + m] == self.marker:
                return ids[k + m:]
        return None

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        for row, seqs in enumerate(self.sequences):
            after = self._after_marker(input_ids[row, self.prompt_len:].tolist()) if seqs else None
            if after is None:
                continue
            allowed = {s[len(after)] for s in seqs if len(s) > len(after) and s[:len(after)] == after}
            if allowed:
                keep = torch.full_like(scores[row], float("-inf"))
                keep[list(allowed)] = 0.0
                scores[row] = scores[row] + keep
        return scores


class HFBackend:
    """Batched ``transformers`` generation with left padding, the KV cache and stop strings.

    Example:
        >>> from workbench.config import preset
        >>> from workbench.policy.tokenizer import train_tokenizer
        >>> from workbench.policy.model import tiny_model
        >>> tok = train_tokenizer(["some text"] * 5, vocab_size=300)
        >>> backend = HFBackend(tiny_model(preset("smoke").backbone, tok, 0), tok)
        >>> out = backend.generate([[5, 6], [7]], max_new_tokens=3, temperature=0, top_p=1)
        >>> [len(g.logprobs) == len(g.token_ids) for g in out]
        [True, True]
    """

    def __init__(self, model, tokenizer):
        self.model, self.tokenizer = model, tokenizer
        self._enders: dict[tuple[str, ...], torch.Tensor] = {}

    def _stop_enders(self, stop: tuple[str, ...]) -> torch.Tensor:
        if stop not in self._enders:
            last = {s[-1] for s in stop}
            pieces = self.tokenizer.batch_decode([[i] for i in range(len(self.tokenizer))])
            # Partial UTF-8 bytes decode to U+FFFD; single-token decodes may drop a leading
            # space (SentencePiece), so a stop string ending in whitespace disables the filter.
            keep = [i for i, p in enumerate(pieces)
                    if any(c in p for c in last) or "\ufffd" in p or any(c.isspace() for c in last)]
            self._enders[stop] = torch.tensor(keep or [-1])
        return self._enders[stop]

    @torch.no_grad()
    def generate(self, prompt_ids: list[list[int]], *, max_new_tokens: int, temperature: float,
                 top_p: float, stop: Sequence[str] = (), seed: int | None = None,
                 choices: Choices | None = None) -> list[Generation]:
        from transformers import GenerationConfig, LogitsProcessorList, StoppingCriteriaList

        if not prompt_ids or any(len(p) == 0 for p in prompt_ids):
            raise ValueError("generate: every prompt needs at least one token")
        device = next(self.model.parameters()).device
        pad = self.tokenizer.pad_token_id
        width = max(len(p) for p in prompt_ids)
        input_ids = torch.full((len(prompt_ids), width), pad, dtype=torch.long)
        attention_mask = torch.zeros_like(input_ids)
        for i, ids in enumerate(prompt_ids):  # left padding: every row's next token is at `width`
            input_ids[i, width - len(ids):] = torch.tensor(ids)
            attention_mask[i, width - len(ids):] = 1
        eos = _eos_ids(self.model, self.tokenizer)
        # A fresh config, so a hub model's own defaults (top_k, repetition penalty) cannot leak in.
        config = GenerationConfig(
            max_new_tokens=max_new_tokens, do_sample=temperature > 0,
            temperature=temperature if temperature > 0 else None, top_p=top_p if temperature > 0 else None,
            top_k=None, eos_token_id=eos, pad_token_id=pad, output_logits=True,
            return_dict_in_generate=True, use_cache=True)
        stop = tuple(stop)
        criteria = StoppingCriteriaList([_StopOnStrings(self.tokenizer, stop, width, self._stop_enders(stop))]
                                        if stop else [])
        if choices is not None and len(choices.per_row) != len(prompt_ids):
            raise ValueError(f"choices: {len(choices.per_row)} rows for {len(prompt_ids)} prompts")
        processors = LogitsProcessorList([_ChoiceProcessor(self.tokenizer, choices, width)] if choices else [])
        devices = [device.index or 0] if device.type == "cuda" else []
        self.model.eval()
        with torch.random.fork_rng(devices=devices):
            if seed is not None:
                torch.manual_seed(seed)
            out = self.model.generate(input_ids=input_ids.to(device), attention_mask=attention_mask.to(device),
                                      generation_config=config, stopping_criteria=criteria,
                                      logits_processor=processors)
        new = out.sequences[:, width:]
        logprobs = torch.stack([torch.log_softmax(step.float(), dim=-1).gather(-1, new[:, t, None]).squeeze(-1)
                                for t, step in enumerate(out.logits)], dim=1)
        return [self._cut(new[i].tolist(), logprobs[i].tolist(), eos, stop, max_new_tokens)
                for i in range(len(prompt_ids))]

    def _cut(self, ids: list[int], logprobs: list[float], eos: list[int], stop: Sequence[str],
             max_new_tokens: int) -> Generation:
        end, reason = len(ids), "length"
        for k, t in enumerate(ids):
            if t in eos:
                end, reason = k + 1, "eos"
                break
        k = _first_stop_prefix(self.tokenizer, ids[:end], stop)
        if k is not None:
            end, reason = k, "stop"
        if reason == "length" and end < max_new_tokens:  # cannot happen: generate pads only after a stop
            raise RuntimeError(f"generation ended after {end} < {max_new_tokens} tokens without a stop")
        ids = ids[:end]
        return Generation(self.tokenizer.decode(ids, skip_special_tokens=True), ids, logprobs[:end], reason)


class VLLMBackend:
    """``vllm.LLM`` behind the same interface (CUDA + the ``gpu`` extra; vllm >= 0.11 for
    ``logprobs_mode``). Serves the checkpoint it loaded; rebuild it after a weight update.

    Example (GPU only, not run here):
        >>> VLLMBackend("runs/warmstart", tokenizer)  # doctest: +SKIP
    """

    def __init__(self, model_path: str, tokenizer, **llm_kwargs):
        try:
            from vllm import LLM
        except ImportError as err:
            raise ValueError("the vllm backend needs the gpu extra (pip install '.[gpu]') on a CUDA "
                             "machine; use backend 'hf' on CPU") from err
        self.tokenizer = tokenizer
        self.llm = LLM(model=str(model_path), logprobs_mode="raw_logprobs", **llm_kwargs)

    def generate(self, prompt_ids: list[list[int]], *, max_new_tokens: int, temperature: float,
                 top_p: float, stop: Sequence[str] = (), seed: int | None = None,
                 choices: Choices | None = None) -> list[Generation]:
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        if choices is not None:
            raise ValueError("choices (constrained answers) run on the hf backend only")
        params = SamplingParams(temperature=temperature, top_p=top_p if temperature > 0 else 1.0,
                                top_k=-1, max_tokens=max_new_tokens, stop=list(stop),
                                include_stop_str_in_output=True, logprobs=0, seed=seed)
        outs = self.llm.generate([TokensPrompt(prompt_token_ids=ids) for ids in prompt_ids], params,
                                 use_tqdm=False)
        result = []
        for out in outs:
            c = out.outputs[0]
            ids = list(c.token_ids)
            reason = ("length" if c.finish_reason == "length"
                      else "stop" if isinstance(c.stop_reason, str) else "eos")
            result.append(Generation(c.text, ids, [lp[t].logprob for lp, t in zip(c.logprobs, ids)], reason))
        return result


def make_backend(name: str, model, tokenizer, model_path: str | None = None):
    """'hf' (default, any device) or 'vllm' (CUDA; needs ``model_path``, a saved model directory).

    Example:
        >>> make_backend("tgi", None, None)
        Traceback (most recent call last):
        ...
        ValueError: unknown generation backend 'tgi'; expected 'hf' or 'vllm'
    """
    if name == "hf":
        return HFBackend(model, tokenizer)
    if name == "vllm":
        if model_path is None:
            raise ValueError("the vllm backend loads from a saved model directory: pass model_path")
        return VLLMBackend(model_path, tokenizer)
    raise ValueError(f"unknown generation backend {name!r}; expected 'hf' or 'vllm'")
