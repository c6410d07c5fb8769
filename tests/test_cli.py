"""The ``workbench`` command: every subcommand answers --help, quickly, without heavy imports."""

import subprocess
import sys

import pytest

from workbench.cli import build_parser, main


def _subcommands():
    parser = build_parser()
    action = next(a for a in parser._actions if a.dest == "command")
    return sorted(action.choices)


def test_top_level_help_lists_the_issue_commands(capsys):
    assert main([]) == 0
    out = capsys.readouterr().out
    for name in ("world", "pool", "import", "search", "serve-retriever", "warmstart", "eval", "train", "runs",
                 "figures", "batch", "bench", "quickstart"):
        assert name in out, name


@pytest.mark.parametrize("name", _subcommands())
def test_every_subcommand_has_help(name, capsys):
    with pytest.raises(SystemExit) as stop:
        main([name, "--help"])
    assert stop.value.code == 0
    assert "usage: workbench" in capsys.readouterr().out


def test_help_does_not_import_torch():
    code = "import sys; from workbench.cli import build_parser; build_parser(); print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_bad_input_is_a_clear_error_not_a_traceback(tmp_path, capsys):
    code = main(["train", "--run", "x", "--method", "coevokg", "--set", "nonsense", "--db", str(tmp_path / "s.duckdb")])
    assert code == 2
    assert "--set: expected section.field=value" in capsys.readouterr().err


def test_a_librarys_runtime_error_keeps_its_traceback_and_the_workbenchs_own_does_not(monkeypatch, capsys):
    """A CUDA failure inside vLLM reached the user as one line (session 17's loop bench): a
    RuntimeError from outside the package prints its traceback; the workbench's own stops do not."""
    import argparse

    from workbench.method.update import NonFiniteGuard

    def library(args):  # this file is outside the package, as vLLM's and torch's are
        raise RuntimeError("CUDA error: operation failed due to a previous error during capture")

    def own(args):
        NonFiniteGuard(max_consecutive=1).check(float("nan"))

    for func, traced in ((library, True), (own, False)):
        monkeypatch.setattr(argparse.ArgumentParser, "parse_args",
                            lambda self, argv=None: argparse.Namespace(command="world", func=func))
        assert main([]) == 1
        err = capsys.readouterr().err
        assert ("Traceback (most recent call last)" in err) is traced and "workbench world: stopped: " in err
        assert ("test_cli.py" in err) is traced


def test_set_overrides_take_the_field_type():
    from workbench.config import preset

    assert preset("tiny", **{"method.lr": "3e-5"}).method.lr == 3e-5
    assert preset("smoke", **{"method.gate_allow_topic": "false"}).method.gate_allow_topic is False
    with pytest.raises(ValueError, match="'method.steps': expected an int"):
        preset("tiny", **{"method.steps": "many"})


def test_log_to_stderr_writes_to_the_current_stderr_once(capsys):
    import logging

    from workbench.commands import log_to_stderr

    log_to_stderr()
    log_to_stderr()  # a second call adds no second handler
    logging.getLogger("workbench.method.loop").info("round stage update: 1.0 s")
    err = capsys.readouterr().err  # the handler looks up sys.stderr per record: capsys's stream here
    assert err.count("workbench.method.loop: round stage update: 1.0 s") == 1


@pytest.mark.parametrize("args, said", [
    (["--set", "method.lrr=1"], "unknown config field 'method.lrr' (expected 'section.field', e.g. 'pool.walks'); "
                                "did you mean 'method.lr'?"),
    (["--method", "coevokgg"], "did you mean 'coevokg'?"),
    (["--preset", "tinyy"], "did you mean 'tiny'?"),
])
def test_a_typo_in_set_method_or_preset_gets_the_closest_name(tmp_path, capsys, args, said):
    db = tmp_path / "s.duckdb"
    try:  # argparse rejects --method itself (exit 2); the command rejects --set and --preset (returns 2)
        code = main(["train", "--run", "r", "--db", str(db), *args])
    except SystemExit as stop:
        code = stop.code
    assert code == 2 and said in capsys.readouterr().err
    assert not db.exists()


def test_train_help_names_every_method(capsys):
    from workbench.method.methods import METHODS

    with pytest.raises(SystemExit):
        main(["train", "--help"])
    text = " ".join(capsys.readouterr().out.split())  # argparse wraps the help
    assert [name for name in METHODS if f"{name} (" not in text] == []
