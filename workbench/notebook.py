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

import dataclasses
import os
from pathlib import Path

from workbench import config, paths

# The run-setting parameters every notebook takes (tests/test_notebook_conventions.py checks), with
# the CLI's meaning: --preset, --model, --dataset, --set.
SETTING_PARAMETERS = ("preset", "model", "dataset", "overrides")

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


def warm_start(con, cfg, seed: int = 0, kg_tool: dict | None = None, extra_demos=None) -> Path:
    """The preset's warm start (``policy.warmstart.warmstart``), reused from the cache, or trained
    here with a text bar that moves through its stages (the first smoke run trains it).
    ``kg_tool``: the KG-tool warm start of DynaSearcher (``method.train.kg_warmstart``);
    ``extra_demos``: EoG's topology warm start (``peers.eog.warmstart.TopologyDemos``).

    Example:
        >>> # base = warm_start(con, config.preset("smoke"))
    """
    from workbench.method.progress import WarmStartProgress
    from workbench.policy.warmstart import warmstart

    return warmstart(con, preset=cfg, seed=seed, log=WarmStartProgress(cfg.backbone.sft_steps), kg_tool=kg_tool,
                     extra_demos=extra_demos)


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


@dataclasses.dataclass(frozen=True)
class Setting:
    """A notebook's run setting, from its ``preset``, ``model``, ``dataset`` and ``overrides``
    parameters (see ``setting``): every train, evaluation and base model of the notebook goes
    through it, so the four mean the same in every notebook and on the command line.

    Example:
        >>> s = Setting("smoke", config.preset("smoke"), model="", dataset="tinyworld", overrides={})
        >>> s.cfg.name, s.eval_set()
        ('smoke', 'tinyworld')
    """

    preset: str
    cfg: config.Config
    model: str  # the base every run starts from; "" is the preset's (tiny warm start or backbone.model)
    dataset: str  # the QA set evaluated (split 'test'); "" when the preset names none
    overrides: dict

    def base(self, con, seed: int = 0, kg_tool: dict | None = None, extra_demos=None):
        """The base model: the ``model`` parameter, else the preset's warm start (tiny backbones,
        ``warm_start``; with ``kg_tool``, DynaSearcher's KG warm start, ``method.train.kg_warmstart``;
        with ``extra_demos``, EoG's topology warm start, ``peers.eog.warmstart.topology_demos``)
        or its ``backbone.model`` (``paths.local_model``), as ``workbench train``."""
        if self.model:
            return self.model
        if self.cfg.backbone.model == "tiny":
            return warm_start(con, self.cfg, seed=seed, kg_tool=kg_tool, extra_demos=extra_demos)
        return paths.local_model(self.cfg.backbone.model)

    def train(self, con, run: str, method: str, overrides: dict | None = None, **kwargs) -> list[dict]:
        """``method.train.train`` at this preset, from ``model`` when given, with ``overrides``
        (the notebook's own, e.g. a CPU-sized batch, win over the parameter's)."""
        from workbench.method.train import train

        return train(con, run=run, method=method, preset=self.preset, model=self.model or None,
                     overrides={**self.overrides, **(overrides or {})}, **kwargs)

    def search(self, con):
        """The solver's search at this setting: ``search.url``'s server when set, else the store
        (``search.retriever.make_retriever``), as train and eval search."""
        from workbench.search.retriever import make_retriever

        return make_retriever(con, self.cfg.search)

    def eval_set(self) -> str:
        """The ``dataset`` parameter, or ValueError when it is empty and the preset names none."""
        if not self.dataset:
            raise ValueError(f"dataset: preset {self.preset!r} has no default test set; pass one of the "
                             "imported QA sets, e.g. dataset='nq' (workbench import qa ... --name nq --split test)")
        return self.dataset

    def evaluate(self, con, model_path, split: str = "test", limit: int | None = None, **kwargs) -> str:
        """``evaluate.evaluate`` of ``model_path`` on ``dataset`` at this preset and overrides."""
        from workbench.evaluate import evaluate

        kwargs.setdefault("dataset", self.eval_set())
        return evaluate(con, model_path, split=split, limit=limit, preset=self.preset,
                        overrides=self.overrides, **kwargs)


def setting(preset: str, model: str = "", dataset: str = "", overrides: dict | None = None) -> Setting:
    """A notebook's ``Setting`` after ``start(preset)``: ``overrides`` (``{"section.field": value}``,
    like ``--set``) applied to the preset and validated; ``dataset`` empty means ``tinyworld`` for
    presets that train on TinyWorld's seed pool, else none (``Setting.eval_set`` then asks for one).

    Example:
        >>> s = setting("smoke", overrides={"method.lr": "1e-4"})  # doctest: +ELLIPSIS
        SMOKE SIZE: ...
        >>> s.cfg.method.lr, s.dataset
        (0.0001, 'tinyworld')
        >>> setting("smoke", overrides=["method.lr=1e-4"])  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ValueError: overrides: expected a dict of 'section.field' -> value, got ['method.lr=1e-4']
    """
    if not isinstance(overrides, (dict, type(None))) or not all(isinstance(k, str) for k in (overrides or {})):
        raise ValueError(f"overrides: expected a dict of 'section.field' -> value, got {overrides!r}")
    for name, value in (("model", model), ("dataset", dataset)):
        if not isinstance(value, str):
            raise ValueError(f"{name}: expected a string ('' for the preset's), got {value!r}")
    preset = start(preset)
    overrides = dict(overrides or {})
    cfg = config.preset(preset, **overrides)
    dataset = dataset or ("tinyworld" if cfg.method.seed_dataset == "tinyworld" else "")
    return Setting(preset, cfg, model=model, dataset=dataset, overrides=overrides)


def model_card(model) -> dict:
    """The ``workbench.json`` a workbench-made model folder carries (a warm start's SFT record, a
    run's labels), or ``{}`` for a model of the user's (a hub id, a downloaded folder).

    Example:
        >>> model_card("Qwen/Qwen2.5-3B-Instruct")
        {}
    """
    import json

    card = Path(model) / "workbench.json"
    return json.loads(card.read_text()) if card.is_file() else {}
