"""Issue 39's fault-injection suite: every command that writes, run against a damaged store, a full
disk (a small tmpfs), a read-only folder and, for those that read a store, its own input. Each
must end in one line that names what went wrong (no traceback), and leave the store byte for byte
(or row for row, where DuckDB rewrote its file) as it was and no half-written output behind.

The importers' cases are in test_sources.py / test_importer_props.py, the retrieval server's in
test_retrieval_server*.py, kill -9 at every point of a command in test_faults.py. The whole
matrix is slow (a subprocess a case); one case per fault runs in ``make test``.
"""

import contextlib
import hashlib
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from workbench import store
from workbench.config import preset
from workbench.method.train import ensure_world

ROOT = Path(__file__).resolve().parent.parent

# command -> argv, given the store DB and an output path OUT (a file or a folder). Each writes.
WRITERS = {
    "world": lambda db, out: ["world", "--preset", "smoke", "--seed", "3", "--db", db],
    "pool build": lambda db, out: ["pool", "build", "--preset", "smoke", "--walks", "300", "--seed", "2", "--db", db,
                                   "--force"],
    "pool export": lambda db, out: ["pool", "export", "--db", db, out],
    "export-qa": lambda db, out: ["export-qa", "--db", db, out],
    "kilt-replica": lambda db, out: ["kilt-replica", out, "--pages", "400", "--no-progress"],
    "train": lambda db, out: ["train", "--preset", "smoke", "--db", db, "--run", "t", "--steps", "1",
                              "--set", "method.val_questions=1"],
    "figures": lambda db, out: ["figures", "--db", db, "--out", out],
}
READS_A_STORE = [c for c in WRITERS if c != "kilt-replica"]
WRITES_THE_STORE = ["world", "pool build", "train"]
FAST = {"damaged": "pool export", "full": "export-qa", "readonly": "pool export", "own_input": "export-qa"}


def _cases(fault, commands):
    return [pytest.param(c, marks=() if FAST[fault] == c else pytest.mark.slow) for c in commands]


def workbench(*argv, env=None):
    env = {**os.environ, **(env or {}),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    return subprocess.run([sys.executable, "-m", "workbench.cli", *map(str, argv)], env=env, capture_output=True,
                          text=True, timeout=900)


def one_line(result) -> str:
    assert result.returncode in (1, 2), (result.returncode, result.stderr[-3000:])
    lines = [line for line in result.stderr.splitlines() if line.startswith("workbench ")]
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr[-3000:]
    return lines[0]


def digest(path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def rows(db) -> dict:
    """Every table's row count and an order-free hash of its rows (creation times left out)."""
    con = store.connect(db, read_only=True)
    try:
        out = {}
        for (table,) in con.execute("SHOW TABLES").fetchall():
            columns = [c for (c,) in con.execute(f"SELECT column_name FROM (DESCRIBE {table})").fetchall()]
            select = f"(SELECT {', '.join(c for c in columns if c != 'created_at')} FROM {table})"
            out[table] = con.execute(f"SELECT count(*), sum(hash(t)) FROM {select} t").fetchall()[0]
        return out
    finally:
        con.close()


@contextlib.contextmanager
def tmpfs(size: str, read_only: bool = False):
    """A fresh tmpfs of ``size`` (a disk that fills) or a read-only one; skips where mounting is not
    allowed (it needs root in a machine that permits mounts: this one and CI's)."""
    where = Path(f"/tmp/workbench-tmpfs-{uuid.uuid4().hex[:8]}")
    where.mkdir()
    options = f"size={size}" + (",ro" if read_only else "")
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(where)], capture_output=True)
    if mounted.returncode != 0:
        where.rmdir()
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", str(where)], check=False)
        where.rmdir()


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    """A smoke store with its world and G_0, and the smoke warm start in the session's cache."""
    db = tmp_path_factory.mktemp("suite") / "s.duckdb"
    con = store.connect(db)
    ensure_world(con, preset("smoke"))
    con.close()
    return db


def _store_copy(base, folder: Path) -> Path:
    db = folder / "s.duckdb"
    shutil.copy(base, db)
    return db


@pytest.mark.parametrize("command", _cases("damaged", READS_A_STORE))
def test_a_damaged_store_is_one_line_and_is_left_as_it_is(base, tmp_path, command):
    db = _store_copy(base, tmp_path)
    os.truncate(db, db.stat().st_size // 2)
    before = digest(db)
    line = one_line(workbench(*WRITERS[command](db, tmp_path / "out")))
    assert "damaged" in line and str(db.name) in line, line
    assert digest(db) == before
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("command", _cases("full", list(WRITERS)))
def test_a_disk_that_fills_is_one_line_and_loses_nothing(base, tmp_path, command):
    """The output (or, for a command that writes the store, the store itself) on a tmpfs with
    little room to spare: the command fails, says so, and what was there before is intact."""
    if command == "train":  # the runs folder fills: round 0 is committed whole, its checkpoint cannot be
        db = _store_copy(base, tmp_path)
        with tmpfs("256k") as disk:
            line = one_line(workbench(*WRITERS[command](db, disk / "out"), env={"WORKBENCH_RUNS": str(disk)}))
            assert not list(disk.glob("t/checkpoints/*")), "a half-written checkpoint was left"
        con = store.connect(db, read_only=True)
        assert con.execute("SELECT list(DISTINCT round) FROM trajectories WHERE run = 't'").fetchone()[0] in (None, [0])
        con.close()
    elif command in WRITES_THE_STORE:
        with tmpfs(f"{base.stat().st_size // 1024 + 96}k") as disk:
            db = _store_copy(base, disk)
            before = rows(db)
            line = one_line(workbench(*WRITERS[command](db, disk / "out")))
            assert rows(db) == before
    else:
        db = _store_copy(base, tmp_path)
        before = digest(db)
        with tmpfs("8k") as disk:  # a page for the user's file, one to spare
            (disk / "mine.txt").write_text("a user's file\n")
            line = one_line(workbench(*WRITERS[command](db, disk / "out")))
            left = sorted(p.name for p in disk.rglob("*") if p.is_file())
            if command == "figures":  # a folder of figures: those written are whole, none is half of one
                assert not [p for p in left if Path(p).name.startswith(".")], left
                assert all((disk / p).read_text().rstrip().endswith("</html>") for p in left if p.endswith(".html"))
            else:
                assert left == ["mine.txt"], f"a half-written output was left: {left}"
            assert (disk / "mine.txt").read_text() == "a user's file\n"
        assert digest(db) == before
    assert any(s in line for s in ("No space left", "no space left", "File too large", "full")), line


@pytest.mark.parametrize("command", _cases("readonly", list(WRITERS)))
def test_a_read_only_folder_is_one_line(base, tmp_path, command):
    with tmpfs("1m", read_only=True) as folder:
        if command in WRITES_THE_STORE:  # the store itself where it cannot be written
            line = one_line(workbench(*WRITERS[command](folder / "s.duckdb", folder / "out")))
        else:
            db = _store_copy(base, tmp_path)
            before = digest(db)
            line = one_line(workbench(*WRITERS[command](db, folder / "out")))
            assert digest(db) == before
        assert not any(folder.iterdir())
    assert "Read-only" in line or "read-only" in line, line


@pytest.mark.parametrize("command", _cases("own_input", ["pool export", "export-qa", "figures"]))
def test_a_command_never_writes_over_its_own_input(base, tmp_path, command):
    db = _store_copy(base, tmp_path)
    before = digest(db)
    target = tmp_path if command == "figures" else db  # figures' --out is a folder: the store's own
    result = workbench(*WRITERS[command](db, target), "--force") if command != "figures" else \
        workbench(*WRITERS[command](db, target))
    if command == "figures":  # writing figures beside the store is fine; the store is untouched
        assert result.returncode == 0, result.stderr[-2000:]
    else:
        assert "that is the store this command reads" in one_line(result)
    assert digest(db) == before
