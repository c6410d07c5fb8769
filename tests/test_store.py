"""The store refuses what it cannot safely open, and says what a new world would orphan (issue 12)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from workbench import store
from workbench.cli import main
from workbench.kg.tinyworld import build_world


@pytest.fixture(scope="module")
def world_db(tmp_path_factory):
    db = tmp_path_factory.mktemp("store") / "w.duckdb"
    build_world(db, preset="smoke")
    return db


def copy(world_db, tmp_path) -> Path:
    db = tmp_path / "w.duckdb"
    shutil.copy(world_db, db)
    return db


@pytest.mark.parametrize("fraction", [0.002, 0.3, 0.5, 0.9, 0.999])
def test_a_truncated_store_is_refused_on_open(world_db, tmp_path, fraction, capsys):
    """Regression: a half-truncated store was accepted by writing commands, which then failed with
    checksum and short-read errors table by table."""
    db = copy(world_db, tmp_path)
    os.truncate(db, int(db.stat().st_size * fraction))
    damaged = db.read_bytes()
    with pytest.raises(ValueError, match=r"w\.duckdb: the store is damaged \(.*\); restore it from a copy"):
        store.connect(db)
    with pytest.raises(ValueError, match="the store is damaged"):
        store.connect(db, read_only=True)
    path = tmp_path / "nq.jsonl"
    path.write_text('{"question": "q", "answers": ["a"]}\n')
    assert main(["import", "qa", str(path), "--name", "nq", "--db", str(db)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "the store is damaged" in err
    assert db.read_bytes() == damaged  # not written to


def test_a_file_that_is_not_a_store_is_refused(tmp_path):
    db = tmp_path / "notes.duckdb"
    db.write_text("my notes " * 2000)
    with pytest.raises(ValueError, match="the store is damaged .*not a valid DuckDB database"):
        store.connect(db)
    assert db.read_text() == "my notes " * 2000


def test_a_corrupt_block_is_one_line_not_a_traceback(world_db, tmp_path, capsys):
    """A flipped byte inside a data block passes the open-time check; reading it fails with
    DuckDB's checksum error, which the CLI reports in one line."""
    db = copy(world_db, tmp_path)
    data = bytearray(db.read_bytes())
    for at in range(store.HEADER_BYTES + 4096, len(data), 4096):
        data[at] ^= 0xFF
    db.write_bytes(bytes(data))
    code = main(["search", "--db", str(db), "who"])
    err = capsys.readouterr().err
    assert code != 0 and err.count("\n") == 1 and "the store is damaged" in err, err


def test_a_directory_is_not_a_store(tmp_path):
    with pytest.raises(ValueError, match="is a directory; expected a DuckDB store file"):
        store.connect(tmp_path)


def read_only_dir(tmp_path) -> Path:
    """A folder this process cannot create files in (root ignores file modes: then a read-only
    system folder, or skip)."""
    for folder in (tmp_path / "ro", Path("/sys/fs"), Path("/proc/sys")):
        if folder.parent == tmp_path:
            folder.mkdir()
            folder.chmod(0o555)
        try:
            (folder / ".probe").touch()
        except OSError:
            return folder
        (folder / ".probe").unlink()
    pytest.skip("no read-only folder found (root in a container without one)")


def test_a_read_only_location_is_one_line(tmp_path, capsys):
    folder = read_only_dir(tmp_path)
    path = tmp_path / "nq.jsonl"
    path.write_text('{"question": "q", "answers": ["a"]}\n')
    assert main(["import", "qa", str(path), "--name", "nq", "--db", str(folder / "s.duckdb")]) in (1, 2)
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and ("Permission denied" in err or "Read-only" in err or "not permitted" in err), err
    assert main(["export-qa", str(folder / "t.parquet"), "--db", str(tmp_path / "none.duckdb")]) == 2
    capsys.readouterr()


def test_world_users_and_clear_world(tmp_path):
    con = store.connect(tmp_path / "s.duckdb")
    assert store.world_users(con) == []
    con.execute("INSERT INTO runs (run) VALUES ('a')")
    con.execute("INSERT INTO candidates (candidate_id, run) VALUES (0, 'b')")
    con.execute("INSERT INTO eval_outcomes (eval_id) VALUES ('e')")
    con.execute("INSERT INTO imports (import_id, kind, file) VALUES (0, 'kilt', '/x/kilt.jsonl')")
    assert store.world_users(con) == ["run(s) ['a', 'b']", "evaluation(s) ['e']", "import(s) ['kilt kilt.jsonl']"]
    con.execute("INSERT INTO batch_results (batch) VALUES ('mine')")
    store.clear_world(con)
    assert store.world_users(con) == []
    assert con.execute("SELECT count(*) FROM batch_results").fetchone() == (1,)  # not the world's


def test_a_store_a_notebook_kernel_holds_is_refused_naming_the_kernel_and_the_way_out(tmp_path, capsys):
    """Issue 43: with a notebook's kernel holding ``con`` open, a writing command says which process
    holds the store and how to release it; after ``con.close()`` in the kernel it runs."""
    import os

    from jupyter_client.manager import start_new_kernel

    from workbench.cli import main

    db = tmp_path / "s.duckdb"
    km, kc = start_new_kernel(kernel_name="python3")
    try:
        def run(code):
            reply = kc.execute_interactive(code, timeout=60)
            assert reply["content"]["status"] == "ok", reply["content"]

        run(f"import sys; sys.path.insert(0, {os.getcwd()!r}); from workbench import store; "
            f"con = store.connect({str(db)!r})")
        assert main(["world", "--preset", "smoke", "--db", str(db)]) == 2
        said = capsys.readouterr().err
        assert f"a Jupyter kernel (PID {km.provisioner.process.pid})" in said and "run con.close()" in said, said
        run("con.close()")
        assert main(["world", "--preset", "smoke", "--db", str(db)]) == 0
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
