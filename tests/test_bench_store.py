"""The benchmarks' store (``bench.store``): the preset's world built in memory by default,
``--db`` read-only (or an in-memory copy for ``bench loop``), never created or written."""

import hashlib
import json

import pytest

from workbench import paths, store
from workbench.cli import main
from workbench.bench.store import bench_store, memory_copy
from workbench.kg.tinyworld import build_world


def _digest(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    db = tmp_path_factory.mktemp("bench") / "w.duckdb"
    con = store.connect(db)
    build_world(con, preset="smoke")
    con.close()
    return db


def test_kgsearch_without_db_builds_in_memory_and_leaves_the_presets_store_alone(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("WORKBENCH_DATA", str(tmp_path / "data"))
    assert main(["bench", "kgsearch", "--preset", "smoke", "--batch", "8"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["db"] == ":memory: (TinyWorld, preset smoke, seed 0)" and out["built_world"]
    assert not paths.default_db("smoke").exists()


def test_kgsearch_with_db_reads_it_and_writes_nothing(world, capsys):
    before = _digest(world)
    assert main(["bench", "kgsearch", "--preset", "smoke", "--batch", "8", "--db", str(world)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["db"] == str(world) and not out["built_world"] and out["linked"] > 0
    assert _digest(world) == before


def test_a_missing_or_empty_store_is_refused_not_created(tmp_path):
    with pytest.raises(FileNotFoundError, match="--db: no store"):
        bench_store(tmp_path / "none.duckdb", "smoke")
    assert not (tmp_path / "none.duckdb").exists()
    store.connect(tmp_path / "empty.duckdb").close()
    with pytest.raises(ValueError, match="holds no passages"):
        bench_store(tmp_path / "empty.duckdb", "smoke")


def test_the_in_memory_copy_has_the_store_and_keeps_writes_to_itself(world):
    before = _digest(world)
    con, where = bench_store(world, "smoke", copy=True)
    original = store.connect(world, read_only=True)
    for table in ("entities", "edges", "passages", "questions"):
        query = f"SELECT * FROM {table} ORDER BY ALL"
        assert con.execute(query).fetchall() == original.execute(query).fetchall()
    original.close()
    con.execute("DELETE FROM passages")
    con.close()
    assert where.endswith("(an in-memory copy)") and _digest(world) == before
    copy = memory_copy(world)
    assert copy.execute("SELECT count(*) FROM passages").fetchone()[0] > 0
    copy.close()


def test_drfree_refuses_a_store_without_its_pool_rather_than_building_one(world):
    from workbench.bench.drfree import bench_drfree

    before = _digest(world)
    with pytest.raises(ValueError, match="no G_0 pool"):
        bench_drfree(str(world), preset="smoke", candidates=2)
    assert _digest(world) == before
