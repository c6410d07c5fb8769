"""The conda environment and pyproject.toml pin the same packages at the same versions."""

import tomllib
from pathlib import Path

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
