"""Step through the method by hand: a round's steps (seed 000, section 3.5) one call at a time, on
the default world (preset ``tiny``: its store ``data/tiny.duckdb``, TinyWorld and G_0, and the
shipped tiny warm start), or on any store, preset, method or model :func:`world` is given.

=====================  ==========================================================================
``chains(n)``          n chains of G_t (Eq. 1), as round t draws them and the proposer reads them
``questions()``        the store's test (or val, seed) questions with their gold chains
``propose(chain)``     the proposer's M candidates (q, a) for one chain (Eq. 2)
``gate(candidates)``   the quality gate's verdicts Q(q, a, c) and the top k it admits (Eq. 6)
``solve(question)``    the solver's multi-turn rollouts with search (Eq. 3)
``score(attempt)``     R_ans (EM; F1 beside it), the searched entity path (Eq. 8), S_path (Eq. 9),
                       and the solver reward R_s = R_ans (1 + beta S_path) (Eq. 7)
=====================  ==========================================================================

Nothing here is method code: :class:`World` builds what ``workbench train`` builds
(``method.train``: the store's world by ``ensure_world``, the warm start, ``load_policies``,
``make_retriever`` and a ``loop.Trainer``), and each call is the trainer's own step: its task
source writes and gates (``tasks.WrittenTasks.write`` / ``gate``), ``Trainer.solve`` rolls out,
and ``score`` is ``score.score_trajectory`` over ``score.answer_candidates`` and
``Trainer.evidence_graph``, as ``Trainer.reward`` scores a round's rollouts.

The store is written only when its world is missing (built once, then closed). After that each
call opens it read-only and closes it before returning, so a notebook stepping through the method
does not keep ``workbench train`` off the same store (DuckDB allows one writer and no readers in
other processes beside it).

Example:
    >>> from workbench import step
    >>> chain = step.chains(1)[0]          # the default world: preset tiny, G_0's chains
    >>> len(chain.titles) >= 2
    True
    >>> candidates = step.propose(chain)   # Eq. 2: M = method.candidates_per_chain of them
    >>> verdicts = step.gate(candidates)   # Eq. 6
    >>> attempts = step.solve(candidates[0])   # Eq. 3: G = method.group_size trajectories
    >>> s = step.score(attempts[0])        # Eqs. 7-9
    >>> s.reward == s.em * (1 + s.beta * s.s_path)
    True
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from pathlib import Path

from workbench import paths, store
from workbench.config import Config, preset as get_preset
from workbench.kg.pool import Chain
from workbench.method.gate import Verdict
from workbench.method.loop import Trainer
from workbench.method.memory import ChainView
from workbench.method.methods import method_spec, uses_graph_tools, uses_kg_tool
from workbench.method.proposer import chain_view
from workbench.method.round import Candidate, Rollout, Slot, gold_entities
from workbench.method.score import answer_candidates, score_trajectory
from workbench.method.train import base_model, ensure_world, load_policies
from workbench.policy.rollout import Trajectory, rollout
from workbench.scoring import f1_score

log = logging.getLogger(__name__)

# The trainer's run name: a name no run can have (train.check_run_name), so G_t is G_0 and the
# chains drawn are G_0's whatever runs the store holds.
STEP_RUN = "(step)"


@dataclasses.dataclass(frozen=True)
class Proposal:
    """One proposer generation for a chain (Eq. 2): its text, the (question, answer) parsed from it
    (None where extraction failed), the generated ``sequence`` (a proposer update row) and, once
    :func:`gate` has judged it, the gate's ``verdict`` (``gate.Verdict``: q, scores, admitted, reason)."""

    chain: ChainView
    index: int
    text: str
    question: str | None
    answer: str | None
    sequence: Trajectory = dataclasses.field(repr=False)
    verdict: Verdict | None = dataclasses.field(default=None, repr=False)

    @property
    def admitted(self) -> bool | None:
        """Whether the gate admitted it (None: not gated yet)."""
        return None if self.verdict is None else self.verdict.admitted

    def __repr__(self) -> str:
        gated = "" if self.verdict is None else (f", q={self.verdict.q:.3g}, admitted={self.verdict.admitted}, "
                                                 f"reason={self.verdict.reason!r}")
        return (f"Proposal({self.index}, chain={' -> '.join(self.chain.titles)!r}, question={self.question!r}, "
                f"answer={self.answer!r}{gated})")


@dataclasses.dataclass(frozen=True)
class Attempt:
    """One solver trajectory and the question slot it answered (``round.Slot``: the question, its
    gold answers, its chain or a seed question's gold chain): what :func:`score` reads."""

    slot: Slot = dataclasses.field(repr=False)
    trajectory: Trajectory = dataclasses.field(repr=False)

    @property
    def question(self) -> str:
        return self.slot.question

    @property
    def answer(self) -> str | None:
        return self.trajectory.answer

    def __repr__(self) -> str:
        t = self.trajectory
        return (f"Attempt(question={self.question!r}, gold={self.slot.answers!r}, answer={t.answer!r}, "
                f"searches={len(t.queries)}, finished={t.finished_reason!r})")


@dataclasses.dataclass(frozen=True)
class Score:
    """One trajectory scored as the round scores it (seed 000, section 3.3).

    ``em`` is R_ans (exact match after SQuAD normalisation); ``f1`` (token F1) is shown beside it
    and is in no reward. ``path`` is Eq. 8's entity path, over the entities the trajectory's search
    grounded (``path_titles`` their names); ``steps`` the support M(e_i, e_i+1) of each hop and
    ``s_path`` their Eq. 9 mean, ``passed`` whether it reaches ``method.tau_path``. ``reward`` is the
    method's solver reward (``reward_name``; CoEvoKG's is Eq. 7, R_s = R_ans (1 + beta S_path)).
    """

    em: float
    f1: float
    path: list[int]
    path_titles: list[str]
    steps: tuple[float, ...]
    s_path: float
    passed: bool
    beta: float
    reward: float
    reward_name: str
    terms: dict | None = dataclasses.field(default=None, repr=False)

    def __str__(self) -> str:
        path = (" -> ".join(self.path_titles) if len(self.path_titles) >= 2 else
                f"{self.path_titles[0]} (one grounded entity: no hop)" if self.path_titles
                else "none (no grounded entity)")
        hops = ", ".join(f"{m:.3g}" for m in self.steps)
        support = f"{self.s_path:.3g}" + (f": per hop {hops};" if hops else ";")
        total = (f"R_s (Eq. 7) = R_ans (1 + beta S_path) = {self.em:g} x (1 + {self.beta:g} x {self.s_path:.3g}) = "
                 f"{self.reward:.4g}" if self.reward_name == "coevokg"
                 else f"R_s = {self.reward:.4g} (solver reward {self.reward_name!r})")
        return "\n".join([f"R_ans = EM {self.em:g} (F1 {self.f1:.2f}, not in the reward)",
                          f"searched path (Eq. 8): {path}",
                          f"S_path (Eq. 9) = {support} {'passes' if self.passed else 'below'} tau_path",
                          total])


class World:
    """A store with its world and G_0, a base model and a ``loop.Trainer`` over them, built as
    ``workbench train`` builds a run's (``method.train.train``), writing nothing but a missing world.

    ``preset`` (and ``overrides``, ``{"section.field": value}`` as ``--set``) gives the settings;
    ``db`` the store (default the preset's, ``data/<preset>.duckdb``), or ``con`` an open connection
    of the caller's (used as it is, never closed here); ``method`` a row whose tasks are G_t's
    chains (``coevokg`` and its build-up rows, Dr. Free's); ``model`` the base (default the
    preset's: the tiny warm start, shipped for preset tiny, or ``backbone.model``); ``round`` the
    round t whose seeds the calls draw (``Trainer.seed_for``).

    Example:
        >>> w = world("tiny")  # a World made once per process
        >>> w.cfg.name, w.trainer.spec.name, Path(w.db).name
        ('tiny', 'coevokg', 'tiny.duckdb')
        >>> World("tiny", method="search_r1")
        Traceback (most recent call last):
        ...
        ValueError: step: method 'search_r1' draws its tasks from 'seed_pool'; step proposes for chains of G_t: use a method whose tasks are 'kg_chains' (coevokg, c1, c2, drfree, ...)
    """

    def __init__(self, preset: str = "tiny", db: str | Path | None = None, method: str = "coevokg",
                 model: str | Path | None = None, overrides: dict | None = None, round: int = 0, con=None):
        self.cfg: Config = get_preset(preset, **dict(overrides or {}))
        spec = method_spec(method)
        if spec.task_source != "kg_chains":
            raise ValueError(f"step: method {method!r} draws its tasks from {spec.task_source!r}; step proposes for "
                             "chains of G_t: use a method whose tasks are 'kg_chains' (coevokg, c1, c2, drfree, ...)")
        m = self.cfg.method
        holds = ("a KG tool" if uses_kg_tool(spec, m.kg_tool) else "graph tools" if uses_graph_tools(spec, m.graph_tools)
                 else "memory-mapped search (search.mmap)" if self.cfg.search.mmap else None)
        if holds and con is None:
            raise ValueError(f"step: method {method!r} at these settings gives the solver {holds}, which keeps the "
                             "store open: pass con=store.connect(db, read_only=True) and close it when done")
        self.round = int(round)
        self._con = con
        self.db = store.file_of(con) if con is not None else str(db or paths.default_db(self.cfg.name))
        self.trainer: Trainer | None = None
        self._graphs: dict = {}
        if con is None and not _world_built(self.db):
            with contextlib.closing(_open(self.db, read_only=False)) as writing:  # the one write: a missing world
                ensure_world(writing, self.cfg)
        with self.reading() as con:
            ensure_world(con, self.cfg)  # the world is there: checks G_0's filters, writes nothing
            base = model or base_model(con, self.cfg, spec, log.info)
            policy, reference = load_policies(self.cfg, base, None)
            search = _retriever(con, self.cfg)
            self.trainer = Trainer(con, self.cfg, spec, STEP_RUN, policy, reference, search)
        self.base = str(base)

    @contextlib.contextmanager
    def reading(self):
        """The store for one call: the caller's ``con``, else opened read-only and closed after
        (the trainer reads it through ``trainer.con`` meanwhile). A store another process writes
        is one ValueError naming that process (``store.lock_holder``)."""
        if self._con is not None:
            yield self._con
            return
        con = _open(self.db, read_only=True)
        if self.trainer is not None:
            self.trainer.con = con
        try:
            yield con
        finally:
            if self.trainer is not None:
                self.trainer.con = None
            con.close()

    def _t(self, round: int | None) -> int:
        return self.round if round is None else int(round)

    def evidence_graph(self, t: int):
        """G_t for Eqs. 8-9 (``Trainer.evidence_graph``), read once per round t."""
        if t not in self._graphs:
            with self.reading():
                self._graphs[t] = self.trainer.evidence_graph(t)
        return self._graphs[t]


def _open(db: str, read_only: bool):
    """``store.connect``, with DuckDB's lock error as one ValueError naming who holds the store and
    what to do (``store.lock_holder``)."""
    try:
        return store.connect(db, read_only=read_only)
    except Exception as err:
        holder = store.lock_holder(err)
        if holder is None:
            raise
        raise ValueError(f"{db}: {holder}") from None


def _world_built(db: str) -> bool:
    """Whether the store at ``db`` holds a world and G_0 (read-only; False for no file)."""
    if not Path(db).exists():
        return False
    with contextlib.closing(_open(db, read_only=True)) as con:
        tables = {t for (t,) in con.execute("SHOW TABLES").fetchall()}
        if not {"entities", "chains"} <= tables:
            return False
        return (con.execute("SELECT count(*) FROM entities").fetchone()[0] > 0
                and con.execute("SELECT count(*) FROM chains WHERE run IS NULL").fetchone()[0] > 0)


def _retriever(con, cfg: Config):
    from workbench.search.retriever import make_retriever

    return make_retriever(con, cfg.search)


_WORLDS: dict = {}
_DEFAULT: list = []  # the world the module's calls use: the last one world() returned


def world(preset: str = "tiny", db: str | Path | None = None, method: str = "coevokg", model: str | Path | None = None,
          overrides: dict | None = None, round: int = 0) -> World:
    """The :class:`World` of these arguments (made once per process, then reused), which the
    module's calls then use. Without a call to it, they use ``world()``: preset tiny.

    Example:
        >>> w = world("tiny")
        >>> world("tiny") is w, w.cfg.method.candidates_per_chain, w.cfg.method.group_size
        (True, 4, 8)
    """
    key = (preset, str(db or ""), method, str(model or ""), repr(sorted((overrides or {}).items())), int(round))
    if key not in _WORLDS:
        _WORLDS[key] = World(preset, db=db, method=method, model=model, overrides=overrides, round=round)
    _DEFAULT[:] = [_WORLDS[key]]
    return _WORLDS[key]


def _current(w: World | None) -> World:
    return w or (_DEFAULT[0] if _DEFAULT else world())


def chains(n: int = 1, round: int | None = None, world: World | None = None) -> list[ChainView]:
    """The first ``n`` chains round t draws from G_t (Eq. 1; the method's chain selection,
    ``method.chains_per_round`` of them, as ``tasks.ChainTasks.draw``), as the proposer reads them:
    entity titles, relations, one passage per node.

    Example:
        >>> c = chains(1)[0]
        >>> len(c.relations) == len(c.titles) - 1 == len(c.passages) - 1
        True
    """
    w = _current(world)
    most = w.cfg.method.chains_per_round
    if not 1 <= n <= most:
        raise ValueError(f"chains: n={n!r}; expected 1 to method.chains_per_round = {most} (a round's draw)")
    with w.reading():
        return w.trainer.tasks.draw(w._t(round))[:n]


def questions(split: str = "test", limit: int | None = None, dataset: str = "", world: World | None = None):
    """The store's questions of ``dataset`` (default ``method.val_dataset``: TinyWorld's) and
    ``split`` as evaluation reads them (``rollout.load_questions``: question_id, dataset, family,
    question, answers; ``limit`` per family), with each one's gold ``chain`` of entity ids: a row
    is what :func:`solve` takes.

    Example:
        >>> qs = questions(limit=1)
        >>> list(qs.columns), len(qs) == qs.family.nunique()
        (['question_id', 'dataset', 'family', 'question', 'answers', 'chain'], True)
    """
    from workbench.policy.rollout import load_questions

    w = _current(world)
    with w.reading() as con:
        df = load_questions(con, dataset or w.cfg.method.val_dataset, split, limit)
        chains = dict(con.execute("SELECT question_id, coalesce(chain, []) FROM questions WHERE question_id IN "
                                  "(SELECT unnest(?))", [df["question_id"].tolist()]).fetchall())
    df["chain"] = [list(chains[q]) for q in df["question_id"]]
    return df


def propose(chain: ChainView | Chain, round: int | None = None, world: World | None = None) -> list[Proposal]:
    """Eq. 2, (q, a) ~ pi_p(. | c): the proposer's ``method.candidates_per_chain`` generations for
    ``chain`` (a :func:`chains` entry, or a pool ``Chain`` from ``kg.pool.sample_chains``), sampled
    as round t samples them (``tasks.WrittenTasks.write``: the chain's prompt, the training
    temperature, the round's seed), each parsed into (question, answer).

    Example:
        >>> ps = propose(chains(1)[0])
        >>> len(ps), ps[0].index, ps[0].verdict is None
        (4, 0, True)
        >>> propose(chains(1)[0])[0].text == ps[0].text  # deterministic by the round's seed
        True
    """
    w = _current(world)
    view = chain_view(chain) if isinstance(chain, Chain) else chain
    if not isinstance(view, ChainView):
        raise ValueError(f"propose: expected a chain (step.chains(n)[i], or kg.pool.sample_chains' Chain), got "
                         f"{type(chain).__name__}")
    (sequences,), (parsed,) = w.trainer.tasks.write(w._t(round), [view])
    return [Proposal(view, i, s.text, *(p or (None, None)), sequence=s)
            for i, (s, p) in enumerate(zip(sequences, parsed))]


def gate(candidates: Proposal | list[Proposal], world: World | None = None) -> Proposal | list[Proposal]:
    """Eq. 6, Q(q, a, c) = 1[no leak] Verify(q, a, c): the quality gate on one chain's candidates
    (one :class:`Proposal` or a list of them, from one ``propose`` call), judged together as the
    round judges them (``tasks.WrittenTasks.gate``: the deterministic filter, then the method's
    verifier, and the top ``method.admit_top_k`` above ``method.gate_threshold`` admitted). Returns
    the candidates with their ``verdict``: ``q``, the four ``scores``, ``admitted`` and ``reason``.

    Example:
        >>> gated = gate(propose(chains(1)[0]))
        >>> sum(p.admitted for p in gated) <= world().cfg.method.admit_top_k
        True
        >>> all(p.verdict.reason for p in gated)
        True
    """
    w = _current(world)
    one = isinstance(candidates, Proposal)
    props = [candidates] if one else list(candidates)
    if not props or not all(isinstance(p, Proposal) for p in props):
        raise ValueError("gate: expected a Proposal or a list of them (step.propose(chain))")
    chain = props[0].chain
    if any(p.chain != chain for p in props):
        raise ValueError("gate: the candidates come from different chains; gate one propose() call's at a time")
    verdicts = w.trainer.tasks.gate(chain, [(p.question, p.answer) if p.question is not None else None for p in props])
    by_index = {v.index: v for v in verdicts}
    gated = [dataclasses.replace(p, verdict=by_index[i]) for i, p in enumerate(props)]
    return gated[0] if one else gated


def solve(question: Proposal | Slot | str, answers: list[str] | None = None, gold_chain: list[int] | None = None,
          greedy: bool = False, round: int | None = None, world: World | None = None) -> list[Attempt]:
    """Eq. 3, (tau, y) ~ pi_s(. | q, T): the solver's multi-turn rollouts with search (Search-R1's
    protocol: ``<search>`` turns, the top ``search.topk`` passages back, up to ``rollout.max_turns``).

    ``question`` is a :class:`Proposal` (its question, its answer as the gold, its chain: the slot
    the round would pose), a row of :func:`questions` (its golds and gold chain, as the round poses
    a seed question), a ``round.Slot``, or a question's text with its gold ``answers`` (and
    ``gold_chain``: the entities whose names in a retrieved passage count as found, Eq. 8).
    By default the round's own call (``Trainer.solve``: ``method.group_size`` trajectories at the
    training temperature, the round's seed); ``greedy`` gives one at temperature 0 as evaluation
    decodes (``rollout.score_questions``).

    Example:
        >>> q = questions(limit=1).iloc[0]
        >>> a = solve(q, greedy=True)
        >>> len(a), a[0].question == q.question, a[0].slot.answers == list(q.answers)
        (1, True, True)
        >>> len(solve("Who founded Kavimo?", answers=["Ann"]))  # the round's G rollouts
        8
    """
    w = _current(world)
    tr, t = w.trainer, w._t(round)
    slot = _slot(tr, question, answers, gold_chain)
    if greedy:
        r = tr.cfg.rollout
        trajs = rollout(tr.policy, tr.search, [slot.question], 1, max_turns=r.max_turns, topk=tr.cfg.search.topk,
                        temperature=0.0, top_p=1.0, max_new_tokens=r.max_new_tokens,
                        max_total_tokens=r.max_total_tokens, seed=0, kg=tr.kg, graph=tr.graph)
        slot.rollouts = [Rollout(traj, None) for traj in trajs]
    else:
        tr.solve(t, [slot])
    return [Attempt(slot, roll.trajectory) for roll in slot.rollouts]


def _slot(tr: Trainer, question, answers, gold_chain) -> Slot:
    """The solver slot a question is posed in: a proposal's as the round poses an admitted one
    (``tasks.WrittenTasks.slot``), a copy of a given slot, or a seed-style slot of text and answers."""
    if isinstance(question, Proposal):
        if question.question is None:
            raise ValueError(f"solve: candidate {question.index} has no question (its extraction failed: "
                             f"{question.text[:60]!r}); solve another")
        verdict = question.verdict or Verdict(question.index, question.question, question.answer, True)
        return tr.tasks.slot(question.chain, Candidate(question.sequence, verdict))
    if isinstance(question, Slot):
        return dataclasses.replace(question, rollouts=[])
    qid = None
    if all(hasattr(question, f) for f in ("question", "answers", "chain")):  # a row of questions()
        qid = int(question.question_id) if hasattr(question, "question_id") else None
        question, answers, gold_chain = question.question, list(question.answers), list(question.chain)
    if isinstance(question, str) and question.strip():
        chain = [int(e) for e in gold_chain or []]
        return Slot(question, [str(a) for a in answers or []], max(1, len(chain) - 1), "seed", gold_chain=chain,
                    question_id=qid)
    raise ValueError(f"solve: expected a question's text, a row of step.questions(), a step.Proposal or a "
                     f"round.Slot, got {question!r}")


def score(attempt: Attempt, round: int | None = None, world: World | None = None) -> Score:
    """Score one trajectory as ``Trainer.reward`` does (seed 000, section 3.3): R_ans by exact match
    against the slot's golds, Eq. 8's path over the entities its search grounded
    (``score.answer_candidates``; the LLM extractor's where ``method.path_extractor`` is 'llm'),
    Eq. 9's S_path against G_t (``Trainer.evidence_graph``) and the method's solver reward, Eq. 7
    R_s = R_ans (1 + beta S_path) for CoEvoKG (``score.score_trajectory``). Printing it shows each
    part with its equation.

    Example:
        >>> s = score(solve(questions(limit=1).iloc[0], greedy=True)[0])
        >>> s.reward_name, s.beta, s.reward == s.em * (1 + s.beta * s.s_path)
        ('coevokg', 0.2, True)
        >>> print(s)  # doctest: +ELLIPSIS
        R_ans = EM ... (F1 ..., not in the reward)
        searched path (Eq. 8): ...
        S_path (Eq. 9) = ... tau_path
        R_s (Eq. 7) = R_ans (1 + beta S_path) = ...
    """
    w = _current(world)
    if not isinstance(attempt, Attempt):
        raise ValueError(f"score: expected a step.Attempt (step.solve(question)[i]), got {type(attempt).__name__}")
    tr, m = w.trainer, w.cfg.method
    slot, traj = attempt.slot, attempt.trajectory
    graph = w.evidence_graph(w._t(round))
    on_chain = gold_entities(slot)
    roll = Rollout(traj, None)
    path = tr._llm_paths([dataclasses.replace(slot, rollouts=[roll])]).get(id(roll))  # Eq. 8 by the LLM, if set
    s = score_trajectory(traj, slot.answers, answer_candidates(traj, on_chain, tr.titles), graph, tr.solver_reward,
                         m.beta_path, slot, path, m, answer_sets=tr.graph is not None)
    steps = graph.path_support(s.path).steps if len(s.path) >= 2 else ()
    return Score(s.r_ans, f1_score(traj.answer, slot.answers), list(s.path), [tr.titles[e] for e in s.path],
                 tuple(float(x) for x in steps), s.s_path, s.passed, m.beta_path, s.reward,
                 m.solver_reward or tr.spec.solver_reward, s.terms)
