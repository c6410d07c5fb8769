"""The CoEvoKG round, in the paper's fixed order (seed 000, section 3.5): one method, one result.

``Trainer.run_round(t)`` returns a :class:`RoundResult`: one :class:`ChainTask` per chain the
proposer wrote for (its candidates, their verdicts and rewards R_p) and one :class:`Slot` per
solver question (its chain or seed question, the candidate it came from, its G scored rollouts,
p_s). Nothing is written to the store here: ``run_store.RunStore.commit_round`` writes a round in
one transaction, write-back included, and ``train.py`` is the run's lifecycle around both.

One round t:

1. the proposer samples chains from G_t and writes M candidates per chain (Eq. 2);
2. the quality gate admits the top k per chain (Eq. 6); an empty slot takes a seed question;
3. the solver rolls out G trajectories per admitted question (Eq. 3);
4. rewards: R_s (Eq. 7) with S_path (Eqs. 8-9) for the solver, R_p (Eq. 10) for the proposer,
   each from its registry (``method.solver_reward`` / ``method.proposer_reward``, default the method's);
   a proposer reward that reads no rollout (Dr. Free's information gain, seed 002) is scored right
   after step 2 instead, for every candidate that passed the gate (``Trainer.reward_proposer``);
5. one update of the shared backbone from the round's batch (Eqs. 11-12);
6. verified write-back advances G_t to G_t+1 (section 3.4; ``RunStore.commit_round``).

The baselines and the build-up ablation rows (Tables 1-2) are ``MethodSpec`` rows
(``workbench/method/methods.py``) of the same round under a matched budget: the same number of
question slots, G rollouts per slot, and one optimiser step per round (``method.minibatches`` steps,
ours, when set).
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections import Counter
from dataclasses import dataclass, field
from types import SimpleNamespace

import numpy as np
import torch

from workbench.config import Config
from workbench.kg.pool import Chain, sample_chains
from workbench.method import distributed, drfree_loop, eog, ssp
from workbench.method import rewards as R
from workbench.method.gate import DIMENSIONS, StructuralVerifier, Verdict, answer_position, gate
from workbench.method.llm_judges import BatchedLLMVerifier, LLMPathExtractor
from workbench.method.memory import ChainView
from workbench.method.methods import MethodSpec, uses_graph_tools, uses_kg_tool
from workbench.method.multireward import gold_entities
from workbench.method.path_support import EvidenceGraph, PathSupportParams, extract_path, grounded
from workbench.method.proposer import parse_candidates, proposer_prompts, proposer_rewards, rollout_free_rewards
from workbench.policy.rollout import Trajectory, batch_tensors, response_logprobs, rollout
from workbench.method.update import (AdaptiveKL, NonFiniteGuard, grpo_advantages, hrpo_advantages, policy_loss,
                                     probability_scale, reinforce_pp_advantages, warmup_lr)
from workbench.policy import protocol
from workbench.policy.generation import Choices
from workbench.scoring import answer_list, exact_match

log = logging.getLogger(__name__)  # round stages at INFO, update micro-batches at DEBUG (commands.log_to_stderr)


@dataclass
class Candidate:
    """One proposer generation for a chain: its sequence, the gate's verdict and its reward R_p
    (None: not in the proposer update)."""

    sequence: Trajectory
    verdict: Verdict
    reward: float | None = None
    slot: "Slot | None" = None  # the solver slot it was posed in, when admitted
    # a searching proposer's candidate (Dr. Free's w/o KG row): its own evidence and hop label
    evidence: ChainView | None = None
    hops: int | None = None


@dataclass
class ChainTask:
    """One chain the proposer wrote for, with its M candidates in generation order."""

    chain: ChainView
    candidates: list[Candidate] = field(default_factory=list)


@dataclass
class Slot:
    """One solver batch slot: an admitted generated question, or a seed-pool fallback, with its
    G scored rollouts."""

    question: str
    answers: list[str]
    hops: int
    source: str  # 'generated' or 'seed'
    chain: ChainView | None = None
    candidate: Candidate | None = None
    gold_chain: list[int] = field(default_factory=list)  # a seed question's gold entity chain
    question_id: int | None = None  # a seed question's id; a generated one gets its id when stored
    rollouts: list["Rollout"] = field(default_factory=list)

    @property
    def correct(self) -> tuple[bool, ...]:
        return tuple(bool(r.score.r_ans) for r in self.rollouts)

    @property
    def p_s(self) -> float:
        """The group success rate p_s = n_c / G (section 3.3)."""
        return R.success_rate(self.correct)


@dataclass(frozen=True)
class TrajectoryScore:
    """One solver trajectory scored: R_ans, Eq. 8's path, Eq. 9's S_path (and pass), Eq. 7's R_s."""

    r_ans: float
    path: list[int]
    s_path: float
    passed: bool
    reward: float
    terms: dict | None = field(default=None, repr=False, compare=False)  # a multi-term reward's terms (seed 003)


@dataclass
class Rollout:
    """One solver trajectory with its score."""

    trajectory: Trajectory
    score: TrajectoryScore


@dataclass
class RoundResult:
    """Everything round t produced, before anything is stored."""

    round: int
    tasks: list[ChainTask]
    slots: list[Slot]
    update: dict
    timings: dict = field(default_factory=dict)
    search_cache_hit_rate: float = 0.0
    kg_tool: bool = False  # the solver was offered the KG tool (DynaSearcher): its tool use is logged
    # (title, type) of each entity on the slots' chains, for the answer-type counts; None: not
    # looked up (a rank other than 0, which stores nothing), and those two keys are left out
    entities: dict[int, tuple[str, str | None]] | None = None
    extra: dict = field(default_factory=dict)  # a method's own per-round keys (Dr. Free's iteration, chains, searches)

    @property
    def rollouts(self) -> list[Rollout]:
        return [r for s in self.slots for r in s.rollouts]

    @property
    def candidates(self) -> list[Candidate]:
        return [c for task in self.tasks for c in task.candidates]

    def metrics(self, tau_path: float) -> dict:
        """The round's per-round metrics (``run_metrics``), less what the store adds (validation EM,
        write-back counts, pool size)."""
        scores = [r.score for r in self.rollouts]
        s_path = np.asarray([s.s_path for s in scores]) if scores else np.zeros(1)
        gen = [s for s in self.slots if s.source == "generated"]
        seed = [s for s in self.slots if s.source == "seed"]
        candidates = self.candidates
        proposer = [c.reward for c in candidates if c.reward is not None]

        def mean(values):
            return float(np.mean(values)) if values else None

        return {
            "round": self.round,
            "solver_reward": float(np.mean([s.reward for s in scores])), "r_ans": float(np.mean([s.r_ans for s in scores])),
            "s_path_mean": float(s_path.mean()), "s_path_p50": float(np.median(s_path)),
            "s_path_pass_rate": float((s_path >= tau_path).mean()),
            "s_path_correct_mean": float(np.mean([s.s_path for s in scores if s.r_ans] or [0.0])),
            "proposer_reward": float(np.mean(proposer)) if proposer else 0.0,
            "admitted_rate": (sum(c.verdict.admitted for c in candidates) / len(candidates)) if candidates else 0.0,
            "passed_rate": (sum(c.verdict.passed for c in candidates) / len(candidates)) if candidates else 0.0,
            "rejections": dict(sorted(Counter(c.verdict.reason.split(":")[0] for c in candidates
                                              if not c.verdict.passed).items())),
            "seed_fallback_rate": len(seed) / len(self.slots) if self.slots else 0.0,
            "avg_hops_generated": mean([s.hops for s in gen]), "avg_hops_seed": mean([s.hops for s in seed]),
            "p_s_generated": mean([s.p_s for s in gen]), "p_s_seed": mean([s.p_s for s in seed]),
            **({"answer_types_generated": answer_type_counts(gen, self.entities),
                "answer_types_seed": answer_type_counts(seed, self.entities)} if self.entities is not None else {}),
            "kl": self.update["kl"], "kl_coef": self.update["kl_coef"], "entropy": self.update["entropy"],
            "loss": self.update["loss"], "clip_fraction": self.update.get("clip_fraction", 0.0),
            "skipped_update": self.update["skipped"],
            "response_length": float(np.mean([r.trajectory.n_generated for r in self.rollouts])),
            "search_cache_hit_rate": self.search_cache_hit_rate,
            **eog.curriculum_metrics(self.tasks),  # EoG's Fig. 7 counts; nothing for other task sources
            **tool_use_metrics(self.rollouts, self.kg_tool),
            **self.extra,
        }


# An answer's type where it names no chain entity (an imported question stored without a chain, a
# "yes" or a date answer), and where its entity has no ``entities.type`` (imported stores): ours.
LITERAL_ANSWER, UNTYPED_ANSWER = "literal", "untyped"


def answer_entity(slot: Slot, titles: dict[int, str]) -> int | None:
    """The chain entity a slot's answer names: for the first gold answer that normalises to a chain
    entity's title (``titles``), that entity (the gate's ``answer_position`` rule); None when no
    answer does. Not always the chain's last entity: a comparison's answer is either subject, and a
    generated question may ask for any entity of its chain (Eq. 2).

    Example:
        >>> answer_entity(Slot("Which is older?", ["Ann"], 2, "seed", gold_chain=[1, 2]), {1: "Ann", 2: "Bo"})
        1
        >>> answer_entity(Slot("Is it?", ["yes"], 2, "seed", gold_chain=[1, 2]), {1: "Ann", 2: "Bo"}) is None
        True
    """
    ids = gold_entities(slot)
    chain = SimpleNamespace(titles=[titles.get(e, "") for e in ids])
    return next((ids[i] for a in slot.answers if (i := answer_position(chain, a)) is not None), None)


def answer_type_counts(slots: list[Slot], entities: dict[int, tuple[str, str | None]]) -> dict[str, int]:
    """Slots by their answer's type (``answer_types_generated`` / ``answer_types_seed``, issue 15,
    beside seed 001's hops and p_s of generated vs seed questions): the ``entities.type`` of the
    entity the answer names (:func:`answer_entity`), ``literal`` where it names none, ``untyped``
    where that entity has no type; sorted by type. ``entities`` maps an id to its (title, type).

    Example:
        >>> ents = {1: ("Ann", "person"), 2: ("Rome", "city"), 3: ("1932", None)}
        >>> answer_type_counts([Slot("q?", ["Rome"], 1, "seed", gold_chain=[1, 2]),
        ...                     Slot("q?", ["1932"], 1, "seed", gold_chain=[1, 3]),
        ...                     Slot("q?", ["yes"], 1, "seed")], ents)
        {'city': 1, 'literal': 1, 'untyped': 1}
    """
    titles = {e: title for e, (title, _) in entities.items()}
    types = Counter()
    for slot in slots:
        e = answer_entity(slot, titles)
        types[LITERAL_ANSWER if e is None else (entities[e][1] or UNTYPED_ANSWER)] += 1
    return dict(sorted(types.items()))


def chain_entities(con, slots: list[Slot]) -> dict[int, tuple[str, str | None]]:
    """(title, type) of every entity on the slots' chains, in one store query: a round's lookup for
    :func:`answer_type_counts`.

    Example:
        >>> from workbench import store
        >>> con = store.connect(":memory:")
        >>> _ = con.execute("INSERT INTO entities (entity_id, title, type) VALUES (1, 'Ann', 'person')")
        >>> chain_entities(con, [Slot("q?", ["Ann"], 1, "seed", gold_chain=[1, 5])])
        {1: ('Ann', 'person')}
    """
    ids = sorted({e for s in slots for e in gold_entities(s)})
    if not ids:
        return {}
    rows = con.execute("SELECT entity_id, title, type FROM entities WHERE entity_id IN (SELECT unnest(?))",
                       [ids]).fetchall()
    return {int(e): (title, kind) for e, title, kind in rows}


MULTI_REWARD_TERMS = ("format", "f1", "cover_em", "ans", "recall", "penalty", "total")


def tool_use_metrics(rollouts: list[Rollout], kg_tool: bool) -> dict:
    """DynaSearcher's per-round keys (seed 003): the mean of each multi-reward term (``mr_format``,
    ``mr_f1``, ``mr_cover_em``, ``mr_ans``, ``mr_recall``, ``mr_penalty``, ``mr_total``), searches
    per rollout by tool and the share of rollouts over the gold hop count. Empty for a round whose
    reward has no terms and whose solver had no KG tool, so other methods' metrics are unchanged.

    Example:
        >>> tool_use_metrics([], kg_tool=False)
        {}
    """
    scored = [r.score.terms for r in rollouts if r.score is not None and r.score.terms is not None]
    if not rollouts or (not kg_tool and not scored):
        return {}
    out = {}
    if scored:
        out = {f"mr_{k}": float(np.mean([t[k] for t in scored])) for k in MULTI_REWARD_TERMS}
        out["over_hops_rate"] = float(np.mean([t["over_hops"] for t in scored]))
    out["searches_doc"] = float(np.mean([len(r.trajectory.queries) for r in rollouts]))
    out["searches_kg"] = float(np.mean([len(r.trajectory.kg_queries) for r in rollouts]))
    return out


def score_trajectory(traj: Trajectory, golds: list[str], titles: dict[int, str], graph: EvidenceGraph,
                     reward_fn=R.SOLVER_REWARDS["coevokg"], beta: float = R.BETA_PATH, slot: Slot | None = None,
                     path: list[int] | None = None, config=None, answer_sets: bool = False) -> TrajectoryScore:
    """Score one trajectory as the loop does: exact match, the extracted path (Eq. 8) over the
    entities in ``titles`` (the retrieved ones plus the candidate answer entities), its support
    against G_t (Eq. 9), and the solver reward (Eq. 7, or the method's ``reward_fn``, a
    ``rewards.SOLVER_REWARDS`` entry; one with ``terms``, as DynaSearcher's, keeps them in the
    score). ``path`` given (the LLM extractor's, ``llm_judges``) replaces the deterministic
    extraction; ``config`` is the run's MethodConfig (rewards with parameters of their own read it).
    ``answer_sets``: the solver answers a ``;``-separated set (EoG's graph tools); R_ans then scores
    its first answer (Hit@1 against the golds), the reward reads the whole set.

    Example:
        >>> from workbench.method.path_support import PathSupportParams
        >>> t = Trajectory(0, 0, "p", [], queries=["Ann"], entity_ids=[1], answer="Rome")
        >>> g = EvidenceGraph({(1, 2): 1.0}, PathSupportParams())
        >>> score_trajectory(t, ["Rome"], {1: "Ann", 2: "Rome"}, g)
        TrajectoryScore(r_ans=1.0, path=[1, 2], s_path=1.0, passed=True, reward=1.2)
    """
    r_ans = exact_match((answer_list(traj.answer) or [""])[0] if answer_sets else traj.answer or "", golds)
    path = extract_path(traj.queries, traj.entity_ids, titles, traj.answer) if path is None else path
    path = [e for e in path if e in titles]  # only candidates (grounded ones: answer_candidates) reach Eq. 9
    verdict = graph.path_support(path) if len(path) >= 2 else None
    s_path = verdict.s_path if verdict else 0.0
    inputs = R.SolverInputs(r_ans, s_path, beta, traj, slot, config)
    terms = reward_fn.terms(inputs) if hasattr(reward_fn, "terms") else None
    reward = terms["total"] if terms is not None else reward_fn(inputs)
    return TrajectoryScore(r_ans, path, s_path, bool(verdict and verdict.passed), reward, terms)


def answer_candidates(traj: Trajectory, chain_entities, titles: dict[int, str]) -> dict[int, str]:
    """The entities Eq. 8's path may use for one trajectory: those grounded in its retrieved
    passages (``path_support.grounded``): the entities of the passages it retrieved, and the
    entities of its question's chain (the originating chain, or a seed question's gold chain) that a
    retrieved passage names. Section 3.3: path support never grants process reward for what the
    search did not find; the gold chain only names which entities to look for in the passages.

    Example:
        >>> t = Trajectory(0, 0, "p", [], entity_ids=[1], retrieved=["Ann was born in Rome."])
        >>> answer_candidates(t, [2, 3, 9], {1: "Ann", 2: "Rome", 3: "Italy"})
        {1: 'Ann', 2: 'Rome'}
    """
    pool = {e: titles[e] for e in dict.fromkeys([*traj.entity_ids, *chain_entities]) if e in titles}
    return grounded(traj.entity_ids, traj.retrieved, pool)


def extraction_item(question: str, traj: Trajectory, chain_entities, titles: dict[int, str]) -> tuple:
    """One request of the LLM path extractor (``LLMPathExtractor.extract_many``): the question,
    the trajectory's text, its grounded candidates (:func:`answer_candidates`, what the reply may
    name), its answer, and the ids the prompt lists: the entities of the passages it retrieved, in
    retrieval order. The prompt never lists the gold chain's titles (a chain entity a passage
    names is read back from the reply, but is not pointed out to the extractor).

    Example:
        >>> t = Trajectory(0, 0, "p", [], text="...", entity_ids=[1], answer="Rome", retrieved=["Ann: Rome."])
        >>> extraction_item("Where?", t, [2, 3], {1: "Ann", 2: "Rome", 3: "Italy"})
        ('Where?', '...', {1: 'Ann', 2: 'Rome'}, 'Rome', [1])
    """
    candidates = answer_candidates(traj, chain_entities, titles)
    shown = [e for e in dict.fromkeys(traj.entity_ids) if e in candidates]
    return question, traj.text, candidates, traj.answer, shown


def answer_choices(chains: list[ChainView], m: int) -> Choices:
    """Eq. 2's a in {e_1..e_L} as a decoding constraint (``method.proposer_answer_choices``, ours):
    after ``<answer>`` each of a chain's M prompts may only spell one of its entity titles, then
    ``</answer>``. The question stays free text; the gate's other rules are unchanged.

    Example:
        >>> c = ChainView(0, "h", [1, 2], ["Ann", "Rome"], ["born in"], ["", ""])
        >>> answer_choices([c], 2).per_row
        [['Ann</answer>', 'Rome</answer>'], ['Ann</answer>', 'Rome</answer>']]
    """
    return Choices(protocol.ANSWER_OPEN, [[t + protocol.ANSWER_CLOSE for t in c.titles] for c in chains for _ in range(m)])


def chain_view(chain: Chain) -> ChainView:
    """The fields the method reads from a pool chain: titles, relations and node passages.

    A node shows its newest evidence, so passages that write-back attached in earlier rounds reach
    the proposer (section 3.4: later rounds condition on richer contexts).
    """
    passages, newest = [""] * len(chain.entity_ids), [-1] * len(chain.entity_ids)
    for ev in chain.evidence:
        if ev.target == "node" and ev.text and ev.round > newest[ev.position]:
            passages[ev.position], newest[ev.position] = ev.text, ev.round
    return ChainView(chain.chain_id, chain.hash, list(chain.entity_ids), list(chain.titles),
                     list(chain.relations), passages)


class OpenGate:
    """SSP's verifier: no chain to check against, so every candidate that passes the
    deterministic filter (extraction, leakage, one wh-question) scores 1 on every gate dimension.

    Example:
        >>> OpenGate().judge(None, [("Who?", "Ann")])[0].scores == {d: 1.0 for d in DIMENSIONS}
        True
    """

    def judge(self, chain, candidates):
        return [Verdict(i, q, a, True, scores={d: 1.0 for d in DIMENSIONS}) for i, (q, a) in enumerate(candidates)]


def make_verifier(name: str, policy, max_new_tokens: int = 256, vocabulary: str = "exact", con=None):
    """The quality gate's verifier by name (``method.verifier``): 'structural' (deterministic, the
    tiny tier; its word matching ``vocabulary``, ``method.verifier_vocabulary``, the entities' types
    read from the store ``con`` for 'forms_types'), 'open' (SSP: no chain to check) or 'llm' (the
    policy itself judges, greedily, with ``gate.LLMVerifier``'s grouped prompt, a round's chains in
    one batch: ``llm_judges``; EoG's queries keep ``eog.TopologyVerifier``, see ``Trainer``).

    Example:
        >>> type(make_verifier("open", None)).__name__
        'OpenGate'
    """
    if name == "structural":  # 'forms_types' reads the entities' types from the store ``con``
        types = (dict(con.execute("SELECT entity_id, type FROM entities WHERE type IS NOT NULL").fetchall())
                 if vocabulary == "forms_types" else None)
        return StructuralVerifier(vocabulary=vocabulary, types=types)
    if name == "open":  # the vocabulary is the structural verifier's: these two match no words
        return OpenGate()
    if name == "llm":
        return BatchedLLMVerifier(policy, max_new_tokens)
    raise ValueError(f"method.verifier: unknown verifier {name!r}; expected one of ['llm', 'open', 'structural']")


def make_kg_tool(con, method_cfg, policy=None, url: str = ""):
    """DynaSearcher's KG search tool with the settings of ``method_cfg`` (``method.kg_*``,
    ``search.kg_search.tool_settings``): over the store, or, with ``url`` (``search.url``), the
    same retrieval server's ``POST /kg_search`` (``serve-retriever --kg``), its settings checked
    against these first. The 'llm' filter has ``policy`` judge greedily (a capable backbone).

    Example:
        >>> from workbench import store
        >>> from workbench.config import MethodConfig
        >>> make_kg_tool(store.connect(":memory:"), MethodConfig()).filter
        'overlap'
    """
    from workbench.search.kg_search import KGSearch, tool_settings

    settings = tool_settings(method_cfg)
    if url:
        from workbench.search.client import RemoteKGSearch

        return RemoteKGSearch(url, max_triples=settings["max_triples"]).checked(settings)
    judge = None
    if method_cfg.kg_filter == "llm":
        if policy is None:
            raise ValueError("method.kg_filter='llm' needs the policy to judge the triples")

        def judge(prompts: list[str]) -> list[str]:
            outs = policy.generate([policy.chat_prompt(p) for p in prompts], max_new_tokens=32, temperature=0.0,
                                   top_p=1.0)
            return [o.text for o in outs]
    return KGSearch(con, judge=judge, **settings)


def make_graph_tools(con, method_cfg):
    """EoG's graph tools (``search.graph_tools.GraphTools``) over the store ``con``, with the settings of
    ``method_cfg`` (``method.graph_max_neighbors``, ``method.kg_min_similarity``); refused without a
    store (a rank other than 0).

    Example:
        >>> from workbench import store
        >>> from workbench.config import MethodConfig
        >>> make_graph_tools(store.connect(":memory:"), MethodConfig()).max_neighbors
        20
    """
    from workbench.search.graph_tools import GraphTools, tool_settings

    if con is None:
        raise ValueError("method.graph_tools: the graph tools read the store, which only rank 0 holds; "
                         "train EoG's rows in one process (no --gpus)")
    return GraphTools(con, **tool_settings(method_cfg))


class Laps:
    """The round's stage timer: each call records the seconds since the previous one as
    ``timings["time_<stage>"]`` (the per-round ``time_*`` metrics) and logs it at INFO, so a round
    cut short (a time limit, a crash) still shows which stages finished and how long they took.
    On CUDA the line also gives the process's peak of allocated GPU memory so far, so the stage
    where the peak is reached shows (the peak is not reset: the run's own total reads it).

    Example:
        >>> lap = Laps(); lap("update"); list(lap.timings)
        ['time_update']
    """

    def __init__(self, label: str = "round stage"):
        self.timings: dict[str, float] = {}
        self.label = label
        self._clock = time.perf_counter()

    def __call__(self, stage: str) -> None:
        now = time.perf_counter()
        self.timings[f"time_{stage}"] = now - self._clock
        peak = ""
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            peak = f", GPU peak so far {torch.cuda.max_memory_allocated() / 2 ** 30:.1f} GiB"
        log.info("%s %s: %.1f s%s", self.label, stage, now - self._clock, peak)
        self._clock = now


def seed_pool_of(con, dataset: str, families: str = "") -> list[tuple]:
    """The seed pool the fallback draws from (section 3.2): (question_id, question, answers, hops,
    chain) of ``dataset``'s split 'seed', by question id; ``families`` (``method.seed_families``,
    ours: names joined by ',') keeps those families only, "" keeps all. ValueError when none is left.

    Example:
        >>> from workbench import store
        >>> from workbench.kg.tinyworld import build_world
        >>> con = store.connect(":memory:"); _ = build_world(con, preset="smoke")
        >>> len(seed_pool_of(con, "tinyworld")), len(seed_pool_of(con, "tinyworld", "comparison,two_hop"))
        (100, 40)
    """
    wanted = [f.strip() for f in families.split(",") if f.strip()]
    rows = con.execute(
        "SELECT question_id, question, answers, coalesce(hops, 1), coalesce(chain, []), coalesce(family, dataset) "
        "FROM questions WHERE dataset = ? AND split = 'seed' ORDER BY question_id", [dataset]).fetchall()
    if not rows:
        raise ValueError(f"the store has no seed-pool questions (dataset {dataset!r}, split 'seed'); "
                         "build a world (workbench world) or import one (workbench import qa --split seed) "
                         "and set method.seed_dataset")
    have = sorted({r[5] for r in rows})
    unknown = sorted(set(wanted) - set(have))
    if unknown:
        raise ValueError(f"config field 'method.seed_families': {', '.join(unknown)} not among the seed pool's "
                         f"families {have} (dataset {dataset!r}); name some of those, or '' for all")
    return [r[:5] for r in rows if not wanted or r[5] in wanted]


class Trainer:
    """Holds the policy, its frozen reference, the optimiser and the search tool of one run, and
    runs its rounds (:meth:`run_round`).

    ``reference`` is a separate frozen policy for a full fine-tune; a LoRA policy
    (``method.lora_rank`` > 0) takes None and its adapter-free base is the reference
    (``Policy.base_only``: no second copy of the weights). The optimiser holds the trainable
    parameters only (every weight for a full fine-tune, the adapters for LoRA)."""

    def __init__(self, con, cfg: Config, spec: MethodSpec, run: str, policy, reference, search, kg=None):
        self.con, self.cfg, self.spec, self.run = con, cfg, spec, run
        self.policy, self.reference, self.search = policy, reference, search
        m = cfg.method
        # EoG's graph tools (seed 004), instead of document search, for a method that enables them
        graph_tools = uses_graph_tools(spec, m.graph_tools)
        if graph_tools and uses_kg_tool(spec, m.kg_tool):
            raise ValueError(f"--method {spec.name}: the solver gets EoG's graph tools (method.graph_tools) or "
                             "DynaSearcher's KG tool (method.kg_tool), not both; set one of them to off")
        # DynaSearcher's KG tool (seed 003), only for a method that enables it: ``kg``, else the
        # store's, or search.url's server's when the document search goes there
        self.kg = (kg or make_kg_tool(con, m, policy, cfg.search.url)) if uses_kg_tool(spec, m.kg_tool) else None
        self.graph = make_graph_tools(con, m) if graph_tools else None
        if reference is None and not policy.is_lora:
            raise ValueError("Trainer: a full fine-tune (method.lora_rank = 0) needs a reference policy")
        self.optimizer = torch.optim.AdamW([p for p in policy.model.parameters() if p.requires_grad], lr=m.lr,
                                           weight_decay=0.0)
        self.guard = NonFiniteGuard(m.max_non_finite)
        self.kl = AdaptiveKL(m.kl_coef, m.kl_target, m.kl_horizon)
        solver_reward = m.solver_reward or spec.solver_reward
        self.solver_reward = R.SOLVER_REWARDS[solver_reward]
        proposer_reward = m.proposer_reward or spec.proposer_reward
        self.proposer_reward = proposer_reward if proposer_reward and spec.task_source != "seed_pool" else None
        if self.proposer_reward:
            R.PROPOSER_REWARDS[self.proposer_reward]  # an unknown name fails before any work
        # Dr. Free's reward reads no rollout: it is scored before the solver runs (reward_proposer)
        self.rollout_free = bool(self.proposer_reward) and not R.needs_outcome(self.proposer_reward)
        # Dr. Free (seed 002, drfree_loop): its chains, proposer algorithm, iterations and likelihood anchor
        self.drfree = drfree_loop.settings(spec, m)
        self.iteration_ends = drfree_loop.iteration_ends(m.steps, self.drfree.iterations)
        self.selection: drfree_loop.ChainSelection | None = None  # made at the first draw (rank 0)
        self.anchor = None  # the updated anchor (a Policy) once an iteration has ended
        if (m.drfree_anchor == "updated" and self.drfree.iterations > 1 and policy.is_lora
                and str(self.proposer_reward).startswith("dr_free")):
            raise ValueError("method.drfree_anchor=updated with LoRA (method.lora_rank > 0) is not supported: the anchor "
                             "is a full copy of an iteration's checkpoint; use --set method.drfree_anchor=fixed or live")
        self.verifier = make_verifier(m.verifier or ("structural" if spec.task_source == "kg_chains" else "open"),
                                      policy, m.verifier_max_new_tokens, m.verifier_vocabulary, con)
        # Eq. 8's LLM extractor only where Eq. 7 reads its path: another reward's S_path only fills
        # the metrics, from the deterministic extraction (no extra greedy batch a round)
        self.extractor = (LLMPathExtractor(policy, m.extractor_max_new_tokens)
                          if m.path_extractor == "llm" and R.reads_path(solver_reward) else None)
        if spec.task_source == "kg_topology":  # EoG: queries, not chains, are what its verifier reads
            self.patterns = eog.parse_patterns(m.topology_patterns)
            # The LLM verifier's prompt renders a chain (a query is not one): EoG keeps its own
            # deterministic verifier at every tier, including the paper presets' verifier='llm'.
            if m.verifier in ("", "structural", "llm"):
                self.verifier = eog.TopologyVerifier()
        self._topology_graph, self._held_out = None, None
        self.path_params = PathSupportParams.of(m)
        self._g0: EvidenceGraph | None = None
        self.dist = None  # several ranks: distributed.lead/follow set it; None is the one-process code
        if con is None:  # a rank other than 0 (distributed.follow): rank 0 owns the store and its reads
            self.titles, self.seed_pool = {}, []
            return
        self.titles: dict[int, str] = dict(con.execute(
            "SELECT entity_id, title FROM entities").fetchall())
        self.seed_pool = seed_pool_of(con, m.seed_dataset, m.seed_families)

    # -- state ----------------------------------------------------------------------------
    def state_dict(self) -> dict:
        """The optimiser, the non-finite guard and the adaptive KL coefficient (what a checkpoint
        holds beside the policy's weights)."""
        return {"optimizer": self.optimizer.state_dict(), "non_finite": self.guard.consecutive,
                "kl_coef": self.kl.coef}

    def load_state_dict(self, state: dict) -> None:
        self.optimizer.load_state_dict(state["optimizer"])
        self.guard.consecutive = state["non_finite"]
        self.kl.coef = state["kl_coef"]

    def seed_for(self, t: int, stage: int) -> int:
        """The seed of stage ``stage`` of round ``t``: a resumed run draws exactly what an
        uninterrupted one does."""
        return int(self.cfg.method.seed) * 1_000_003 + t * 101 + stage

    @property
    def scorer(self):
        """The policy whose teacher-forced likelihoods score Dr. Free's information gain
        (``method.drfree_anchor``, ``drfree_loop``): the current policy (``live``), the base
        (``fixed``, and ``updated`` in iteration 1: the frozen reference, or a LoRA policy's base),
        or the last finished iteration's checkpoint (``updated``)."""
        mode = self.cfg.method.drfree_anchor
        if mode == "live":
            return self.policy
        if mode == "updated" and self.anchor is not None:
            return self.anchor
        return self.reference if self.reference is not None else _BaseOnly(self.policy)

    @property
    def uses_anchor(self) -> bool:
        """Whether the proposer's reward reads Dr. Free's likelihoods and ``method.drfree_anchor`` is
        ``updated`` (the anchor then follows the iterations)."""
        return self.cfg.method.drfree_anchor == "updated" and str(self.proposer_reward).startswith("dr_free")

    def set_anchor(self, path) -> None:
        """Make the checkpoint at ``path`` the ``updated`` anchor (loaded once, float32, frozen)."""
        from workbench.policy.model import Policy

        self.anchor = Policy.load(path, device=str(self.policy.device), dtype=torch.float32)
        self.anchor.model.eval()
        log.info("Dr. Free anchor: %s", path)

    @property
    def pool_run(self) -> str | None:
        """Whose write-back G_t includes: this run's with write-back (C3), else G_0 alone."""
        return self.run if self.spec.write_back else None

    def evidence_graph(self, t: int) -> EvidenceGraph:
        """G_t for path support (Eqs. 8-9); without write-back G_t is G_0 in every round, built once."""
        if self.pool_run is None:
            if self._g0 is None:
                self._g0 = EvidenceGraph.from_store(self.con, run=None, round=0, params=self.path_params)
            return self._g0
        return EvidenceGraph.from_store(self.con, run=self.pool_run, round=t, params=self.path_params)

    # -- the round ------------------------------------------------------------------------
    def run_round(self, t: int) -> RoundResult:
        """Round t in the paper's order (steps 1-5 of the module docstring); write-back (6) and
        every store write happen in ``RunStore.commit_round``."""
        torch.manual_seed(self.seed_for(t, 0))
        lap = Laps()  # under several ranks (``distributed``) steps 1-2 and 4 run on rank 0, 3 is shared
        tasks, slots = distributed.propose(self, t, lap)
        distributed.solve(self, t, slots)
        lap("rollouts")
        tasks, slots = distributed.score(self, t, tasks, slots)
        lap("rewards")
        update = self.update(t, tasks, slots)
        lap("update")
        self.policy.sync()  # the generation backend serves the updated weights (a no-op for HF)
        lap("sync")
        return RoundResult(t, tasks, slots, update, lap.timings, distributed.hit_rate(self),
                           kg_tool=self.kg is not None or self.graph is not None,
                           entities=chain_entities(self.con, slots) if self.con is not None else None,
                           extra=self._extra_metrics(t, tasks))

    def _extra_metrics(self, t: int, tasks: list[ChainTask]) -> dict:
        """Dr. Free's per-round keys, only for the runs that have them: ``iteration`` (several
        iterations), ``drfree_chains`` (its chain construction's count), ``proposer_searches``
        (searches per candidate of a searching proposer)."""
        out = {}
        if len(self.iteration_ends) > 1:
            out["iteration"] = drfree_loop.iteration_of(t, self.iteration_ends)
        if self.selection is not None:
            out["drfree_chains"] = len(self.selection.ids)
        if self.spec.task_source == "seed_document" and tasks:
            cands = [c for task in tasks for c in task.candidates]
            out["proposer_searches"] = float(np.mean([len(c.sequence.queries) for c in cands])) if cands else 0.0
        return out

    # -- 1-2: proposer and gate ------------------------------------------------------------
    def _task_chains(self, t: int) -> list[ChainView]:
        m = self.cfg.method
        if self.spec.task_source == "kg_topology":  # EoG (seed 004): executed queries of Table 6
            if self._topology_graph is None:
                self._topology_graph = eog.topology.TopologyGraph.from_store(self.con)
                self._held_out = eog.held_out_queries(self.con, self.titles)  # the test set's queries
            queries = eog.draw_queries(self._topology_graph, self.patterns, m.chains_per_round, self.seed_for(t, 1),
                                       m.topology_max_answers, self._held_out)
            return eog.topology_views(self.con, queries, self.titles, self._topology_graph)
        if self.spec.task_source == "kg_chains" and self.drfree.chain_selection == "drfree":
            if self.selection is None:  # Dr. Free's chain construction (seed 002, Fig. 5, Table 7), once a run
                self.selection = drfree_loop.ChainSelection(self.con, self.search, self.cfg.search.topk,
                                                            m.drfree_hop_ratio, self.cfg.pool.seed)
                log.info("Dr. Free chains: %d of G_0's %d (rejected %s)", len(self.selection.ids),
                         self.selection.result["considered"], self.selection.result["rejections"])
            return [chain_view(c) for c in self.selection.sample(self.con, m.chains_per_round, self.seed_for(t, 1))]
        if self.spec.task_source == "kg_chains":
            return [chain_view(c) for c in sample_chains(self.con, m.chains_per_round, seed=self.seed_for(t, 1),
                                                        run=self.pool_run, round=t,
                                                        weighted=m.pool_sampling == "evidence")]
        ids = self.con.execute(
            "SELECT e.entity_id FROM entities e WHERE e.kind = 'entity' AND EXISTS "
            "(SELECT 1 FROM passages p WHERE p.entity_id = e.entity_id) ORDER BY e.entity_id").fetchnumpy()["entity_id"]
        if len(ids) < m.chains_per_round:
            raise ValueError(f"method.chains_per_round={m.chains_per_round}: the store has only {len(ids)} entities "
                             "with passages")
        picked = [int(e) for e in np.random.default_rng(self.seed_for(t, 1)).choice(ids, m.chains_per_round, replace=False)]
        first = dict(self.con.execute(
            "SELECT entity_id, arg_min(text, paragraph) FROM passages WHERE entity_id IN (SELECT unnest(?)) "
            "GROUP BY entity_id", [picked]).fetchall())
        # SSP (section 4.1): an answer entity, no KG structure; its proposer reads only the title and
        # searches (method/ssp.py)
        return [ChainView(-1, "", [e], [self.titles[e]], [], [first[e]]) for e in picked]

    def propose(self, t: int) -> tuple[list[ChainTask], list[Slot]]:
        """Eq. 2 and Eq. 6: M candidates per chain, gated; empty slots take seed questions."""
        m, r = self.cfg.method, self.cfg.rollout
        n_slots = m.chains_per_round * m.admit_top_k
        if self.spec.task_source == "seed_pool":
            return [], self._seed_slots(t, n_slots)
        if self.spec.task_source == "seed_document":
            return self._propose_with_search(t, n_slots)
        chains = self._task_chains(t)
        if self.spec.proposer_search:
            return self._propose_ssp(t, chains, n_slots)
        queries = self.spec.task_source == "kg_topology"
        prompts = (eog.topology_prompts(self.policy.chat_prompt, chains, m.candidates_per_chain, m.topology_prompt)
                   if queries else proposer_prompts(self.policy.chat_prompt, chains, m.candidates_per_chain))
        choices = ((eog.topology_choices if queries else answer_choices)(chains, m.candidates_per_chain)
                   if m.proposer_answer_choices else None)
        gens = self.policy.generate(prompts, max_new_tokens=m.proposer_max_new_tokens, temperature=r.temperature,
                                    top_p=r.top_p, stop=(protocol.ANSWER_CLOSE,), seed=self.seed_for(t, 2),
                                    choices=choices)
        sequences = [Trajectory(i, 0, prompt, self.policy.encode(prompt), list(g.token_ids), [1] * len(g.token_ids),
                                list(g.logprobs), text=g.text) for i, (prompt, g) in enumerate(zip(prompts, gens))]
        tasks, slots = [], []
        parsed = [parse_candidates([s.text for s in sequences[c * m.candidates_per_chain:(c + 1) * m.candidates_per_chain]])
                  for c in range(len(chains))]
        if hasattr(self.verifier, "prefetch"):  # the LLM verifier (never a query's): one batch, this round's replies
            self.verifier.prefetch([(chain, cands, m.gate_allow_topic, self.spec.leak_filter)
                                    for chain, cands in zip(chains, parsed)])
        for c_idx, chain in enumerate(chains):
            mine = sequences[c_idx * m.candidates_per_chain:(c_idx + 1) * m.candidates_per_chain]
            if queries:
                verdicts = eog.topology_gate(chain, parsed[c_idx], self.verifier, m.gate_threshold, m.admit_top_k,
                                             m.gate_aggregation)
            else:
                verdicts = gate(chain, parsed[c_idx], self.verifier, m.gate_threshold,
                                m.admit_top_k, m.gate_aggregation, allow_topic=m.gate_allow_topic,
                                leak_filter=self.spec.leak_filter, multi_hop_veto=m.gate_multi_hop_veto)
            task = ChainTask(chain, [Candidate(mine[v.index], v) for v in verdicts])
            for cand in task.candidates:
                if cand.verdict.admitted:  # a query's slot is scored against its complete answer set
                    cand.slot = (Slot(cand.verdict.question, chain.answer_titles, chain.hops, "generated", chain, cand)
                                 if queries else
                                 Slot(cand.verdict.question, [cand.verdict.answer], max(1, len(chain.titles) - 1),
                                      "generated", chain, cand))
                    slots.append(cand.slot)
            tasks.append(task)
        missing = n_slots - len(slots)
        if missing > 0:  # seed fallback (section 3.2)
            slots += self._seed_slots(t, missing)
        return tasks, slots

    def _propose_with_search(self, t: int, n_slots: int) -> tuple[list[ChainTask], list[Slot]]:
        """Dr. Free's "w/o KG" row (seed 002, Table 2; ``drfree_loop``): Dr. Zero-style, M searching
        proposer rollouts per seed document (one entity's passage, drawn as SSP's), each candidate
        gated with its own evidence (the document and the passages it retrieved) and hop label
        (its searches); empty slots take seed questions."""
        m, r = self.cfg.method, self.cfg.rollout
        docs = self._task_chains(t)  # one entity and its first passage each, as SSP's answer entities
        trajectories = rollout(self.policy, self.search, [d.titles[0] for d in docs], m.candidates_per_chain,
                               max_turns=r.max_turns, topk=self.cfg.search.topk, temperature=r.temperature,
                               top_p=r.top_p, max_new_tokens=m.proposer_max_new_tokens,
                               max_total_tokens=r.max_total_tokens, seed=self.seed_for(t, 2),
                               user_messages=drfree_loop.search_proposer_messages(docs))
        found = sorted({p for tr in trajectories for p in tr.passage_ids})
        passages = {int(p): (int(e), text) for p, e, text in self.con.execute(
            "SELECT passage_id, entity_id, text FROM passages WHERE passage_id IN (SELECT unnest(?))",
            [found]).fetchall()} if found else {}
        tasks, slots = [], []
        for c, doc in enumerate(docs):
            mine = trajectories[c * m.candidates_per_chain:(c + 1) * m.candidates_per_chain]
            evidence = [drfree_loop.evidence_view(doc, tr, passages, self.titles) for tr in mine]
            # each candidate gated against its own evidence (its answer among the entities it found or
            # the document's, none of them named), then the document's top k of those that passed
            verdicts = [dataclasses.replace(gate(ev, [cand], self.verifier, m.gate_threshold, 1, m.gate_aggregation,
                                                 allow_topic=m.gate_allow_topic, leak_filter=self.spec.leak_filter)[0],
                                            index=i, admitted=False)
                        for i, (ev, cand) in enumerate(zip(evidence, parse_candidates([tr.text for tr in mine])))]
            for v in sorted((v for v in verdicts if v.passed), key=lambda v: (-v.q, v.index))[:m.admit_top_k]:
                v.admitted = True
            task = ChainTask(doc, [Candidate(mine[v.index], v, evidence=evidence[v.index],
                                             hops=drfree_loop.searched_hops(mine[v.index])) for v in verdicts])
            for cand in task.candidates:
                if cand.verdict.admitted:
                    cand.slot = Slot(cand.verdict.question, [cand.verdict.answer], cand.hops, "generated",
                                     cand.evidence, cand)
                    slots.append(cand.slot)
            tasks.append(task)
        if n_slots > len(slots):
            slots += self._seed_slots(t, n_slots - len(slots))
        return tasks, slots

    def _propose_ssp(self, t: int, chains: list[ChainView], n_slots: int) -> tuple[list[ChainTask], list[Slot]]:
        """SSP as published (``method/ssp.py``): per answer entity, M proposer rollouts that search,
        SSP's rule checks and RAG verification; the valid ones' first k are posed."""
        m, r = self.cfg.method, self.cfg.rollout
        answers = [c.titles[0] for c in chains]
        trajectories = ssp.propose(self.policy, self.search, answers, m.candidates_per_chain, max_turns=r.max_turns,
                                   topk=self.cfg.search.topk, temperature=r.temperature, top_p=r.top_p,
                                   max_new_tokens=r.max_new_tokens, max_total_tokens=r.max_total_tokens,
                                   seed=self.seed_for(t, 2))
        budget = r.max_total_tokens - r.max_new_tokens
        verdicts = ssp.verdicts(trajectories, answers, m.candidates_per_chain, m.admit_top_k,
                                min_words=m.ssp_min_question_words, min_searches=m.ssp_min_searches,
                                noise=m.ssp_rag_noise, seed=self.seed_for(t, 6),
                                generate=ssp.greedy(self.policy, r.max_new_tokens),
                                fits=lambda p: len(self.policy.encode(self.policy.chat_prompt(p))) <= budget)
        tasks, slots = [], []
        for c, (chain, mine) in enumerate(zip(chains, verdicts)):
            task = ChainTask(chain, [Candidate(trajectories[c * m.candidates_per_chain + v.index], v) for v in mine])
            for cand in task.candidates:
                if cand.verdict.admitted:
                    hops = max(1, len(cand.sequence.queries))
                    cand.slot = Slot(cand.verdict.question, [cand.verdict.answer], hops, "generated", chain, cand)
                    slots.append(cand.slot)
            tasks.append(task)
        if n_slots > len(slots):  # seed fallback (section 3.2; SSP reuses earlier questions)
            slots += self._seed_slots(t, n_slots - len(slots))
        return tasks, slots

    def _seed_slots(self, t: int, k: int) -> list[Slot]:
        rng = np.random.default_rng(self.seed_for(t, 3))
        picked = rng.choice(len(self.seed_pool), size=min(k, len(self.seed_pool)), replace=False)
        return [Slot(text, list(ans), int(h), "seed", gold_chain=list(chain), question_id=int(q))
                for q, text, ans, h, chain in (self.seed_pool[int(i)] for i in picked)]

    # -- 3-4: rollouts and rewards ---------------------------------------------------------
    def solve(self, t: int, slots: list[Slot], seed: int | None = None) -> None:
        """Eq. 3: G rollouts per slot at the training temperature (scored in :meth:`reward`);
        ``seed`` (default the round's) is a rank's own (``distributed.solve``)."""
        r, m = self.cfg.rollout, self.cfg.method
        trajectories = rollout(
            self.policy, self.search, [s.question for s in slots], m.group_size, max_turns=r.max_turns,
            topk=self.cfg.search.topk, temperature=r.temperature, top_p=r.top_p, max_new_tokens=r.max_new_tokens,
            max_total_tokens=r.max_total_tokens, seed=self.seed_for(t, 4) if seed is None else seed, kg=self.kg,
            graph=self.graph)
        for traj in trajectories:
            slots[traj.question_index].rollouts.append(Rollout(traj, None))

    def reward(self, t: int, tasks: list[ChainTask], slots: list[Slot], graph: EvidenceGraph) -> None:
        """R_s per rollout (Eq. 7 with Eqs. 8-9, or the method's solver reward) and R_p per
        candidate (Eq. 10, or the method's proposer reward; ``proposer.proposer_rewards``). A
        proposer reward that reads no rollout (Dr. Free's) was scored before the rollouts
        (``reward_proposer``)."""
        m = self.cfg.method
        paths = self._llm_paths(slots)
        for slot in slots:
            on_chain = gold_entities(slot)
            for roll in slot.rollouts:
                roll.score = score_trajectory(roll.trajectory, slot.answers,
                                              answer_candidates(roll.trajectory, on_chain, self.titles),
                                              graph, self.solver_reward, m.beta_path, slot, paths.get(id(roll)), m,
                                              answer_sets=self.graph is not None)
        if not self.proposer_reward or self.rollout_free:
            return
        schedule = R.Schedule(t, m.anneal_steps or m.steps, m.p_start, m.p_end, m.sigma)
        for task in tasks:
            verdicts = [c.verdict for c in task.candidates]
            outcomes = {c.verdict.index: R.GroupOutcome(c.slot.correct, tuple(r.score.reward for r in c.slot.rollouts))
                        for c in task.candidates if c.slot is not None}
            rewards = proposer_rewards(verdicts, outcomes, schedule, m.extraction_penalty, self.proposer_reward,
                                       m.penalize_rejected, chain=task.chain, policy=self.scorer,
                                       search=self.search, options=m)
            for cand, r_p in zip(task.candidates, rewards):
                cand.reward = r_p

    def reward_proposer(self, t: int, tasks: list[ChainTask]) -> None:
        """R_p of a rollout-free proposer reward (``rewards.needs_outcome`` False: Dr. Free's
        information gain, seed 002): every candidate that passed the gate is scored, posed to the
        solver or not, in one batch over the round (``proposer.rollout_free_rewards``), before any
        rollout; the solver's G rollouts then serve the solver's update alone."""
        m = self.cfg.method
        schedule = R.Schedule(t, m.anneal_steps or m.steps, m.p_start, m.p_end, m.sigma)
        # one entry per candidate: a searching proposer's candidate (w/o KG) has evidence of its own
        cands = [(c, c.evidence or task.chain) for task in tasks for c in task.candidates]
        per_cand = rollout_free_rewards([(chain, [c.verdict]) for c, chain in cands], schedule, m.extraction_penalty,
                                        self.proposer_reward, m.penalize_rejected, policy=self.scorer,
                                        search=self.search, options=m)
        for (cand, _), (r_p,) in zip(cands, per_cand):
            cand.reward = r_p

    def _llm_paths(self, slots: list[Slot]) -> dict[int, list[int]]:
        """Eq. 8 by the LLM extractor (``method.path_extractor = llm``) for every correct rollout of
        the round, in one batch, keyed by ``id(rollout)``; {} with the deterministic extractor or a
        solver reward that reads no S_path (``rewards.reads_path``)."""
        if self.extractor is None:
            return {}
        todo = [(slot, roll) for slot in slots for roll in slot.rollouts
                if exact_match(roll.trajectory.answer or "", slot.answers)]
        items = [extraction_item(slot.question, roll.trajectory, gold_entities(slot), self.titles)
                 for slot, roll in todo]
        return {id(roll): path for (_, roll), path in zip(todo, self.extractor.extract_many(items))} if items else {}

    # -- 5: update -------------------------------------------------------------------------
    def update(self, t: int, tasks: list[ChainTask], slots: list[Slot]) -> dict:
        """Section 3.5: the clipped-surrogate update with the k3 KL to the frozen reference.

        Solver rows carry GRPO advantages (Eq. 11) broadcast to their generated tokens; proposer
        rows carry REINFORCE++ advantages (Eq. 12), whitened over the global proposer batch with the
        reward at the terminal token. Retrieved tokens are masked out (loss_mask = 0).
        """
        m = self.cfg.method
        rows: list[Trajectory] = []
        advantages: list[torch.Tensor] = []
        # EoG's role ablations (seed 004, Fig. 5): a role without update contributes no rows
        rollouts = [r for s in slots for r in s.rollouts] if self.spec.update_solver else []
        solver_adv = grpo_advantages(torch.tensor([r.score.reward for r in rollouts], dtype=torch.float32),
                                     m.group_size, m.adv_eps) if rollouts else []
        for roll, a in zip(rollouts, solver_adv):
            if m.skip_zero_advantage and float(a) == 0.0:  # a group of equal rewards: no policy gradient
                continue
            rows.append(roll.trajectory)
            advantages.append(torch.full((len(roll.trajectory.response_ids),), float(a))
                              * torch.tensor(roll.trajectory.loss_mask))
        scored = [(c.sequence, c.reward) for task in tasks for c in task.candidates
                  if c.reward is not None and c.sequence.response_ids and self.spec.update_proposer]
        if scored and self.drfree.proposer_algorithm == "hrpo":  # seed 002's proposer (update.hrpo_advantages)
            hops = [drfree_loop.candidate_hops(task.chain, c.hops) for task in tasks for c in task.candidates
                    if c.reward is not None and c.sequence.response_ids and self.spec.update_proposer]
            for (s, _), a in zip(scored, hrpo_advantages([r for _, r in scored], hops, m.adv_eps)):
                rows.append(s)
                advantages.append(torch.full((len(s.response_ids),), float(a)) * torch.tensor(s.loss_mask))
            scored = []
        if scored:
            width = max(len(s.response_ids) for s, _ in scored)
            mask = torch.zeros(len(scored), width)
            terminal = torch.zeros(len(scored))
            for i, (s, r) in enumerate(scored):  # a searching proposer's (SSP) retrieved tokens are masked
                mask[i, :len(s.response_ids)] = torch.tensor(s.loss_mask, dtype=torch.float32)
                terminal[i] = r
            prop_adv = reinforce_pp_advantages(terminal, mask, gamma=m.discount, eps=m.adv_eps)
            for i, (s, _) in enumerate(scored):
                rows.append(s)
                advantages.append(prop_adv[i, :len(s.response_ids)])
        # section 3.5 says one update per round; splitting the round's batch into several optimiser
        # steps (veRL's ppo_mini_batch_size) is ours, method.minibatches (1 = the paper's one step)
        if not rows:
            return {"loss": 0.0, "kl": 0.0, "entropy": 0.0, "clip_fraction": 0.0, "skipped": 1, "kl_coef": self.kl.coef}
        order = np.random.default_rng(self.seed_for(t, 5)).permutation(len(rows))
        parts = np.array_split(order, max(1, min(m.minibatches, len(rows))))
        # A backend whose log-probs are not the trainer's (vLLM): the first step's policy is the one
        # that sampled, so its old log-probs are its new ones, detached (ratio 1, as TRL's GRPO with one
        # iteration); only the later steps' rows need the trainer's forward of the sampling policy.
        own_first = not self.policy.backend.trainer_logprobs
        later = sorted(int(i) for part in parts[1:] for i in part) if own_first else []
        if later:
            start = time.perf_counter()
            for i, row in zip(later, self.recompute_old_logprobs([rows[i] for i in later])):
                rows[i] = row
            log.info("update: old log-probs of %d rows recomputed by the trainer: %.1f s", len(later),
                     time.perf_counter() - start)
        steps = []
        for j, part in enumerate(parts):
            # the optimiser step's index counts every round's full share of minibatches, so a resumed
            # run warms up exactly as an uninterrupted one
            for group in self.optimizer.param_groups:
                group["lr"] = warmup_lr(m.lr, t * m.minibatches + j, m.warmup_steps)
            steps.append(self._step(t, [rows[i] for i in part], [advantages[i] for i in part],
                                    own_old=own_first and j == 0))
        out = {k: float(np.mean([s[k] for s in steps])) for k in ("loss", "kl", "entropy", "clip_fraction")}
        return {**out, "skipped": sum(s["skipped"] for s in steps), "kl_coef": self.kl.coef}

    def recompute_old_logprobs(self, rows: list[Trajectory]) -> list[Trajectory]:
        """``rows`` with their old-policy log-probs from the trainer's own forward pass, before any
        step of this round: the ratio's two log-probs then come from the same weights, precision and
        kernels (a backend such as vLLM samples in bfloat16 with other kernels; its log-probs would
        put a precision gap into every ratio). Retrieved tokens keep 0."""
        import dataclasses

        compute = lambda part: response_logprobs(self.policy, part, self.cfg.method.micro_batch)  # noqa: E731
        fresh = compute(rows) if self.dist is None else distributed.old_logprobs(self.dist, compute, rows)
        return [dataclasses.replace(row, old_logprobs=f.tolist()) for row, f in zip(rows, fresh)]

    def _reference_logprobs(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """The frozen reference's log-probs (no grad): the separate reference policy, or a LoRA
        policy's adapter-free base."""
        with torch.no_grad():
            if self.reference is not None:
                return self.reference.token_logprobs(input_ids, attention_mask)
            with self.policy.base_only():
                return self.policy.token_logprobs(input_ids, attention_mask)

    def _step(self, t: int, rows: list[Trajectory], advantages: list[torch.Tensor], own_old: bool = False) -> dict:
        """One optimiser step on ``rows``: the token-mean surrogate over all of their loss tokens.
        ``own_old``: the policy is still the one that sampled ``rows``; its log-probs, detached, are
        the old ones."""
        m = self.cfg.method
        total_tokens = sum(int(sum(r.loss_mask)) for r in rows)
        if total_tokens == 0:
            return {"loss": 0.0, "kl": 0.0, "entropy": 0.0, "clip_fraction": 0.0, "skipped": 1}
        self.policy.model.train()
        self.optimizer.zero_grad(set_to_none=True)
        sums = {"loss": 0.0, "kl": 0.0, "entropy": 0.0, "clip_fraction": 0.0}
        pad = self.policy.tokenizer.pad_token_id
        order = sorted(range(len(rows)), key=lambda i: rows[i].length)  # similar lengths pad less
        if self.dist is not None:  # this rank's rows; total_tokens stays the global batch's
            order = self.dist.step_rows(order)
        for start in range(0, len(order), m.micro_batch):
            clock = time.perf_counter()
            idx = order[start:start + m.micro_batch]
            tensors = batch_tensors([rows[i] for i in idx], pad)
            adv = torch.zeros_like(tensors["old_logprobs"])
            for j, i in enumerate(idx):
                p = len(rows[i].prompt_ids)
                adv[j, p:p + len(advantages[i])] = advantages[i]
            tensors = {k: v.to(self.policy.device) for k, v in tensors.items()}
            adv = adv.to(self.policy.device)
            new_logp, entropy = self.policy.token_logprobs(tensors["input_ids"], tensors["attention_mask"],
                                                           entropy_mask=tensors["loss_mask"])
            ref_logp = self._reference_logprobs(tensors["input_ids"], tensors["attention_mask"])
            mask = tensors["loss_mask"].float()
            adv = adv * probability_scale(new_logp.detach(), m.prob_scale_low, m.prob_scale_high)
            old_logp = new_logp.detach() if own_old else tensors["old_logprobs"]
            loss, stats = policy_loss(new_logp, old_logp, ref_logp, adv, mask, m.clip_eps, self.kl.coef)
            share = float(mask.sum()) / total_tokens  # token-mean over all of this step's rows
            (loss * share).backward()
            sums["loss"] += float(loss.detach()) * share
            sums["kl"] += float(stats["kl"]) * share
            sums["clip_fraction"] += float(stats.get("clip_fraction", 0.0)) * share
            sums["entropy"] += float(entropy) * share
            if log.isEnabledFor(logging.DEBUG):
                log.debug("round %d update micro-batch %d/%d: %d sequences, %d tokens, %.1f s", t,
                          start // m.micro_batch + 1, -(-len(order) // m.micro_batch), len(idx),
                          int(tensors["attention_mask"].sum()), time.perf_counter() - clock)
        self.policy.model.eval()
        if self.dist is not None:  # the gradient and sums of one process at the same global batch
            sums = self.dist.all_reduce_step(self.optimizer.param_groups[0]["params"], sums)
        if not self.guard.check(sums["loss"], sums["kl"], step=t):
            self.optimizer.zero_grad(set_to_none=True)
            return {**sums, "skipped": 1}
        norm = torch.nn.utils.clip_grad_norm_(self.optimizer.param_groups[0]["params"], m.max_grad_norm)
        if not self.guard.check(float(norm), 0.0, step=t):  # a non-finite gradient is skipped the same way
            self.optimizer.zero_grad(set_to_none=True)
            return {**sums, "skipped": 1}
        self.optimizer.step()
        self.kl.update(sums["kl"], len(rows))
        return {**sums, "skipped": 0}



class _BaseOnly:
    """A LoRA policy seen without its adapters (``Policy.base_only``) for scoring: Dr. Free's fixed
    anchor when there is no separate reference copy."""

    def __init__(self, policy):
        self._policy = policy

    def __getattr__(self, name):
        return getattr(self._policy, name)

    def token_logprobs(self, *args, **kwargs):
        with self._policy.base_only():
            return self._policy.token_logprobs(*args, **kwargs)
