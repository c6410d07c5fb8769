"""One solver trajectory scored as the round scores it (seed 000, section 3.3): R_ans by exact
match, Eq. 8's path over the entities its search grounded (:func:`answer_candidates`), Eq. 9's
S_path against G_t, and the solver reward (Eq. 7, or the method's ``rewards.SOLVER_REWARDS`` entry).

Example:
    >>> from workbench.method.path_support import PathSupportParams
    >>> t = Trajectory(0, 0, "p", [], queries=["Ann"], entity_ids=[1], answer="Rome")
    >>> score_trajectory(t, ["Rome"], {1: "Ann", 2: "Rome"}, EvidenceGraph({(1, 2): 1.0}, PathSupportParams())).reward
    1.2
"""

from __future__ import annotations

from workbench.method import rewards as R
from workbench.method.path_support import EvidenceGraph, extract_path, grounded
from workbench.method.round import Slot, TrajectoryScore
from workbench.policy.rollout import Trajectory
from workbench.scoring import answer_list, exact_match


def score_trajectory(traj: Trajectory, golds: list[str], titles: dict[int, str], graph: EvidenceGraph,
                     reward_fn=R.coevokg_solver, beta: float = R.BETA_PATH, slot: Slot | None = None,
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
