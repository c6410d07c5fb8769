"""Small helpers the notebooks share (NOTEBOOKS.md: notebooks stay thin).

``WORKBENCH_SMOKE=1`` (set by the test suite) turns every notebook into its smoke size, so the
same notebooks that users run are the ones ``make test`` executes under nbval. ``start`` is each
notebook's first call: the preset it runs at, set up for a reader (a plain note at smoke size, no
weight-loading bars).

Example:
    >>> import os
    >>> os.environ.pop("WORKBENCH_SMOKE", None) and None
    >>> effective_preset("tiny")
    'tiny'
"""

from __future__ import annotations

import os
from pathlib import Path

from workbench import paths

SMOKE_NOTE = (
    "SMOKE SIZE: this run checks the plumbing -- that every step runs end to end on a 200-entity world "
    "with a 190k-parameter model trained for about a minute. That model is too small to learn the task: "
    "its accuracies, rewards and gains are expected to be 0 (or near it) and its trajectories garbled "
    "(repeated <search> tags, 'My previous action is invalid'). For numbers that mean something, run "
    "the notebook at preset \"tiny\" (the default).")


def effective_preset(preset: str) -> str:
    """The preset a notebook runs at: ``smoke`` under the tests, else the parameter."""
    return "smoke" if os.environ.get("WORKBENCH_SMOKE") == "1" else preset


def start(preset: str) -> str:
    """A notebook's first call: the preset it runs at (``effective_preset``); at smoke size it
    first prints ``SMOKE_NOTE``, so its zeros read as expected. Also silences transformers'
    per-file weight bars, which a saved notebook keeps at 0%.

    Example:
        >>> start("smoke")  # doctest: +ELLIPSIS
        SMOKE SIZE: this run checks the plumbing ...
        'smoke'
    """
    preset = effective_preset(preset)
    if preset == "smoke":
        print(SMOKE_NOTE)
    return preset


def store_path(db: str, preset: str) -> str:
    """The ``db`` parameter, or the preset's default store under ``data/``."""
    return db or str(paths.default_db(preset))


def warm_start(con, cfg, seed: int = 0, kg_tool: dict | None = None) -> Path:
    """The preset's warm start (``policy.warmstart.warmstart``), reused from the cache, or trained
    here with a text bar that moves through its stages (the first smoke run trains it).
    ``kg_tool``: the KG-tool warm start of DynaSearcher (``method.train.kg_warmstart``).

    Example:
        >>> # base = warm_start(con, config.preset("smoke"))
    """
    from workbench.method.progress import WarmStartProgress
    from workbench.policy.warmstart import warmstart

    return warmstart(con, preset=cfg, seed=seed, log=WarmStartProgress(cfg.backbone.sft_steps), kg_tool=kg_tool)


def as_table(mapping: dict, value: str = "value"):
    """A flat summary dict as a two-column table a reader scans (nested dicts become ``outer.inner``
    rows), in place of a printed dict.

    Example:
        >>> as_table({"chains": 752, "rejections": {"cycle": 3}})["value"].to_dict()
        {'chains': 752, 'rejections.cycle': 3}
    """
    import pandas as pd

    rows = []
    for key, v in mapping.items():
        if isinstance(v, dict):
            rows += [(f"{key}.{k}", x) for k, x in v.items()]
        else:
            rows.append((key, v))
    return pd.DataFrame({value: [v for _, v in rows]}, index=pd.Index([k for k, _ in rows]), dtype=object)
