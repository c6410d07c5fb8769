"""Pairs of named entities for comparison questions (tw-hotpot, tw-2wiki): which of two reaches the
earlier year along a relation path (a choice between the two names), or whether both reach the
same entity (yes / no).

Example:
    >>> from workbench.kg.tinyworld import generate_world
    >>> from workbench.kg.benchmarks.view import WorldView
    >>> view = WorldView.from_world(generate_world(300, 0))
    >>> pairs = choice_pairs(view, "film", ["released in year"], 5, np.random.default_rng(0))
    >>> winner, spec = choice(view, *map(int, pairs[0]), ["released in year"], earlier=True)
    >>> winner in spec["subjects"]
    True
"""

from __future__ import annotations

import numpy as np

from workbench.kg.benchmarks.view import WorldView, path_facts


def ends(view: WorldView, subjects: np.ndarray, path) -> np.ndarray:
    """Where each subject's chain along ``path`` ends (-1 where a hop is missing)."""
    cur = np.asarray(subjects, dtype=np.int64)
    for r in path:
        if r not in view.obj:
            return np.full(len(cur), -1)
        cur = np.where(cur >= 0, view.obj[r][np.maximum(cur, 0)], -1)
    return cur


def _candidates(view: WorldView, subject_type: str, path) -> np.ndarray:
    ids = view.ids(subject_type)
    return ids[ends(view, ids, path) >= 0]


def _distinct_bridges(view: WorldView, a, b, path) -> np.ndarray:
    """For two-hop paths, the two subjects' bridges differ (else the comparison compares one thing)."""
    if len(path) < 2:
        return np.ones(len(a), dtype=bool)
    return ends(view, a, path[:1]) != ends(view, b, path[:1])


def choice_pairs(view: WorldView, subject_type: str, path, m: int, rng) -> np.ndarray:
    """Up to ``m`` distinct random pairs (a < b) of ``subject_type`` whose years along ``path``
    differ (and whose bridges differ, for a two-hop path)."""
    ids = _candidates(view, subject_type, path)
    if len(ids) < 2:
        return np.empty((0, 2), dtype=np.int64)
    a, b = ids[rng.integers(0, len(ids), 4 * m)], ids[rng.integers(0, len(ids), 4 * m)]
    ya, yb = (view.title[ends(view, x, path)] for x in (a, b))
    ok = (a < b) & (ya != yb) & _distinct_bridges(view, a, b, path)
    pairs = np.unique(np.stack([a[ok], b[ok]], axis=1), axis=0)
    return pairs[rng.permutation(len(pairs))][:m]


def same_pairs(view: WorldView, subject_type: str, path, same: bool, m: int, rng) -> np.ndarray:
    """Up to ``m`` distinct random pairs (a < b) of ``subject_type`` that reach the same entity along
    ``path`` (``same``) or different ones, their bridges differing for a two-hop path."""
    ids = _candidates(view, subject_type, path)
    if len(ids) < 2:
        return np.empty((0, 2), dtype=np.int64)
    end = ends(view, ids, path)
    if same:  # pair subjects within each end entity's group
        order = np.argsort(end, kind="stable")
        groups = np.split(ids[order], np.flatnonzero(np.diff(end[order])) + 1)
        groups = [g for g in groups if len(g) >= 2]
        if not groups:
            return np.empty((0, 2), dtype=np.int64)
        pick = rng.integers(0, len(groups), 4 * m)
        a = np.array([g[rng.integers(len(g))] for g in (groups[i] for i in pick)])
        b = np.array([g[rng.integers(len(g))] for g in (groups[i] for i in pick)])
        a, b = np.minimum(a, b), np.maximum(a, b)
    else:
        a, b = ids[rng.integers(0, len(ids), 4 * m)], ids[rng.integers(0, len(ids), 4 * m)]
    ok = (a < b) & ((ends(view, a, path) == ends(view, b, path)) == same) & _distinct_bridges(view, a, b, path)
    pairs = np.unique(np.stack([a[ok], b[ok]], axis=1), axis=0)
    return pairs[rng.permutation(len(pairs))][:m]


def choice(view: WorldView, a: int, b: int, path, earlier: bool) -> tuple[int, dict]:
    """The one of ``a``, ``b`` whose year along ``path`` is earlier (``earlier``) or later, and the spec."""
    ya, yb = (int(view.title[ends(view, [e], path)[0]]) for e in (a, b))
    winner = a if (ya < yb) == earlier else b
    return winner, {"kind": "choice", "subjects": [a, b], "relations": list(path), "earlier": earlier}


def pair_chain(view: WorldView, a: int, b: int, path) -> tuple[list[int], frozenset]:
    """The entities a comparison walks (each subject, then its bridge for a two-hop path) and the
    facts it uses (every hop of both subjects' paths)."""
    ca, cb = view.follow(a, path), view.follow(b, path)
    return ca[:-1] + cb[:-1], path_facts(ca) | path_facts(cb)
