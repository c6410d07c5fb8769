"""The interpreter the Makefile builds .venv with (scripts/find_python.sh), tested with fake
interpreters: tiny shell scripts that print a version, or fail as a pyenv shim of an inactive version
does, on a PATH that holds nothing else."""

import os
import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "find_python.sh"
MAKE = shutil.which("make")


def fake(bindir: Path, name: str, version: str | None) -> Path:
    """A fake interpreter `name`: prints `version` (as the script's probe does) or, with None,
    fails like a pyenv shim whose version is not active."""
    bindir.mkdir(parents=True, exist_ok=True)
    path = bindir / name
    if version is None:
        body = f'echo "pyenv: {name}: command not found" >&2\nexit 127\n'
    else:
        body = f"echo {version}\n"
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return path


def find(bindir: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(SCRIPT), *args], env={"PATH": str(bindir)},
                          capture_output=True, text=True, timeout=60)


def test_only_a_312_is_chosen(tmp_path):
    fake(tmp_path / "bin", "python3.12", "3.12")
    r = find(tmp_path / "bin")
    assert (r.returncode, r.stdout, r.stderr) == (0, "3.12 python3.12\n", "")


def test_newest_that_runs_wins_and_a_broken_shim_is_skipped(tmp_path):
    b = tmp_path / "bin"
    fake(b, "python3.13", None)
    fake(b, "python3.12", "3.12")
    fake(b, "python3.11", "3.11")
    assert find(b).stdout == "3.12 python3.12\n"
    fake(b, "python3.13", "3.13")
    assert find(b).stdout == "3.13 python3.13\n"


def test_plain_python3_is_the_last_resort(tmp_path):
    fake(tmp_path / "bin", "python3", "3.11")
    assert find(tmp_path / "bin").stdout == "3.11 python3\n"


@pytest.mark.parametrize("fakes, tried", [
    ({"python3.13": None}, "python3.13 (does not run)"),
    ({"python3": "3.10", "python3.12": None}, "python3.12 (does not run), python3.11 (not found), python3 (3.10)"),
    ({"python3": "3.14"}, "python3 (3.14)"),
    ({"python3": "2.7"}, "python3 (2.7)"),
    ({}, "python3.13 (not found)"),
])
def test_none_supported_says_so_in_one_line(tmp_path, fakes, tried):
    for name, version in fakes.items():
        fake(tmp_path / "bin", name, version)
    (tmp_path / "bin").mkdir(exist_ok=True)
    r = find(tmp_path / "bin")
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr.count("\n") == 1, r.stderr
    assert tried in r.stderr
    assert "Python 3.11 to 3.13" in r.stderr and "PY=" in r.stderr and "install" in r.stderr


def test_a_named_interpreter_is_checked_too(tmp_path):
    b = tmp_path / "bin"
    fake(b, "python3.13", "3.13")
    mine = fake(tmp_path / "elsewhere", "python", "3.11")
    assert find(b, str(mine)).stdout == f"3.11 {mine}\n"
    old = fake(tmp_path / "elsewhere", "python3.10", "3.10")
    r = find(b, str(old))
    assert r.returncode == 1 and f"{old} (3.10)" in r.stderr


def test_all_lists_each_supported_version_once_newest_first(tmp_path):
    b = tmp_path / "bin"
    fake(b, "python3.13", None)
    fake(b, "python3.12", "3.12")
    fake(b, "python3.11", "3.11")
    fake(b, "python3", "3.11")
    r = find(b, "--all")
    assert (r.returncode, r.stdout) == (0, "3.12 python3.12\n3.11 python3.11\n")
    (b / "python3.12").unlink()
    (b / "python3.11").unlink()
    (b / "python3").unlink()
    assert find(b, "--all").returncode == 1


def test_supported_range_agrees_with_requires_python():
    text = SCRIPT.read_text()
    lo = int(re.search(r"^MIN_MINOR=(\d+)$", text, re.M).group(1))
    hi = int(re.search(r"^MAX_MINOR=(\d+)$", text, re.M).group(1))
    requires = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    assert requires == f">=3.{lo},<3.{hi + 1}"
    candidates = re.search(r'^CANDIDATES="(.*)"$', text, re.M).group(1).split()
    assert candidates == [f"python3.{m}" for m in range(hi, lo - 1, -1)] + ["python3"]


# The Makefile's use of it, dry-run (make -n) against a venv folder under tmp_path.

def make_n(bindir: Path, venv: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([MAKE, "-n", "--no-print-directory", "-C", str(ROOT), "setup", f"VENV={venv}", *args],
                          env={"PATH": str(bindir)}, capture_output=True, text=True, timeout=60)


needs_make = pytest.mark.skipif(MAKE is None, reason="no make")


@needs_make
def test_make_builds_the_venv_with_the_chosen_interpreter(tmp_path):
    b = tmp_path / "bin"
    fake(b, "python3.13", None)
    fake(b, "python3.12", "3.12")
    r = make_n(b, tmp_path / "venv")
    assert r.returncode == 0, r.stderr
    assert f"python3.12 -m venv {tmp_path / 'venv'}" in r.stdout
    named = fake(tmp_path / "elsewhere", "python3", "3.11")
    assert f"{named} -m venv" in make_n(b, tmp_path / "venv", f"PY={named}").stdout


@needs_make
def test_make_rebuilds_a_venv_of_another_python_and_keeps_a_matching_one(tmp_path):
    b = tmp_path / "bin"
    fake(b, "python3.12", "3.12")
    venv = tmp_path / "venv"
    fake(venv / "bin", "python", "3.11")
    stamp = venv / ".stamp"
    stamp.touch()
    newer = (ROOT / "pyproject.toml").stat().st_mtime + 60
    os.utime(stamp, (newer, newer))
    r = make_n(b, venv)
    assert "has Python 3.11 but python3.12 is 3.12" in r.stdout
    assert f"rm -rf {venv}\npython3.12 -m venv {venv}\n" in r.stdout
    fake(venv / "bin", "python", "3.12")
    os.utime(stamp, (newer, newer))
    r = make_n(b, venv)
    assert (r.returncode, "-m venv" in r.stdout, "pip install" in r.stdout) == (0, False, False), r.stdout


@needs_make
def test_make_without_a_supported_python_stops_with_one_line(tmp_path):
    b = tmp_path / "bin"
    fake(b, "python3.13", None)
    fake(b, "python3", "3.10")
    r = make_n(b, tmp_path / "venv")
    assert r.returncode != 0 and r.stdout == ""
    assert r.stderr.count("\n") == 1 and "No supported Python" in r.stderr
    assert "python3.13 (does not run)" in r.stderr and "python3 (3.10)" in r.stderr
