"""The policy's weights averaged over a run's last rounds (``method.weight_average``; ours, not the paper).

After each of the last rounds' updates the running mean of the policy's weights takes in the new
weights: over every round this is Polyak-Ruppert averaging, over the tail of training it is what
Izmailov et al. (2018) call stochastic weight averaging. On the CPU tier a round's update learns from
a handful of groups whose rewards differ, so each step moves the weights by what the rewards teach
plus much noise; the mean keeps the first and averages away part of the second. The early rounds'
weights, which have learned least, are left out by averaging only the tail. ``train`` validates the
mean in each validated round of the tail (the metric ``val_em_average``: the model a test of the run
evaluates), writes it to ``runs/<run>/average`` and keeps it in each checkpoint, so a resumed run
averages exactly what an uninterrupted one does.

Example:
    >>> import torch
    >>> layer = torch.nn.Linear(2, 1, bias=False)
    >>> mean = WeightAverage()
    >>> for value in (1.0, 3.0):
    ...     _ = layer.weight.data.fill_(value)
    ...     mean.add(layer)
    >>> mean.count, mean.mean["weight"].tolist()
    (2, [[2.0, 2.0]])
    >>> with mean.swapped_into(layer):
    ...     layer.weight.tolist()
    [[2.0, 2.0]]
    >>> layer.weight.tolist()
    [[3.0, 3.0]]
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import torch

FILE = "average.safetensors"  # a checkpoint's copy of the mean


def first_averaged(share: float, steps: int) -> int:
    """The first round (0-based) whose weights enter the mean when the last ``share`` of a run's
    ``steps`` rounds are averaged: the last ``round(share * steps)`` rounds, at least one.

    Example:
        >>> first_averaged(0.5, 14), first_averaged(1.0, 14), first_averaged(0.01, 14)
        (7, 0, 13)
    """
    if not 0 < share <= 1:
        raise ValueError(f"method.weight_average: need a share of the rounds in (0, 1], got {share!r}")
    return steps - max(1, round(share * steps))


class WeightAverage:
    """The running mean of a model's floating-point weights (float32, on the CPU) over ``count`` adds."""

    def __init__(self, mean: dict | None = None, count: int = 0):
        self.mean = dict(mean or {})
        self.count = count

    @torch.no_grad()
    def add(self, model: torch.nn.Module) -> None:
        """Take the model's current weights into the mean."""
        self.count += 1
        for name, weight in model.state_dict().items():
            if not weight.is_floating_point():
                continue
            weight = weight.detach().to("cpu", torch.float32)
            if name in self.mean:
                self.mean[name] += (weight - self.mean[name]) / self.count
            else:
                self.mean[name] = weight.clone()

    @contextlib.contextmanager
    def swapped_into(self, model: torch.nn.Module):
        """Inside the block the model holds the mean; after it, its own weights again."""
        state = model.state_dict()
        own = {name: state[name].detach().clone() for name in self.mean}
        with torch.no_grad():
            for name, value in self.mean.items():
                state[name].copy_(value)
        try:
            yield model
        finally:
            with torch.no_grad():
                for name, value in own.items():
                    state[name].copy_(value)

    def save(self, checkpoint: Path) -> None:
        """Write the mean, with its count, into a checkpoint folder (an empty mean too: the rounds before
        the averaged tail checkpoint a count of 0)."""
        from safetensors.torch import save_file

        save_file({k: v.contiguous() for k, v in self.mean.items()}, str(Path(checkpoint) / FILE),
                  metadata={"count": str(self.count)})

    @classmethod
    def resume(cls, checkpoint: Path | None) -> WeightAverage:
        """The mean a checkpoint holds, or an empty one for a new run (``checkpoint`` None)."""
        from safetensors import safe_open

        if checkpoint is None:
            return cls()
        path = Path(checkpoint) / FILE
        if not path.exists():
            raise ValueError(f"--resume: {path} is missing, but the run averages its weights (method.weight_average); "
                             "the checkpoint is damaged: start the run anew with --overwrite")
        with safe_open(str(path), "pt") as f:
            return cls({k: f.get_tensor(k) for k in f.keys()}, int(f.metadata()["count"]))
