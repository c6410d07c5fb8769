"""Where data, runs and figures live.

Defaults are folders of the project checkout (the folder holding ``pyproject.toml`` above this
package), or of the current directory when the package is installed elsewhere. Each can be moved
with an environment variable: ``WORKBENCH_DATA``, ``WORKBENCH_RUNS``, ``WORKBENCH_FIGURES``.
No other module builds paths from scratch.

Example:
    >>> from workbench import paths
    >>> paths.default_db("smoke").name
    'smoke.duckdb'
"""

from __future__ import annotations

import os
from pathlib import Path


def project_root() -> Path:
    """The checkout holding this package, else the current directory."""
    here = Path(__file__).resolve().parent.parent
    return here if (here / "pyproject.toml").exists() else Path.cwd()


def _dir(env: str, default: str) -> Path:
    path = Path(os.environ.get(env) or project_root() / default)
    path.mkdir(parents=True, exist_ok=True)
    return path


def data_dir() -> Path:
    return _dir("WORKBENCH_DATA", "data")


def runs_dir() -> Path:
    return _dir("WORKBENCH_RUNS", "runs")


def figures_dir() -> Path:
    return _dir("WORKBENCH_FIGURES", "figures")


def cache_dir() -> Path:
    """Content-addressed caches (indexes, warm starts) that can always be rebuilt."""
    path = data_dir() / "cache"
    path.mkdir(parents=True, exist_ok=True)
    return path


def default_db(preset: str = "tiny") -> Path:
    """The store a preset uses unless ``--db`` says otherwise."""
    return data_dir() / f"{preset}.duckdb"


def notebooks_dir() -> Path:
    return project_root() / "notebooks"


def local_model(name: str) -> str:
    """Where a model named in a config is loaded from: ``name`` itself when that path exists, else
    ``data/models/<last part of name>`` when the user downloaded it there (the README's layout), else
    ``name`` unchanged (a hub id, loaded from the Hugging Face cache; offline runs need it there).

    Example:
        >>> local_model("/tmp"), local_model("no-such-org/no-such-model-xyz")
        ('/tmp', 'no-such-org/no-such-model-xyz')
    """
    if Path(name).exists():
        return str(name)
    here = data_dir() / "models" / Path(str(name)).name
    return str(here) if here.is_dir() else str(name)
