"""Issue 39, as a hostile user would try it: commands run against their own input, names that climb
out of their folder, resumes of runs whose checkpoint, store and world do not belong together, and
values no run can use. Each is refused with one line naming the file, field or flag, and leaves
what the user made exactly as it was. (The server's and the importers' cases have their own files.)
"""

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from workbench import store
from workbench.cli import main
from workbench.config import preset
from workbench.method.train import ensure_world, train


def digest(*files) -> str:
    """The bytes of ``files`` (a store and its WAL): unchanged means nothing was written."""
    h = hashlib.sha256()
    for f in files:
        h.update(Path(f).read_bytes() if Path(f).exists() else b"-")
    return h.hexdigest()


@pytest.fixture(scope="module")
def smoke_store(tmp_path_factory):
    db = tmp_path_factory.mktemp("hostile") / "s.duckdb"
    con = store.connect(db)
    ensure_world(con, preset("smoke"))
    con.close()
    return db


def _error(capsys) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err  # one line, no traceback
    return err


# -- exports never eat the store ---------------------------------------------------------------------

EXPORTS = {
    "pool export": lambda db, out, *f: ["pool", "export", "--db", db, out, *f],
    "export-qa": lambda db, out, *f: ["export-qa", "--db", db, out, *f],
    "export-qa --suite table1": lambda db, out, *f: ["export-qa", "--suite", "table1", "--db", db, out, *f],
}


@pytest.mark.parametrize("command", sorted(EXPORTS))
@pytest.mark.parametrize("force", [(), ("--force",)])
def test_an_export_onto_the_store_it_reads_is_refused_even_with_force(smoke_store, tmp_path, capsys, command, force):
    db = tmp_path / "s.duckdb"
    shutil.copy(smoke_store, db)
    before = digest(db)
    assert main(EXPORTS[command](str(db), str(db), *force)) == 2
    assert "that is the store this command reads" in _error(capsys)
    assert digest(db) == before


def test_the_natural_slip_pool_export_of_the_default_store_is_refused(smoke_store, tmp_path, monkeypatch, capsys):
    """``workbench pool export data/tiny.duckdb``: --db defaults to that very store."""
    monkeypatch.setenv("WORKBENCH_DATA", str(tmp_path))
    default = tmp_path / "tiny.duckdb"
    shutil.copy(smoke_store, default)
    before = digest(default)
    assert main(["pool", "export", str(default)]) == 2
    _error(capsys)
    assert digest(default) == before


def test_an_export_over_another_store_or_file_needs_force(smoke_store, tmp_path, capsys):
    db, other, out = tmp_path / "s.duckdb", tmp_path / "other.duckdb", tmp_path / "pool.jsonl"
    shutil.copy(smoke_store, db)
    shutil.copy(smoke_store, other)
    before = digest(other)
    assert main(["pool", "export", "--db", str(db), str(other)]) == 2
    assert "a DuckDB store is already there" in _error(capsys)
    assert main(["kilt-replica", str(other), "--pages", "3", "--no-progress"]) == 2
    assert "--force" in _error(capsys)
    assert digest(other) == before
    assert main(["pool", "export", "--db", str(db), str(out)]) == 0
    first = out.read_bytes()
    out.write_text("my notes\n")
    assert main(["pool", "export", "--db", str(db), str(out)]) == 2
    assert out.read_text() == "my notes\n"
    assert main(["pool", "export", "--db", str(db), str(out), "--force"]) == 0
    assert out.read_bytes() == first
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary file left


def test_an_export_onto_the_stores_wal_is_refused(smoke_store, tmp_path, capsys):
    db = tmp_path / "s.duckdb"
    shutil.copy(smoke_store, db)
    wal = Path(f"{db}.wal")
    wal.write_bytes(b"")  # a WAL beside the store (a writer's)
    assert main(["pool", "export", "--db", str(db), str(wal), "--force"]) == 2
    assert wal.read_bytes() == b""


# -- names stay in their folder -------------------------------------------------------------------

@pytest.mark.parametrize("name", ["../../../x", "..", "a/b", ".hidden", "a\\b"])
def test_a_batch_or_figure_name_cannot_leave_its_folder(tmp_path, name):
    import plotly.graph_objects as go
    import pandas as pd

    from workbench import batch, figures

    with pytest.raises(ValueError, match="expected a plain name"):
        batch.default_out(name)
    with pytest.raises(ValueError, match="expected a plain name"):
        batch.run_batch(Path("notebooks/00_quickstart.ipynb"), [{}], name=name, out_dir=tmp_path / "b")
    with pytest.raises(ValueError, match="expected a plain name"):
        figures.save_fig(go.Figure(), name, out_dir=tmp_path / "f")
    with pytest.raises(ValueError, match="expected a plain name"):
        figures.save_table(pd.DataFrame({"a": [1]}), name, out_dir=tmp_path / "f")
    assert not any(tmp_path.parent.glob("x*")) and not (tmp_path / "b").exists()


# -- resume checks what it resumes ------------------------------------------------------------------

@pytest.fixture(scope="module")
def trained(smoke_store, tmp_path_factory):
    """A 2-round smoke run, its store and its runs folder, made once; each test works on copies."""
    folder = tmp_path_factory.mktemp("trained")
    db, runs = folder / "s.duckdb", folder / "runs"
    shutil.copy(smoke_store, db)
    mp = pytest.MonkeyPatch()
    mp.setenv("WORKBENCH_RUNS", str(runs))
    try:
        train(db, run="r", preset="smoke", steps=2, progress=False, log=None)
    finally:
        mp.undo()
    return db, runs


@pytest.fixture
def copy(trained, tmp_path, monkeypatch):
    db, runs = trained
    shutil.copy(db, tmp_path / "s.duckdb")
    shutil.copytree(runs, tmp_path / "runs")
    monkeypatch.setenv("WORKBENCH_RUNS", str(tmp_path / "runs"))
    marker = tmp_path / "runs" / "r" / "run.json"  # the run folder names its store: this copy
    marker.write_text(json.dumps({"run": "r", "store": str((tmp_path / "s.duckdb").resolve())}))
    return tmp_path / "s.duckdb", tmp_path / "runs" / "r"


def _resume(db, capsys, *extra) -> str:
    before = digest(db)
    assert main(["train", "--preset", "smoke", "--db", str(db), "--run", "r", "--resume", *extra]) == 2
    err = _error(capsys)
    assert digest(db) == before
    return err


def test_resume_without_its_checkpoints_is_refused_not_restarted(copy, capsys):
    db, folder = copy
    shutil.rmtree(folder / "checkpoints")
    assert "but no checkpoint under" in _resume(db, capsys, "--steps", "3")


def test_resume_of_a_checkpoint_whose_state_was_edited_is_refused(copy, capsys):
    db, folder = copy
    state = folder / "checkpoints" / "round-000002" / "state.json"
    state.write_text(json.dumps({**json.loads(state.read_text()), "completed": 999}))
    assert "says 999 rounds completed" in _resume(db, capsys, "--steps", "5")
    state.write_text("{not json")
    assert "state.json: unreadable" in _resume(db, capsys, "--steps", "5")


def test_resume_onto_a_rebuilt_world_is_refused(copy, capsys):
    db, folder = copy
    assert main(["world", "--preset", "smoke", "--seed", "7", "--db", str(db), "--force"]) == 0
    capsys.readouterr()
    assert "do not belong together" in _resume(db, capsys, "--steps", "3")


def test_resume_onto_another_world_with_the_runs_rows_is_refused(copy, capsys):
    """The fingerprint, on its own: the store keeps the run's rounds but its passages changed."""
    db, _ = copy
    con = store.connect(db)
    con.execute("UPDATE passages SET text = text || ' (edited)' WHERE passage_id = (SELECT min(passage_id) FROM passages)")
    con.close()
    assert "holds another world" in _resume(db, capsys, "--steps", "3")


def test_resume_to_fewer_steps_than_done_is_refused(copy, capsys):
    db, _ = copy
    assert "has completed 2 rounds; give --steps 2 or more" in _resume(db, capsys, "--steps", "1")


def test_resume_at_another_preset_is_refused_before_any_warm_start(copy, capsys, monkeypatch):
    """``train --preset tiny --resume`` on a smoke run: refused before the tiny warm start trains."""
    import workbench.policy.warmstart as warm

    monkeypatch.setattr(warm, "warmstart", lambda *a, **k: pytest.fail("the warm start ran before the refusal"))
    db, _ = copy
    before = digest(db)
    assert main(["train", "--preset", "tiny", "--db", str(db), "--run", "r", "--resume", "--steps", "3"]) == 2
    assert "started with other settings" in _error(capsys)
    assert digest(db) == before


def test_resume_of_a_truncated_checkpoint_names_it(copy, capsys):
    db, folder = copy
    weights = folder / "checkpoints" / "round-000002" / "model" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:100])
    before = digest(db)
    assert main(["train", "--preset", "smoke", "--db", str(db), "--run", "r", "--resume", "--steps", "3"]) == 2
    err = _error(capsys)
    assert "round-000002 is damaged" in err and "--overwrite" in err
    assert digest(db) == before


def test_a_damaged_progress_file_leaves_the_other_runs_listed(copy, capsys, monkeypatch):
    db, folder = copy
    (folder / "progress.json").write_text(json.dumps({"run": "r"}))
    from workbench.commands import train as train_cmd

    assert train_cmd._list_locked(str(db)) == 0
    err = capsys.readouterr().err
    assert "skipped:" in err and "progress.json: not a progress file" in err


# -- values no run can use: refused before any work ----------------------------------------------------

@pytest.mark.parametrize("setting, expected", [
    ("method.lr=1e308", "a learning rate in (0, 1]"),
    ("backbone.hidden_size=1000000", "needs about"),
    ("method.seed=-1", "a seed in [0, 2^31)"),
    ("pool.walks=99999999999999999999", "magnitude below 2^31"),
    ("method.lr=!!python/object/apply:os.system ['true']", "expected a plain value"),
])
def test_a_value_no_run_can_use_is_one_line_before_any_work(tmp_path, capsys, setting, expected):
    db = tmp_path / "new.duckdb"
    assert main(["train", "--preset", "smoke", "--db", str(db), "--run", "x", "--set", setting]) == 2
    assert expected in _error(capsys)
    assert not db.exists()


@pytest.mark.parametrize("argv, expected", [
    (["world", "--preset", "smoke", "--seed", "-1"], "a seed in [0, 2^31)"),
    (["world", "--preset", "smoke", "--entities", str(10**13)], "needs about"),
    (["pool", "build", "--preset", "smoke", "--seed", "-5"], "a seed in [0, 2^31)"),
    (["kilt-replica", "OUT", "--seed", "-1"], "a seed in [0, 2^31)"),
])
def test_a_size_or_seed_out_of_range_is_refused_before_any_work(tmp_path, capsys, argv, expected):
    db = tmp_path / "new.duckdb"
    argv = [str(tmp_path / a) if a == "OUT" else a for a in argv]
    assert main(argv + ([] if argv[0] == "kilt-replica" else ["--db", str(db)])) == 2
    assert expected in _error(capsys)


def test_quickstart_with_an_unknown_preset_is_one_line(capsys):
    with pytest.raises(SystemExit) as stop:
        main(["quickstart", "--preset", "bogus"])
    assert stop.value.code == 2 and "invalid choice: 'bogus'" in capsys.readouterr().err


def test_every_command_a_message_names_exists():
    """A hint must name a real command: one once said `workbench world build`."""
    import io
    import re
    import tokenize

    from workbench.cli import build_parser

    parser = build_parser()
    commands = next(a for a in parser._actions if a.dest == "command").choices
    named = []
    for path in Path("workbench").rglob("*.py"):
        for tok in tokenize.generate_tokens(io.StringIO(path.read_text()).readline):
            if tok.type == tokenize.STRING:
                named += [(path, m) for m in re.findall(r"[`(]workbench ([a-z][\w-]*)(?: ([a-z][\w-]*))?", tok.string)]
    assert named
    for path, (command, action) in named:
        assert command in commands, f"{path}: `workbench {command}` is no command"
        if not action:
            continue
        positionals = [a for a in commands[command]._actions if not a.option_strings]
        if positionals and positionals[0].dest == "action":  # a command of sub-actions: one of them
            assert action in positionals[0].choices, f"{path}: `workbench {command} {action}` is no command"
        else:  # a plain word after a command that takes none is no command either
            assert positionals, f"{path}: `workbench {command} {action}`: {command} takes no {action!r}"
