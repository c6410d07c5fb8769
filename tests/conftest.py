"""Fixtures shared by several test modules (a module's own fixture of the same name wins)."""

import pytest

from workbench import store


@pytest.fixture
def con(tmp_path):
    """An empty store in a file under the test's tmp_path."""
    c = store.connect(tmp_path / "store.duckdb")
    yield c
    c.close()
