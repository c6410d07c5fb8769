"""Test-wide settings: offline, smoke-size notebooks, and a throwaway data/runs/figures area so
the suite never touches a user's stores. Set before any test or notebook kernel starts."""

import logging
import os
import tempfile

import pytest

_area = tempfile.mkdtemp(prefix="workbench-tests-")
for _name in ("DATA", "RUNS", "FIGURES"):
    os.environ.setdefault(f"WORKBENCH_{_name}", os.path.join(_area, _name.lower()))
os.environ.setdefault("WORKBENCH_SMOKE", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# pytest-xdist runs two workers on two cores: one BLAS/torch thread each, or they spin against each
# other (measured up to 10x slower on a shared machine, LOG.md).
os.environ.setdefault("OMP_NUM_THREADS", "1")


@pytest.fixture(autouse=True)
def _workbench_logging():
    """Each test (doctests too) leaves the ``workbench`` logger as it found it: a command run
    in-process (``main(["bench", ...])``) turns its stderr output on for the rest of the process."""
    log = logging.getLogger("workbench")
    state = log.handlers[:], log.level, log.propagate
    yield
    log.handlers[:], log.level, log.propagate = state
