"""The conda environment and pyproject.toml pin the same packages at the same versions; the gpu extra
resolves with them (issue 14)."""

import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent


def test_environment_yml_matches_pyproject():
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip = next(item["pip"] for item in env["dependencies"] if isinstance(item, dict))
    assert sorted(pip) == sorted(deps)
    assert all("==" in d for d in deps), "every CPU dependency is pinned"
    requires = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    assert "python" + requires in env["dependencies"], "the same Python versions as requires-python"


def _requirements(extra: str | None = None) -> list[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return project["dependencies"] + (project["optional-dependencies"][extra] if extra else [])


def test_gpu_extra_pins_exactly_and_repeats_no_cpu_pin():
    cpu = {d.split("==")[0].lower() for d in _requirements()}
    gpu = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["gpu"]
    assert all("==" in d for d in gpu), "every gpu dependency is pinned"
    assert not cpu & {d.split("==")[0].lower() for d in gpu}, "a package pinned twice cannot be two versions"


# Unsloth caps trl at 1.15.0, below the CPU set's: pyproject.toml documents it as an add-on that
# replaces trl (this exact command), and the resolver test below checks that it resolves.
UNSLOTH_ADDON = ("unsloth==2026.10.9", "unsloth-zoo==2026.10.9", "trl==1.15.0")


def test_the_documented_unsloth_addon_is_the_tested_one():
    assert "pip install " + " ".join(UNSLOTH_ADDON) in (ROOT / "pyproject.toml").read_text()


def _resolve(requirements: list[str], folder: Path) -> dict[str, str]:
    """pip's resolver (against the registry, installing nothing): name -> chosen version."""
    listed, report = folder / "requirements.txt", folder / "report.json"
    listed.write_text("\n".join(requirements) + "\n")
    for _ in range(3):  # a download the network broke off is tried again; a resolver error is not
        done = subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet",
                               "--disable-pip-version-check", "--report", str(report), "-r", str(listed)],
                              capture_output=True, text=True, timeout=900)
        if done.returncode == 0 or "network connectivity, not pip" not in done.stderr:
            break
    assert done.returncode == 0, done.stderr[-3000:]
    return {i["metadata"]["name"].lower().replace("_", "-"): i["metadata"]["version"]
            for i in json.loads(report.read_text())["install"]}


def _replace(pins: list[str], extra: tuple[str, ...]) -> list[str]:
    names = {e.split("==")[0] for e in extra}
    return [p for p in pins if p.split("==")[0] not in names] + list(extra)


@pytest.mark.slow
@pytest.mark.parametrize("addon", [(), UNSLOTH_ADDON], ids=["gpu", "gpu+unsloth"])
def test_gpu_extra_resolves_with_the_cpu_pins(addon, tmp_path):
    """What `pip install '.[gpu]'` asks for (the CPU pins and the gpu extra), and that plus the
    Unsloth add-on, resolve at exactly the pinned versions (issue 14). Slow: 20-60 s each, the
    metadata of ~300 packages (no wheel is installed)."""
    pins = _replace(_requirements("gpu"), addon)
    chosen = _resolve(pins, tmp_path)
    for pin in pins:
        name, version = pin.split("==")
        assert chosen[name.lower().replace("_", "-")].split("+")[0] == version, pin  # torch may be a +cpu/+cu build
