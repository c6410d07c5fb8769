"""Where the round's steps run: the rank strategy a trainer is given (``Trainer.ranks``).

One process (:class:`OneProcess`, the default) runs every step itself and exchanges nothing.
``method.distributed.Dist`` runs the same round on N ranks behind the same calls (rank 0 proposes,
gates and scores, since it holds the store; the rollouts and the update's rows are shared out), so
the trainer reads the same whatever runs it and never imports the distributed code: distributed
execution wraps the trainer.

Example:
    >>> r = OneProcess()
    >>> r.is_main, r.share(("tasks", "slots")), r.step_rows([3, 1, 2])
    (True, ('tasks', 'slots'), [3, 1, 2])
"""

from __future__ import annotations


class OneProcess:
    """The trainer in one process: every step runs here, nothing is exchanged."""

    is_main = True  # the process that holds the store: it proposes, gates and scores

    def share(self, obj):
        """The main process's ``obj`` on every rank: here, ``obj`` itself."""
        return obj

    def solve(self, trainer, t: int, slots: list) -> None:
        """Step 3 (Eq. 3): every slot's G rollouts, into ``slots``."""
        trainer.solve(t, slots)

    def hit_rate(self, search) -> float:
        """The round's search-cache hit rate over every rank's lookups."""
        return search.cache_stats()["hit_rate"]

    def spread(self, compute, rows: list) -> list:
        """``compute(rows)`` (old-policy log-probs), each rank computing its share."""
        return compute(rows)

    def step_rows(self, order: list[int]) -> list[int]:
        """This rank's rows of an optimiser step, from the length-sorted ``order``."""
        return order

    def all_reduce_step(self, params: list, sums: dict) -> dict:
        """The step's gradients and loss sums over every rank: here, as they are."""
        return sums
