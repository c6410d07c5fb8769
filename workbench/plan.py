"""``workbench plan``: before a long run starts, check its inputs and estimate memory, disk and time.

Three parts, each a plain function so the tests check the arithmetic by hand:

* :func:`check_inputs`: the model folder, the dense encoder, the store (knowledge source, G_0,
  seed and validation questions, Table 1's test sets), the retrieval server when ``search.url`` is
  set. Each check is a :class:`Check` (name, ok, detail); nothing is loaded or built.
* :func:`memory_per_gpu`: bytes per GPU by part -- the policy's weights (bfloat16 base with LoRA,
  float32 for a full fine-tune), the frozen reference (a second float32 copy for a full fine-tune,
  none for LoRA: its reference is the base with adapters off), gradients and AdamW's two moments
  of the trainable parameters (float32), the rollout engine (vLLM reserves ``rollout.vllm_memory``
  of the GPU for its bfloat16 weights, KV cache and CUDA graphs, whatever the batch needs; the HF
  backend holds the KV cache of the whole rollout batch), the activations of one
  micro-batch in the update's gradient checkpointing mode (:func:`checkpointing`: the run's
  ``method.gradient_checkpointing``, ``auto`` resolved by the function the update calls;
  :func:`activation_memory`), and a dense index searched on
  the GPU (``search.device`` not 'cpu': the store's passages x 768 float16 vectors, on rank 0, the
  rank that serves retrieval; a search's score buffers are not counted).
* :func:`time_per_round`: seconds per round from the stated assumptions (:class:`Assumptions`:
  the share of memory bandwidth a decode step reaches, the share of peak FLOPs the trainer
  reaches, mean trajectory length), with the FLOPs of the update (6 x parameters per token for a
  full fine-tune, 4 for LoRA: no weight gradients of the base, plus 2 when the update recomputes
  checkpointed blocks, i.e. in any mode but ``off``) and of the extra forward passes:
  the reference's, and with vLLM the trainer's old log-probs of the rows of a round's second and
  later optimiser steps (the first step's are its own; the HF backend's come from generation).
  Generation is a roofline of the decode step (:func:`generation_seconds`), in waves when the
  batch's KV cache overflows what vLLM's share holds (:func:`kv_cache`, :func:`rows_at_once`).

These are estimates from architecture shapes (:data:`ARCHITECTURES`, or the model folder's
``config.json``) and the constants of :class:`Assumptions`, which ``workbench plan --calibrate``
fits from ``workbench bench gpu``'s measurements (:mod:`workbench.plan_calibration`), not
measurements: the README's "Reproduce Table 1" section labels them so, and LOG.md records the measured numbers beside them (one H200, the paper preset at 4 slots: 64.9 GiB
peak at 3B, 94.2 GiB at 7B, against 54.9 and 65.9 estimated here; the gap was the LoRA merge for
the vLLM sync and the ``best`` model, which held every delta and every merged weight at once, 15.7
GiB at 3B and 36.7 GiB at 7B; it is streamed now, 0.2 / 0.6 GiB, and a 3B round at paper shape
without the merge peaked at 60.0 GiB against 64.4 estimated: LOG.md, session 19; with the streamed
merge the 3B loop peaked at 51.9 GiB, session 20). ``gpus`` > 1 divides
the rollout batch and the token work evenly, as ``workbench train --gpus N`` does (data parallel);
weights and optimiser state are on every GPU.

Example:
    >>> from workbench.config import preset
    >>> shape = ARCHITECTURES["Qwen/Qwen2.5-3B-Instruct"]
    >>> round(shape.parameters() / 1e9, 2)
    3.09
    >>> mem = memory_per_gpu(preset("paper"), shape)
    >>> 20 < mem["total"] / 2**30 < 140
    True
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path
from types import SimpleNamespace

from workbench import paths
from workbench.bench.shapes import SHAPES

GIB = 2 ** 30
# vLLM's share less its weights and this is its KV cache: activations, CUDA graphs and non-torch memory
# took 2.1 GiB (Qwen2.5-3B) and 3.0 GiB (Llama-3.1-8B) on an H200 (vLLM 0.26's log; LOG.md, session 20)
ENGINE_OVERHEAD = 3 * GIB
TABLE1_DATASETS = ("nq", "triviaqa", "popqa", "hotpotqa", "2wiki", "bamboogle")  # the README's import names


@dataclass(frozen=True)
class Shape:
    """A decoder-only transformer's shape (the fields of a Hugging Face ``config.json``)."""

    hidden: int
    layers: int
    heads: int
    kv_heads: int
    intermediate: int
    vocab: int
    tied: bool
    qkv_bias: bool = False

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    def block_linears(self) -> list[tuple[int, int]]:
        """(in, out) of every linear layer of one block: q, k, v, o, gate, up, down."""
        h, kv, i = self.hidden, self.kv_heads * self.head_dim, self.intermediate
        return [(h, h), (h, kv), (h, kv), (h, h), (h, i), (h, i), (i, h)]

    def parameters(self) -> int:
        """All parameters: embeddings (and an untied head), blocks, norms.

        Example:
            >>> ARCHITECTURES["meta-llama/Llama-3.1-8B-Instruct"].parameters()
            8030261248
        """
        bias = (self.hidden + 2 * self.kv_heads * self.head_dim) if self.qkv_bias else 0
        block = sum(a * b for a, b in self.block_linears()) + bias + 2 * self.hidden
        embed = self.vocab * self.hidden * (1 if self.tied else 2)
        return embed + self.layers * block + self.hidden

    def lora_parameters(self, rank: int) -> int:
        """LoRA's trainable parameters: A (in x r) and B (r x out) on every block linear layer.

        Example:
            >>> ARCHITECTURES["Qwen/Qwen2.5-3B-Instruct"].lora_parameters(64)
            119734272
        """
        return self.layers * sum(rank * (a + b) for a, b in self.block_linears())

    def kv_bytes_per_token(self, dtype_bytes: int = 2) -> int:
        """Keys and values of every layer for one token."""
        return 2 * self.layers * self.kv_heads * self.head_dim * dtype_bytes

    @classmethod
    def from_config(cls, cfg: dict) -> "Shape":
        """From a Hugging Face ``config.json`` dict (Qwen2, Llama and their relatives)."""
        try:
            return cls(cfg["hidden_size"], cfg["num_hidden_layers"], cfg["num_attention_heads"],
                       cfg.get("num_key_value_heads", cfg["num_attention_heads"]), cfg["intermediate_size"],
                       cfg["vocab_size"], bool(cfg.get("tie_word_embeddings", False)),
                       cfg.get("model_type") == "qwen2")
        except KeyError as err:
            raise ValueError(f"config.json: no {err.args[0]!r}; expected a decoder-only transformer's config") from None


# The published config.json shapes of Table 1's three backbones (one table: bench.shapes.SHAPES).
ARCHITECTURES = {hub_id: Shape.from_config({**SHAPES[key], "model_type": SHAPES[key]["arch"]}) for hub_id, key in (
    ("Qwen/Qwen2.5-3B-Instruct", "qwen2.5-3b"), ("Qwen/Qwen2.5-7B-Instruct", "qwen2.5-7b"),
    ("meta-llama/Llama-3.1-8B-Instruct", "llama-3.1-8b"))}


def model_shape(model: str) -> Shape:
    """The shape of ``model``: its folder's ``config.json`` (``paths.local_model``), else the
    published shape of a Table 1 backbone, else ValueError naming the model."""
    folder = Path(paths.local_model(model))
    if (folder / "config.json").exists():
        return Shape.from_config(json.loads((folder / "config.json").read_text()))
    for name, shape in ARCHITECTURES.items():
        if model == name or Path(model).name == Path(name).name:
            return shape
    raise ValueError(f"--model {model!r}: no config.json there and not one of {sorted(ARCHITECTURES)}")


# ---------------------------------------------------------------- memory and disk

def _vllm(rollout) -> bool:
    """Whether the run generates with vLLM: ``auto`` is vLLM on a CUDA machine that has it, as a plan assumes."""
    return rollout.backend in ("auto", "vllm")


def _rollout_rows(cfg, gpus: int) -> int:
    """A GPU's share of the round's rollout trajectories (data parallel)."""
    return math.ceil(cfg.method.chains_per_round * cfg.method.group_size / gpus)


def _row_kv(cfg, shape: Shape, a: "Assumptions") -> int:
    """Bytes of KV cache of one trajectory at the assumed mean length."""
    return min(a.mean_tokens, cfg.rollout.max_total_tokens) * shape.kv_bytes_per_token()


def _engine_fixed(shape: Shape) -> int:
    """What vLLM's share holds besides the KV cache: its bf16 weights and :data:`ENGINE_OVERHEAD`."""
    return 2 * shape.parameters() + ENGINE_OVERHEAD


def memory_per_gpu(cfg, shape: Shape, gpus: int = 1, a: "Assumptions | None" = None, passages: int = 0) -> dict[str, int]:
    """Bytes per GPU by part (module docstring), and their ``total``. ``gpus`` splits the rollout
    batch's KV cache (data parallel); weights and optimiser state are per GPU (replicated). The
    rollout batch's KV cache at the assumed mean trajectory length, and at ``max_total_tokens``, are
    reported beside the total (``kv cache ...``, not added: vLLM pages its reserved share and
    preempts rows beyond it; the HF backend's engine part is the first of them), and so is the least
    vLLM's share must hold (its weights and one trajectory's KV cache). A dense
    index searched on the GPU (``search.device`` not 'cpu') holds ``passages`` float16 vectors on
    rank 0 (the largest GPU's share is what the total gives).

    Example:
        >>> from workbench.config import preset
        >>> s = Shape(64, 2, 2, 1, 256, 1000, True)
        >>> m = memory_per_gpu(preset("smoke"), s)
        >>> m["weights"] == 4 * s.parameters() and m["reference"] == 4 * s.parameters()
        True
    """
    m, r = cfg.method, cfg.rollout
    n = shape.parameters()
    lora = m.lora_rank > 0
    trainable = shape.lora_parameters(m.lora_rank) if lora else n
    a = a or Assumptions()
    seq = r.max_total_tokens
    rollouts = _rollout_rows(cfg, gpus)
    mode = checkpointing(cfg, shape, a)
    parts = {
        "weights": n * (2 if lora else 4),
        "reference": 0 if lora else 4 * n,
        "gradients+adam": trainable * (4 + 8 + (4 if lora else 0)),  # LoRA adapters keep fp32 masters
        f"activations (checkpointing {mode})": activation_memory(cfg, shape, mode, a),
        "dense index (search.device)": passages * a.encoder_dim * 2
        if cfg.search.index in ("dense", "hybrid") and not cfg.search.url and cfg.search.device != "cpu" else 0,
    }
    needed, held = kv_cache(cfg, shape, gpus, a)
    vllm = _vllm(r)
    parts["rollout engine"] = int(r.vllm_memory * a.gpu_memory_gib * GIB) if vllm else needed
    parts["total"] = sum(parts.values())
    # vLLM's share must hold its bf16 weights and one trajectory's KV cache, or it does not start
    parts["rollout engine needs at least"] = 2 * n + seq * shape.kv_bytes_per_token() if vllm else 0
    parts["kv cache the rollout batch needs"] = needed
    parts["kv cache the rollout engine holds"] = held
    parts["kv cache at max length"] = rollouts * seq * shape.kv_bytes_per_token()
    return parts


def _config_view(shape: Shape) -> SimpleNamespace:
    """The fields of a model config that ``policy.checkpointing`` reads."""
    return SimpleNamespace(hidden_size=shape.hidden, intermediate_size=shape.intermediate,
                           num_hidden_layers=shape.layers)


def checkpointing(cfg, shape: Shape, a: "Assumptions | None" = None) -> str:
    """The update's gradient checkpointing: ``method.gradient_checkpointing`` as the run resolves it
    (``policy.checkpointing.choose``, the function the update calls) on a GPU of ``a.gpu_memory_gib``
    whose free memory, when the policy is set up, is what vLLM's share (``rollout.vllm_memory``; the
    HF backend holds nothing yet) and the policy's weights (bf16 with LoRA, float32 without) leave.

    Example:
        >>> from workbench.config import preset
        >>> s = ARCHITECTURES["Qwen/Qwen2.5-3B-Instruct"]
        >>> checkpointing(preset("paper"), s), checkpointing(preset("paper", **{"method.micro_batch": 1}), s)
        ('standard', 'off')
    """
    from workbench.policy.checkpointing import choose

    a = a or Assumptions()
    m, r = cfg.method, cfg.rollout
    taken = (r.vllm_memory * a.gpu_memory_gib * GIB if _vllm(r) else 0) + shape.parameters() * (2 if m.lora_rank else 4)
    free = max(0, int(a.gpu_memory_gib * GIB - taken))
    return choose(m.gradient_checkpointing, "cuda", _config_view(shape), m.micro_batch * r.max_total_tokens, free)


def activation_memory(cfg, shape: Shape, mode: str, a: "Assumptions | None" = None) -> int:
    """Bytes of activations of one micro-batch (``method.micro_batch`` rows of
    ``rollout.max_total_tokens``) in checkpointing ``mode``: ``off`` keeps every block's
    (``policy.checkpointing.activation_bytes``, the update's own estimate, x ``a.activation_share``);
    ``standard`` keeps each block's bf16 input and recomputes one block; ``offload`` moves the block
    inputs to CPU memory and recomputes one block. Each adds the chunked log-prob logits
    (``policy.model.LOGPROB_CHUNK_ELEMENTS``: logits, softmax and gradient in float32).

    Example:
        >>> from workbench.config import preset
        >>> s, cfg = ARCHITECTURES["Qwen/Qwen2.5-3B-Instruct"], preset("paper")
        >>> [round(activation_memory(cfg, s, mode) / GIB, 1) for mode in ("off", "standard", "offload")]
        [60.3, 5.4, 3.1]
    """
    from workbench.policy.checkpointing import activation_bytes

    a = a or Assumptions()
    tokens = cfg.method.micro_batch * cfg.rollout.max_total_tokens
    every = activation_bytes(_config_view(shape), tokens) * a.activation_share
    logits = 4 * min(tokens * shape.vocab, 1 << 27) * 3
    kept = tokens * shape.hidden * 2 * shape.layers  # the checkpointed block inputs, bf16
    if mode == "off":
        return int(every + logits)
    return int((kept if mode == "standard" else 0) + every / shape.layers + logits)


def kv_cache(cfg, shape: Shape, gpus: int = 1, a: "Assumptions | None" = None) -> tuple[int, int]:
    """Bytes of KV cache a GPU's share of the rollout batch needs at the assumed mean trajectory
    length, and the bytes its engine holds: vLLM's share of the GPU less its bf16 weights and
    :data:`ENGINE_OVERHEAD`; the HF backend holds whatever the batch needs.

    Example:
        >>> from workbench.config import preset
        >>> needed, held = kv_cache(preset("paper-8b"), ARCHITECTURES["meta-llama/Llama-3.1-8B-Instruct"])
        >>> round(needed / held, 1)  # 512 trajectories of 1,500 tokens at 128 KiB a token, in 0.3 of an H200
        3.9
    """
    r = cfg.rollout
    a = a or Assumptions()
    needed = _rollout_rows(cfg, gpus) * _row_kv(cfg, shape, a)
    if not _vllm(r):
        return needed, needed
    return needed, max(0, int(r.vllm_memory * a.gpu_memory_gib * GIB) - _engine_fixed(shape))


def rows_at_once(cfg, shape: Shape, gpus: int = 1, a: "Assumptions | None" = None) -> tuple[int, int]:
    """The rollout rows a GPU generates in a round, and how many of them its engine's KV cache holds
    at once at the assumed mean length (all of them for the HF backend)."""
    a = a or Assumptions()
    rows = _rollout_rows(cfg, gpus)
    _, held = kv_cache(cfg, shape, gpus, a)
    return rows, min(rows, max(1, held // _row_kv(cfg, shape, a)))


def generation_seconds(shape: Shape, rows: int, new_tokens: float, length: int, at_once: int,
                       a: "Assumptions | None" = None) -> float:
    """Seconds for one GPU to generate ``new_tokens`` for each of ``rows`` rows of ``length`` tokens
    (prompt included), ``at_once`` of them in flight: a roofline of the decode step.

    Each step reads the bf16 weights and the KV cache of the rows in flight (at their mean context,
    half the length) from HBM at ``hbm_tb_s`` x ``decode_efficiency``. Rows beyond ``at_once`` wait
    for a later wave (vLLM admits them as rows finish; rows of equal length finish together), so a
    batch whose KV cache overflows the engine takes more steps, each cheaper: an 8B round at 0.35
    of an H200 held a quarter of its rows and its rollouts took 4.3x a 3B round's (LOG.md, session 20).

    Example:
        >>> s = ARCHITECTURES["Qwen/Qwen2.5-3B-Instruct"]
        >>> ideal = Assumptions(decode_efficiency=1.0)
        >>> round(generation_seconds(s, 1, 1000, 1000, 1, ideal), 2)  # one row: the weights, 1,000 times
        1.29
        >>> generation_seconds(s, 8, 100, 1000, 4, ideal) == 2 * generation_seconds(s, 4, 100, 1000, 4, ideal)
        True
    """
    a = a or Assumptions()

    def step(active):  # bytes one decode step reads
        return 2 * shape.parameters() + active * length / 2 * shape.kv_bytes_per_token()

    waves, last = divmod(math.ceil(rows), at_once)
    bandwidth = a.hbm_tb_s * 1e12 * a.decode_efficiency
    return new_tokens * (waves * step(at_once) + (step(last) if last else 0)) / bandwidth


def vllm_memory_for_batch(cfg, shape: Shape, gpus: int = 1, a: "Assumptions | None" = None) -> float:
    """The ``rollout.vllm_memory`` (rounded up to 0.05) whose share holds the whole batch's KV cache."""
    a = a or Assumptions()
    needed, _ = kv_cache(cfg, shape, gpus, a)
    share = (needed + _engine_fixed(shape)) / (a.gpu_memory_gib * GIB)
    return math.ceil(share * 20 - 1e-9) / 20


def checkpoint_disk(cfg, shape: Shape) -> dict[str, int]:
    """Bytes on disk for one run: the checkpoint (adapter or model, and the optimiser), kept twice
    while the next one is written, and the best model (merged, in the trained dtype)."""
    m = cfg.method
    lora = m.lora_rank > 0
    trainable = shape.lora_parameters(m.lora_rank) if lora else shape.parameters()
    one = trainable * 4 + trainable * 8
    best = shape.parameters() * (2 if lora else 4)
    return {"checkpoint": one, "peak checkpoints (2 while writing)": 2 * one, "best model": best,
            "total": 2 * one + best}


# ---------------------------------------------------------------- time

@dataclass(frozen=True)
class Assumptions:
    """What the time estimate assumes (all ours; LOG.md holds measured numbers to replace them).

    ``hbm_tb_s``: the GPU's memory bandwidth (H200: 4.8 TB/s); ``decode_efficiency``: the share of
    it vLLM's decode steps reach in the loop (:func:`generation_seconds`); ``peak_tflops``: the GPU's
    dense bf16 peak (H200: 989); ``mfu``: the share of it the trainer reaches; ``mean_tokens``: mean trajectory
    length (prompt + response); ``generated_share``: the generated part of it (the rest is prompt
    and retrieved passages); ``search_s``: seconds of retrieval per turn of the batch;
    ``gpu_memory_gib``: one GPU's memory (an H200's 139.8 GiB as torch reports it; ``workbench
    plan`` reads the GPU's own where one is visible); ``activation_share``: the share of
    ``policy.checkpointing.activation_bytes`` autograd keeps (:func:`activation_memory`);
    ``other_stages_s``: seconds a round of the stages not modelled (rewards, write-back, weight sync);
    ``proposer_overhead_s``: the proposer stage's seconds beyond its generation (the gate, the prompts).
    ``workbench plan --calibrate`` fits ``mfu``, ``decode_efficiency``, ``search_s``,
    ``activation_share``, ``other_stages_s`` and ``proposer_overhead_s`` from ``workbench bench gpu``'s JSON
    (``workbench.plan_calibration``).
    """

    hbm_tb_s: float = 4.8
    # 3B and 8B rounds at paper shape with 500-token turns on an H200 (0.39 and 0.45 by generation_seconds;
    # LOG.md, session 20); the loop's 64-token turns reach ~0.2 (per-turn prefill and scheduling)
    decode_efficiency: float = 0.4
    peak_tflops: float = 989.0
    mfu: float = 0.24  # a 3B round's update stage on an H200 by this module's own FLOP count (LOG.md, session 19)
    mean_tokens: int = 1500
    generated_share: float = 0.3
    search_s: float = 0.5
    encoder_dim: int = 768  # e5-base-v2's embedding width: the dense index on a GPU holds passages x this, float16
    gpu_memory_gib: float = 139.8
    activation_share: float = 1.0  # ours until calibrated: the estimate as policy.checkpointing makes it
    other_stages_s: float = 0.0  # ours until calibrated: not modelled
    proposer_overhead_s: float = 0.0  # ours until calibrated: the proposer stage beyond its generation (the gate)


def visible_gpu_memory_gib() -> float | None:
    """The memory of the first visible CUDA GPU in GiB, or None without one (or without torch's CUDA)."""
    try:
        import torch

        return torch.cuda.get_device_properties(0).total_memory / GIB if torch.cuda.is_available() else None
    except (ImportError, RuntimeError):
        return None


def time_per_round(cfg, shape: Shape, gpus: int = 1, a: Assumptions = Assumptions()) -> dict[str, float]:
    """Seconds per round (one optimiser step at the paper presets) by stage, and their ``total``.

    Example:
        >>> from workbench.config import preset
        >>> t = time_per_round(preset("paper"), ARCHITECTURES["Qwen/Qwen2.5-3B-Instruct"])
        >>> t["total"] == sum(v for k, v in t.items() if k != "total")
        True
    """
    m, r = cfg.method, cfg.rollout
    n = shape.parameters()
    trajectories = m.chains_per_round * m.group_size
    length = min(a.mean_tokens, r.max_total_tokens)
    tokens = trajectories * length / gpus
    rows, at_once = rows_at_once(cfg, shape, gpus, a)

    def generate(count, new_tokens):  # short batches (proposer, judges, validation): held at once
        per_gpu = math.ceil(count / gpus)
        return generation_seconds(shape, per_gpu, new_tokens, length, per_gpu, a) if per_gpu else 0.0

    recompute = 0 if checkpointing(cfg, shape, a) == "off" else 2 * n  # a checkpointed block's forward again
    flops_per_token = (4 * n if m.lora_rank > 0 else 6 * n) + recompute
    old_forward = (m.minibatches - 1) / m.minibatches if _vllm(r) else 0.0
    throughput = a.peak_tflops * 1e12 * a.mfu
    out = {
        "proposer generation": generate(m.chains_per_round * m.candidates_per_chain, m.proposer_max_new_tokens),
        "proposer gate and prompts": a.proposer_overhead_s,
        "llm verifier and extractor": (generate(m.chains_per_round, m.verifier_max_new_tokens) if m.verifier == "llm"
                                       else 0) + (generate(trajectories, m.extractor_max_new_tokens)
                                                  if m.path_extractor == "llm" else 0),
        "solver rollouts": generation_seconds(shape, rows, length * a.generated_share, length, at_once, a)
        + r.max_turns * a.search_s,
        "old and reference log-probs": tokens * (1 + old_forward) * (2 * n) / throughput,
        "update": tokens * flops_per_token / throughput,
        "other stages (rewards, write-back, sync)": a.other_stages_s,
        "validation": generate(m.val_questions * 2, length * a.generated_share) / m.val_every,  # a round's share
    }
    out["total"] = sum(out.values())
    return out


# ---------------------------------------------------------------- input checks

@dataclass(frozen=True)
class Check:
    """One input: what it is, whether it is there, and what was found (or what to do)."""

    name: str
    ok: bool
    detail: str


def _model_check(what: str, name: str) -> Check:
    where = Path(paths.local_model(name))
    if where.is_dir():
        has = (where / "config.json").exists() or (where / "modules.json").exists()
        return Check(what, has, f"{where}" + ("" if has else ": no config.json there"))
    try:  # a hub id in the Hugging Face cache (offline runs load it from there)
        from huggingface_hub import try_to_load_from_cache

        cached = try_to_load_from_cache(name, "config.json")
    except Exception:  # noqa: BLE001 (a malformed id is just "not found")
        cached = None
    if isinstance(cached, str):
        return Check(what, True, f"{name} in the Hugging Face cache")
    return Check(what, False, f"{name}: not a folder, not in data/models/{Path(name).name}, not in the "
                              f"Hugging Face cache (huggingface-cli download {name} --local-dir "
                              f"data/models/{Path(name).name})")


def _count(con, sql: str, args=()) -> int:
    return int(con.execute(sql, list(args)).fetchone()[0])


def _passages(db: str | Path) -> int:
    """The store's passage count (0 when there is no store yet)."""
    from workbench import store

    if not Path(db).exists():
        return 0
    con = store.connect(db, read_only=True)
    try:
        return _count(con, "SELECT count(*) FROM passages")
    finally:
        con.close()


def _store_checks(db: Path, cfg, datasets) -> list[Check]:
    from workbench import store

    if not db.exists():
        return [Check("store", False, f"{db}: no store (workbench import kilt FILE --db {db})")]
    con = store.connect(db, read_only=True)
    try:
        m = cfg.method
        out = [Check("store", True, str(db))]
        for what, sql in (("entities (knowledge source)", "SELECT count(*) FROM entities"),
                          ("passages", "SELECT count(*) FROM passages"),
                          ("edges (linked pages)", "SELECT count(*) FROM edges"),
                          ("chain pool G_0", "SELECT count(*) FROM chains WHERE run IS NULL")):
            n = _count(con, sql)
            out.append(Check(what, n > 0, f"{n:,}"))
        for what, dataset, split in (("seed pool", m.seed_dataset, "seed"), ("validation split", m.val_dataset, "val"),
                                     *((f"test set {d}", d, "test") for d in datasets)):
            n = _count(con, "SELECT count(*) FROM questions WHERE dataset = ? AND split = ?", (dataset, split))
            out.append(Check(what, n > 0, f"{dataset}/{split}: {n:,} questions"))
        return out
    finally:
        con.close()


def _server_check(url: str) -> Check:
    import urllib.request

    health = url.rstrip("/").removesuffix("/retrieve") + "/health"
    try:
        with urllib.request.urlopen(health, timeout=5) as response:
            body = json.loads(response.read())
        return Check("retrieval server", True, f"{url}: {body.get('passages')} passages, index {body.get('index')}")
    except Exception as err:  # noqa: BLE001 (any failure means: not usable)
        return Check("retrieval server", False, f"{url}: {type(err).__name__}: {err}")


def check_inputs(cfg, db: str | Path, model: str | None = None, datasets=TABLE1_DATASETS) -> list[Check]:
    """Every input a run and its Table 1 evaluation read (module docstring), in order."""
    checks = [_model_check("model", model or cfg.backbone.model)]
    if cfg.search.url:
        checks.append(_server_check(cfg.search.url))
    elif cfg.search.index in ("dense", "hybrid"):
        checks.append(_model_check("dense encoder", cfg.search.dense_model))
    return checks + _store_checks(Path(db), cfg, datasets)


# ---------------------------------------------------------------- the report

def plan(cfg, db: str | Path, model: str | None = None, gpus: int = 1, a: Assumptions = Assumptions(),
         datasets=TABLE1_DATASETS) -> dict:
    """Checks, memory and disk in bytes, and seconds per round and per run, as one dict (``--json``)."""
    if isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 1:
        raise ValueError(f"--gpus {gpus!r}: expected a number of GPUs >= 1")
    model = model or cfg.backbone.model
    shape = model_shape(model)
    per_round = time_per_round(cfg, shape, gpus, a)
    memory = memory_per_gpu(cfg, shape, gpus, a, _passages(db))
    rows, at_once = rows_at_once(cfg, shape, gpus, a)
    waves = {"rollout_rows": rows, "rollout_rows_at_once": at_once}
    if at_once < rows:  # what vLLM's share would have to be, and the total with it
        share = vllm_memory_for_batch(cfg, shape, gpus, a)
        waves |= {"vllm_memory_for_batch": share,
                  "total_with_it": memory["total"] - memory["rollout engine"] + int(share * a.gpu_memory_gib * GIB)}
    return {"preset": cfg.name, "model": model, "gpus": gpus, "config": cfg.hash(),
            "parameters": shape.parameters(), "trainable": shape.lora_parameters(cfg.method.lora_rank)
            if cfg.method.lora_rank else shape.parameters(),
            "checks": [asdict(c) for c in check_inputs(cfg, db, model, datasets)],
            "memory_per_gpu": memory, "fits": memory["total"] <= a.gpu_memory_gib * GIB
            and memory["rollout engine"] >= memory["rollout engine needs at least"],
            **waves, "disk": checkpoint_disk(cfg, shape),
            "seconds_per_round": per_round, "rounds": cfg.method.steps,
            "hours_per_run": per_round["total"] * cfg.method.steps / 3600, "assumptions": asdict(a)}


def format_plan(p: dict) -> str:
    """The plan as the text ``workbench plan`` prints."""
    lines = [f"plan: preset {p['preset']} (config {p['config']}), model {p['model']}, {p['gpus']} GPU(s), "
             f"{p['parameters'] / 1e9:.2f}B parameters ({p['trainable'] / 1e6:,.1f}M trainable)", "", "inputs:"]
    lines += [f"  [{'ok' if c['ok'] else 'MISSING'}] {c['name']}: {c['detail']}" for c in p["checks"]]
    lines += ["", "memory per GPU (estimate):"]
    lines += [f"  {k:<38} {v / GIB:8.1f} GiB" for k, v in p["memory_per_gpu"].items()]
    gpu = p["assumptions"]["gpu_memory_gib"]
    lines += [f"  {'fits' if p['fits'] else 'DOES NOT FIT'} a GPU of {gpu:.1f} GiB (an estimate: README compares "
              "it with measured peaks)"]
    rows, at_once = p["rollout_rows"], p["rollout_rows_at_once"]
    if at_once < rows:
        with_it = p["total_with_it"] / GIB
        lines += [f"  vLLM's KV cache holds {at_once} of the {rows} rollout rows at once: they generate in "
                  f"{math.ceil(rows / at_once)} waves (timed below); rollout.vllm_memory="
                  f"{p['vllm_memory_for_batch']:.2f} would hold them all (total {with_it:.1f} GiB: "
                  f"{'fits' if with_it <= gpu else 'does not fit; more GPUs split the batch'})"]
    lines += ["", "disk for the run's checkpoints (estimate):"]
    lines += [f"  {k:<36} {v / GIB:8.2f} GiB" for k, v in p["disk"].items()]
    lines += ["", "time per round = optimiser step (estimate, from the assumptions below):"]
    lines += [f"  {k:<42} {v:8.1f} s" for k, v in p["seconds_per_round"].items()]
    lines += [f"  {p['rounds']} rounds: {p['hours_per_run']:.1f} h (+ the final evaluation)", "",
              "assumptions: " + ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
                                          for k, v in p["assumptions"].items()),
              "(estimates; N GPUs: `workbench train --gpus N` splits the rollouts and the tokens N ways, "
              "data parallel)"]
    return "\n".join(lines)
