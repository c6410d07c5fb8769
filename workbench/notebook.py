"""Small helpers the notebooks share (NOTEBOOKS.md: notebooks stay thin).

``WORKBENCH_SMOKE=1`` (set by the test suite) turns every notebook into its smoke size, so the
same notebooks that users run are the ones ``make test`` executes under nbval.

Example:
    >>> import os
    >>> os.environ.pop("WORKBENCH_SMOKE", None) and None
    >>> effective_preset("tiny")
    'tiny'
"""

from __future__ import annotations

import os

from workbench import paths


def effective_preset(preset: str) -> str:
    """The preset a notebook runs at: ``smoke`` under the tests, else the parameter."""
    return "smoke" if os.environ.get("WORKBENCH_SMOKE") == "1" else preset


def store_path(db: str, preset: str) -> str:
    """The ``db`` parameter, or the preset's default store under ``data/``."""
    return db or str(paths.default_db(preset))
