"""Generation backends behind ``Policy.generate``: Hugging Face generate and vLLM.

A backend has ``generate(prompt_ids, *, max_new_tokens, temperature, top_p, stop, seed, choices)
-> list[Generation]``: token-id prompts in, new tokens out, each cut after the first stop string or
eos, with the log-prob of every new token under the raw policy (softmax of the unmodified logits;
temperature and top-p shape only the sampling). Temperature 0 is greedy. ``sync(model)`` brings the
backend's weights to the trainer's after an optimiser update, and ``trainer_logprobs`` says whether
its log-probs are the trainer's own (then the update uses them as the old-policy log-probs; else
a round's first optimiser step uses the policy's own, detached, and the trainer recomputes them
for the rows of later steps).

- ``HFBackend`` (CPU and GPU): batched ``model.generate`` with left padding and the KV cache; a
  ``StoppingCriteria`` decodes each row's newest tokens and stops the row once a stop string
  appears in its *generated* text (the prompt may contain the same tags). Sampling is made
  deterministic by seeding torch's RNG inside ``fork_rng`` (callers' RNG state is untouched).
  ``choices`` (:class:`Choices`) constrains what may follow a marker, per row: once a row has
  generated the marker, only tokens that continue one of its strings are sampled (the log-probs
  stay the raw policy's). It shares the trainer's model: ``sync`` has nothing to do.
- ``VLLMBackend`` (``gpu`` extra, CUDA only): the same interface over ``vllm.LLM`` loaded from a
  saved model directory, with ``logprobs_mode="raw_logprobs"`` so log-probs mean the same thing.
  ``sync`` loads the trainer's weights into the running engine in place (``sync="merged"``: the
  full weights, LoRA adapters folded in) or hot-loads the LoRA adapter as a new ``LoRARequest``
  (``sync="lora"``); the engine is never rebuilt. vLLM serves in bfloat16, so its log-probs are
  not the trainer's (``trainer_logprobs`` False). It cannot run on this CPU machine (the PyPI
  vllm is a CUDA build): written against vLLM's documented API, not exercised by the CPU tests.

:func:`make_backend` is the one place a backend is built, from ``rollout.backend`` (``auto``: vLLM
on a CUDA device when it is installed, else Hugging Face); :func:`backend_settings` reads the
config's fields for it.

Example:
    >>> g = Generation(text="<answer> x </answer>", token_ids=[7, 8, 9], logprobs=[-1.0, -0.5, -0.1])
    >>> g.finish_reason
    'stop'
"""

from __future__ import annotations

import importlib.util
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import torch

BACKENDS = ("auto", "hf", "vllm")  # rollout.backend's values (config.RULES, tested equal)


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
        encoded: dict[str, list[int]] = {}  # a chain's M rows share its choices: tokenise each once
        for text in {t for row in choices.per_row for t in row}:
            ids = tokenizer(choices.marker + text, add_special_tokens=False)["input_ids"]
            if ids[:len(marker)] != marker:
                raise ValueError(f"choices: the tokenizer does not keep {choices.marker!r} whole before "
                                 f"{text!r}; constrained answers need a tokenizer that does (the tiny tier's)")
            encoded[text] = ids[len(marker):]
        self.sequences = [[encoded[t] for t in row] for row in choices.per_row]

    def _after_marker(self, ids: list[int]) -> list[int] | None:
        m = len(self.marker)
        for k in range(len(ids) - m, -1, -1):
            if ids[k:k + m] == self.marker:
                return ids[k + m:]
        return None

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        generated = input_ids[:, self.prompt_len:].tolist()  # one device-to-host copy a step, not one a row
        for row, seqs in enumerate(self.sequences):
            after = self._after_marker(generated[row]) if seqs else None
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

    name = "hf"
    trainer_logprobs = True  # the trainer's own model and precision

    def __init__(self, model, tokenizer):
        self.model, self.tokenizer = model, tokenizer
        self._enders: dict[tuple[str, ...], torch.Tensor] = {}

    def sync(self, model) -> None:
        """Nothing to copy: generation runs on the trainer's model itself (kept in step if the
        caller hands a new model object, e.g. one wrapped with LoRA adapters)."""
        self.model = model

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


SYNC_MODES = ("merged", "lora")  # rollout.vllm_sync's values (config.RULES, tested equal)
_VLLM_LORA_RANKS = (8, 16, 32, 64, 128, 256, 320, 512)  # the max_lora_rank values vLLM accepts


def _import_vllm():
    """``vllm``, or ImportError saying what the backend needs with the original error's text."""
    try:
        import vllm
    except ImportError as err:
        raise ImportError("rollout.backend='vllm' needs vLLM (the gpu extra: pip install '.[gpu]', on a CUDA "
                          f"machine; 'hf' runs anywhere); importing it failed: {type(err).__name__}: {err}") from err
    return vllm


def _load_weights_rpc(worker, weights) -> None:
    """Runs in vLLM's worker (``LLM.collective_rpc``): Hugging Face-named weights loaded in place
    (the model's ``load_weights`` maps names and fuses q/k/v and gate/up, casting to its dtype)."""
    worker.model_runner.model.load_weights(weights=weights)


def _row_seed(seed: int | None, row: int) -> int | None:
    """One seed per prompt: vLLM seeds each request alone, so G copies of a prompt under one seed
    would sample the same tokens (a GRPO group with no spread)."""
    return None if seed is None else (seed * 1_000_003 + row) % (2 ** 63)


class VLLMBackend:
    """``vllm.LLM`` behind the same interface (CUDA + the ``gpu`` extra; written against vLLM
    0.26-0.32's documented ``LLM``, ``SamplingParams``, ``StructuredOutputsParams``, ``LoRARequest``
    and ``collective_rpc``; not run on this CPU machine).

    ``sync(model)`` after each update: ``"merged"`` loads the trainer's weights into the engine in
    place (LoRA folded in, the trainer's base untouched); ``"lora"`` saves the adapter and serves it
    as a new ``LoRARequest`` (the engine is built with ``enable_lora``). Weights reach the worker as
    tensors in this process, so the engine core runs in-process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``,
    set unless the caller set it). ``choices`` run in two passes: up to the marker, then one of the
    row's strings under vLLM's structured-output ``choice`` constraint. Per-token log-probs are
    asked for only with ``logprobs=True`` (they cost ~40% of its throughput at batch 256, issue 14):
    by default each ``Generation.logprobs`` is NaN and the trainer takes the old-policy log-probs
    from its own forward (``trainer_logprobs`` is False), in its own precision.

    Example (GPU only, not run here):
        >>> VLLMBackend("runs/warmstart", tokenizer)  # doctest: +SKIP
    """

    name = "vllm"
    trainer_logprobs = False  # bf16 serving kernels: the update takes old log-probs from the trainer

    def __init__(self, model_path: str, tokenizer, sync: str = "merged", lora_rank: int = 0,
                 gpu_memory_utilization: float = 0.3, logprobs: bool = False, stop_by_token: bool = False,
                 row_seeds: bool = True, **llm_kwargs):
        if sync not in SYNC_MODES:
            raise ValueError(f"rollout.vllm_sync={sync!r}: expected one of {list(SYNC_MODES)}")
        vllm = _import_vllm()
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
        self.tokenizer, self.sync_mode, self.logprobs = tokenizer, sync, logprobs
        self.stop_by_token = stop_by_token  # an experiment (bench gpu --parts loop), off until measured
        # False: the engine's one sampling stream (an experiment: vLLM's V1 runner draws a seeded request's noise alone)
        self.row_seeds = row_seeds
        self._stop_tokens: dict[tuple[str, ...], dict[int, str] | None] = {}
        self.lora_request = None  # the adapter served now (sync "lora", after the first sync)
        self._adapters: Path | None = None
        if sync == "lora" and lora_rank > 0:
            llm_kwargs.update(enable_lora=True, max_loras=1,
                              max_lora_rank=next((r for r in _VLLM_LORA_RANKS if r >= lora_rank), lora_rank))
        self.llm = vllm.LLM(model=str(model_path), logprobs_mode="raw_logprobs",
                            gpu_memory_utilization=gpu_memory_utilization, **llm_kwargs)

    def sync(self, model) -> None:
        """The engine's weights become ``model``'s (see the class docstring); its prefix cache,
        computed with the old weights, is dropped."""
        from workbench.policy import lora

        if self.sync_mode == "lora" and lora.is_lora(model):
            self._serve_adapter(model)
        else:
            # a generator: the worker runs in this process (see __init__), so each merged weight
            # is loaded and dropped before the next is made
            state = lora.merged_tensors(model) if lora.is_lora(model) else iter(model.state_dict().items())
            self.llm.collective_rpc(_load_weights_rpc, args=(state,))
        self.llm.reset_prefix_cache()

    def _serve_adapter(self, model) -> None:
        import shutil

        from vllm.lora.request import LoRARequest

        from workbench.policy import lora

        self._adapters = self._adapters or Path(tempfile.mkdtemp(prefix="vllm-lora-"))
        n = self.lora_request.lora_int_id + 1 if self.lora_request else 1
        path = lora.save_adapter(model, self._adapters / f"v{n}")
        self.lora_request = LoRARequest(f"policy-{n}", n, str(path))  # a new id: vLLM loads it afresh
        for old in self._adapters.iterdir():
            if old != path:
                shutil.rmtree(old, ignore_errors=True)

    def stop_tokens(self, stop: Sequence[str]) -> dict[int, str] | None:
        """{token id: stop string} when every stop string is one token of the tokenizer (the tiny
        tier's tags are), else None. With ``stop_by_token`` vLLM then stops on those ids and skips
        its per-step detokenisation; the text is decoded once at the end."""
        stop = tuple(stop)
        if stop not in self._stop_tokens:
            ids = [self.tokenizer(s, add_special_tokens=False)["input_ids"] for s in stop]
            self._stop_tokens[stop] = ({i[0]: s for i, s in zip(ids, stop)} if stop and all(len(i) == 1 for i in ids)
                                       else None)
        return self._stop_tokens[stop]

    def _seed(self, seed: int | None, row: int) -> int | None:
        return _row_seed(seed, row) if self.row_seeds else None

    def _params(self, *, max_tokens: int, temperature: float, top_p: float, stop: Sequence[str], seed,
                choice: Sequence[str] | None = None):
        from vllm import SamplingParams

        extra = {}
        by_token = self.stop_tokens(stop) if self.stop_by_token else None
        if by_token:
            extra.update(stop_token_ids=list(by_token), detokenize=False)
        else:
            extra.update(stop=list(stop), include_stop_str_in_output=True)
        if choice is not None:
            from vllm.sampling_params import StructuredOutputsParams

            extra["structured_outputs"] = StructuredOutputsParams(choice=list(choice))
        return SamplingParams(temperature=temperature, top_p=top_p if temperature > 0 else 1.0, top_k=-1,
                              max_tokens=max_tokens, logprobs=0 if self.logprobs else None, seed=seed, **extra)

    def _run(self, prompt_ids: list[list[int]], params: list) -> list[tuple[Generation, str | None]]:
        """(generation, the stop string that ended it or None) per prompt."""
        from vllm.inputs import TokensPrompt

        outs = self.llm.generate([TokensPrompt(prompt_token_ids=ids) for ids in prompt_ids], params,
                                 use_tqdm=False, lora_request=self.lora_request)
        names = {i: name for found in self._stop_tokens.values() if found for i, name in found.items()}
        undecoded = [k for k, p in enumerate(params) if not getattr(p, "detokenize", True)]
        decoded = dict(zip(undecoded, self.tokenizer.batch_decode(
            [list(outs[k].outputs[0].token_ids) for k in undecoded], skip_special_tokens=True)))
        result = []
        for k, out in enumerate(outs):
            c = out.outputs[0]
            ids = list(c.token_ids)
            stopped = c.stop_reason if isinstance(c.stop_reason, str) else names.get(c.stop_reason)
            reason = "length" if c.finish_reason == "length" else "stop" if stopped else "eos"
            logprobs = ([lp[t].logprob for lp, t in zip(c.logprobs, ids)] if self.logprobs
                        else [float("nan")] * len(ids))  # not computed: the trainer computes its own
            result.append((Generation(decoded.get(k, c.text), ids, logprobs, reason), stopped))
        return result

    def generate(self, prompt_ids: list[list[int]], *, max_new_tokens: int, temperature: float,
                 top_p: float, stop: Sequence[str] = (), seed: int | None = None,
                 choices: Choices | None = None) -> list[Generation]:
        if choices is not None and len(choices.per_row) != len(prompt_ids):
            raise ValueError(f"choices: {len(choices.per_row)} rows for {len(prompt_ids)} prompts")
        first_stop = tuple(stop) + ((choices.marker,) if choices is not None else ())
        first = self._run(prompt_ids, [self._params(max_tokens=max_new_tokens, temperature=temperature, top_p=top_p,
                                                    stop=first_stop, seed=self._seed(seed, i))
                                       for i in range(len(prompt_ids))])
        gens = [g for g, _ in first]
        if choices is None:
            return gens
        # rows that wrote the marker go on with one of their strings (the HF backend's Choices rule)
        rows = [i for i, (g, hit) in enumerate(first) if hit == choices.marker and len(g.token_ids) < max_new_tokens
                and choices.per_row[i]]
        if rows:
            params = [self._params(max_tokens=max_new_tokens - len(gens[i].token_ids), temperature=temperature,
                                   top_p=top_p, stop=stop, seed=self._seed(seed, len(prompt_ids) + i),
                                   choice=choices.per_row[i]) for i in rows]
            second = self._run([prompt_ids[i] + gens[i].token_ids for i in rows], params)
            for i, (g, _) in zip(rows, second):
                a = gens[i]
                gens[i] = Generation(a.text + g.text, a.token_ids + g.token_ids, a.logprobs + g.logprobs,
                                     g.finish_reason)
        return gens


def backend_settings(rollout) -> dict:
    """The ``Policy.load`` keywords a ``RolloutConfig`` selects: ``backend`` and its vLLM options.

    Example:
        >>> from workbench.config import RolloutConfig
        >>> backend_settings(RolloutConfig())["backend"]
        'auto'
    """
    return {"backend": rollout.backend, "gpu_memory_utilization": rollout.vllm_memory, "sync": rollout.vllm_sync}


def resolve_backend(name: str, device) -> str:
    """'hf' or 'vllm' for ``rollout.backend`` ``name`` on ``device``: 'auto' is vLLM on a CUDA
    device where it is installed, else Hugging Face.

    Example:
        >>> resolve_backend("auto", "cpu")
        'hf'
        >>> resolve_backend("tgi", "cpu")
        Traceback (most recent call last):
        ...
        ValueError: rollout.backend='tgi': expected one of ['auto', 'hf', 'vllm']
    """
    if name not in BACKENDS:
        raise ValueError(f"rollout.backend={name!r}: expected one of {list(BACKENDS)}")
    if name == "auto":
        cuda = str(device).startswith("cuda")
        return "vllm" if cuda and importlib.util.find_spec("vllm") is not None else "hf"
    return name


def make_backend(name: str, model, tokenizer, model_path: str | None = None, device=None, *,
                 sync: str = "merged", gpu_memory_utilization: float = 0.3, lora_rank: int = 0):
    """The generation backend ``name`` ('auto', 'hf' or 'vllm'; :func:`resolve_backend`) for a
    policy's ``model``: the one place a backend is built. vLLM loads ``model_path`` (a saved model
    directory or hub id) and takes the other options; the HF backend ignores them.

    Example:
        >>> make_backend("vllm", None, None)
        Traceback (most recent call last):
        ...
        ValueError: rollout.backend='vllm' loads a saved model directory: pass model_path
    """
    name = resolve_backend(name, device if device is not None else "cpu")
    if name == "hf":
        return HFBackend(model, tokenizer)
    if model_path is None:
        raise ValueError("rollout.backend='vllm' loads a saved model directory: pass model_path")
    return VLLMBackend(model_path, tokenizer, sync=sync, lora_rank=lora_rank,
                       gpu_memory_utilization=gpu_memory_utilization)
