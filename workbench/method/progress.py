"""What a person watching a run sees: text progress bars and the run's progress file.

Three things, all light (no torch at import, so ``workbench runs show`` stays fast):

* ``round_bar``: a text bar over a run's rounds with the reward, validation EM and pool size. Text,
  not a widget: papermill and nbconvert keep a widget bar's first state (``0/6``) for good, while a
  text bar moves in a terminal, in papermill's log and in JupyterLab alike.
* ``WarmStartProgress``: a ``log`` for ``policy.warmstart.warmstart`` that turns the lines it logs
  into a moving text bar (demonstrations, SFT steps, validation), so a first run that trains its
  warm start does not sit silent (``Policy.load``/``save`` silence transformers' per-file weight
  bars, ``policy.model.quiet_weight_bars``).
* ``write_progress`` / ``read_progress``: ``runs/<run>/progress.json``, rewritten after each round,
  so a run's progress can be read while its training process holds the store's write lock
  (DuckDB lets no other process open a store that one process writes).

Example:
    >>> import tempfile
    >>> from pathlib import Path
    >>> folder = Path(tempfile.mkdtemp())
    >>> write_progress(folder, {"run": "demo", "method": "coevokg", "preset": "smoke", "status": "running",
    ...                         "completed": 0, "steps": 2, "rounds": []})
    >>> read_progress(folder)["status"]
    'running'
"""

from __future__ import annotations

import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path

PROGRESS_FILE = "progress.json"
def text_bar(total: int, desc: str, initial: int = 0, unit: str = "it", enabled: bool = True, **kwargs):
    """A tqdm text bar on stdout that redraws on every update.

    stdout, not stderr: a notebook shows stderr on a red background.

    Example:
        >>> bar = text_bar(3, "demo", enabled=False)
        >>> bar.update(1); bar.close()
    """
    from tqdm.std import tqdm

    return tqdm(total=total, initial=initial, desc=desc, unit=unit, file=sys.stdout, mininterval=0,
                disable=not enabled, **kwargs)


def round_bar(run: str, method: str, done: int, steps: int, enabled: bool = True):
    """The text bar over a run's rounds; ``round_postfix`` fills in what each round did.

    Example:
        >>> round_bar("demo", "coevokg", 0, 6, enabled=False).total
        6
    """
    return text_bar(steps, f"{run} ({method})", initial=done, unit="round", enabled=enabled)


def round_postfix(metrics: dict, best_val: float) -> dict:
    """What the round bar shows after a round: its solver reward, validation EM (and the best so
    far) and the pool size G_t+1.

    Example:
        >>> round_postfix({"round": 2, "solver_reward": 0.25, "val_em": 0.5, "pool_chains": 752}, 0.5)
        {'round': 2, 'reward': '0.25', 'val EM': '0.500', 'best': '0.500', 'pool': 752}
    """
    val = "-" if metrics["val_em"] is None else f"{metrics['val_em']:.3f}"  # not validated (method.val_every)
    return {"round": metrics["round"], "reward": f"{metrics['solver_reward']:.2f}",
            "val EM": val, "best": f"{best_val:.3f}", "pool": metrics["pool_chains"]}


class WarmStartProgress:
    """A ``log`` for ``warmstart(..., log=...)``: its lines become a text bar that moves through the
    warm start's stages (demonstrations and tokenizer, each logged SFT step, validation and saving).

    Lines that are not about training (the cache was reused) pass straight to ``log``. The bar
    follows the lines the warm start logs, so it advances where they do (SFT logs every 50 steps).

    Example:
        >>> lines = []
        >>> p = WarmStartProgress(60, log=lines.append, enabled=False)
        >>> p("warm start abc: 430 demonstrations from 3 throwaway worlds (0 s), 188,992 parameters")
        >>> p("  sft step 50/60 loss 5.769 (2 s)")
        >>> p.done, p.stage
        (51, 'SFT')
        >>> p("warm start abc: loss 6.780 -> 4.916, 7 s"); p.done == p.total, len(lines)
        (True, 2)
    """

    _STEP = re.compile(r"sft step (\d+)/(\d+)")

    def __init__(self, sft_steps: int, log=print, enabled: bool = True):
        self.total, self.log, self.enabled = sft_steps + 2, log or (lambda *_: None), enabled
        self.bar, self.done, self.stage = None, 0, ""

    def _advance(self, done: int, stage: str) -> None:
        """Move the bar to ``done`` of ``total`` in ``stage``: one redraw (one line in papermill's log)."""
        self.bar.set_description_str(f"warm start: {stage}", refresh=False)
        if done > self.done:
            self.bar.update(done - self.done)
        else:
            self.bar.refresh()
        self.done, self.stage = done, stage

    def __call__(self, line: str) -> None:
        step = self._STEP.search(line)
        if "demonstrations from" in line and self.bar is None:
            self.log(line + "  (trained here once, then cached)")
            # 1 of total: the demonstrations, tokenizer and model are made; SFT starts
            self.done, self.stage = 1, "SFT"
            self.bar = text_bar(self.total, "warm start: SFT", initial=1, unit="step", enabled=self.enabled,
                                bar_format="{desc}: {percentage:3.0f}%|{bar}| {elapsed}")
        elif step and self.bar is not None:
            done, steps = int(step.group(1)), int(step.group(2))
            self._advance(1 + done, "validating" if done >= steps else "SFT")
        elif self.bar is not None and "loss" in line and "->" in line:
            self._advance(self.total, "done")
            self.bar.close()
            self.log(line)
        else:
            self.log(line)


def write_progress(folder: Path, record: dict) -> None:
    """Replace ``folder/progress.json`` with ``record`` (plus ``updated_at``), atomically: a reader
    sees the previous file or the new one, never half of one."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".progress-", dir=folder)
    with os.fdopen(fd, "w") as f:
        json.dump({**record, "updated_at": time.strftime("%Y-%m-%d %H:%M:%S")}, f, indent=1)
    os.replace(tmp, folder / PROGRESS_FILE)


PROGRESS_KEYS = ("run", "method", "preset", "status", "completed", "steps", "rounds", "updated_at")


def read_progress(folder: Path) -> dict | None:
    """The run's ``progress.json`` as written by ``write_progress``, or None when there is none;
    ValueError naming the file when it is not one (damaged, or edited by hand).

    Example:
        >>> import tempfile
        >>> folder = Path(tempfile.mkdtemp()); _ = (folder / PROGRESS_FILE).write_text('{"run": "a"}')
        >>> read_progress(folder)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ValueError: .../progress.json: not a progress file of the workbench's (missing method, ...
    """
    path = Path(folder) / PROGRESS_FILE
    if not path.exists():
        return None
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise ValueError(f"{path}: unreadable ({err}); it is rewritten after the run's next round") from None
    missing = [k for k in PROGRESS_KEYS if not isinstance(record, dict) or k not in record]
    if missing:
        raise ValueError(f"{path}: not a progress file of the workbench's (missing {', '.join(missing)}); "
                         "it is rewritten after the run's next round")
    return record
