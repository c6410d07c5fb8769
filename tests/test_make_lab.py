"""`make lab`: JupyterLab from the project's venv, on loopback only, opened on notebooks/ (issue 13)."""

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.skipif(shutil.which("make") is None, reason="no make")
def test_make_lab_runs_the_venvs_jupyterlab_on_loopback(tmp_path):
    venv = tmp_path / "venv"
    out = subprocess.run(["make", "-n", "--no-print-directory", "-C", str(ROOT), "lab", f"VENV={venv}"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    lab = [line for line in out.stdout.splitlines() if "jupyter lab" in line]
    assert lab == [f"{venv}/bin/jupyter lab --ServerApp.ip=127.0.0.1 --ServerApp.root_dir=notebooks"]
