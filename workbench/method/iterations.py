"""Self-evolution iterations (seed 002, Table 9: Iter 1-3; Table 6: 50 steps each): a run's rounds
split into ``method.iterations`` blocks (:func:`iteration_ends`); at each block's end the run's best
checkpoint so far is kept as ``runs/RUN/iterations/iter-K`` (:func:`save_iteration`), so Table 9's
rows are evaluations of those folders, the last equal to ``best``. A method's iterations are its
``MethodSpec.iterations`` (the Dr. Free rows: 3) unless ``method.iterations`` sets them; a run
extension may act when one ends (Dr. Free's updated anchor, ``loop.RUN_EXTENSIONS``).

Example:
    >>> iteration_ends(20, 3), iteration_of(6, [7, 14, 20]), iteration_of(7, [7, 14, 20])
    ([7, 14, 20], 1, 2)
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np


def iteration_ends(steps: int, iterations: int) -> list[int]:
    """The round count at which each iteration ends: ``steps`` rounds in ``iterations`` nearly equal
    blocks, the longer ones first.

    Example:
        >>> iteration_ends(7, 1), iteration_ends(10, 4)
        ([7], [3, 6, 8, 10])
    """
    if iterations < 1 or iterations > steps:
        raise ValueError(f"method.iterations={iterations}: expected 1 to method.steps={steps} iterations")
    sizes = [len(b) for b in np.array_split(np.arange(steps), iterations)]
    return [int(x) for x in np.cumsum(sizes)]


def iteration_of(t: int, ends: list[int]) -> int:
    """The iteration (1-based) round ``t`` belongs to."""
    return next(k for k, end in enumerate(ends, 1) if t < end) if t < ends[-1] else len(ends)


def iteration_dir(folder: Path, k: int) -> Path:
    """``runs/RUN/iterations/iter-K``: the run's best checkpoint as of iteration K's end."""
    return Path(folder) / "iterations" / f"iter-{k}"


def save_iteration(folder: Path, k: int) -> Path:
    """Keep the run's best checkpoint (``folder/best``) as iteration ``k``'s (hard links where the
    file system allows: ``best`` is replaced by a rename, never written in place), replacing an
    earlier copy of it (a resumed round). Returns the folder."""
    best, dest = Path(folder) / "best", iteration_dir(folder, k)
    if not best.exists():
        raise FileNotFoundError(f"{best}: no best checkpoint to keep as iteration {k}")
    tmp = dest.with_name(f".{dest.name}-tmp")
    for stale in (tmp, dest):
        if stale.exists():
            shutil.rmtree(stale)

    def link(src, dst):
        try:
            os.link(src, dst)
        except OSError:
            shutil.copy2(src, dst)

    shutil.copytree(best, tmp, copy_function=link)
    tmp.rename(dest)
    return dest
