"""workbench.notebook.setting: the notebooks' preset, model, dataset and overrides parameters."""

from __future__ import annotations

import pytest

from workbench import paths
from workbench.notebook import setting


@pytest.fixture
def full_size(monkeypatch):
    """The parameters as a user passes them (the suite's WORKBENCH_SMOKE would force preset smoke)."""
    monkeypatch.delenv("WORKBENCH_SMOKE", raising=False)


def test_overrides_change_the_config_like_set(full_size):
    s = setting("tiny", overrides={"method.lr": "3e-5", "rollout.max_turns": 2})
    assert (s.preset, s.cfg.method.lr, s.cfg.rollout.max_turns, s.dataset) == ("tiny", 3e-5, 2, "tinyworld")
    with pytest.raises(ValueError, match="unknown config field 'method.nope'"):
        setting("tiny", overrides={"method.nope": 1})


def test_the_base_is_the_model_parameter_else_the_presets(full_size):
    assert setting("tiny", model="data/models/mine").base(None) == "data/models/mine"
    kg = {"max_triples": 10, "min_similarity": 0.8}  # the model parameter wins over the KG warm start too
    assert setting("tiny", model="data/models/mine").base(None, kg_tool=kg) == "data/models/mine"
    assert setting("paper-7b").base(None) == paths.local_model("Qwen/Qwen2.5-7B-Instruct")


def test_a_paper_preset_asks_for_the_test_set(full_size):
    s = setting("paper")
    assert s.dataset == "" and s.cfg.method.seed_dataset == "nq_hotpotqa"
    with pytest.raises(ValueError, match="dataset: preset 'paper' has no default test set"):
        s.eval_set()
    assert setting("paper", dataset="nq").eval_set() == "nq"


def test_smoke_wins_under_the_tests_and_keeps_the_overrides():
    s = setting("paper", overrides={"method.lr": 1e-3})  # WORKBENCH_SMOKE=1 (conftest.py)
    assert (s.preset, s.cfg.method.lr) == ("smoke", 1e-3)


@pytest.mark.parametrize("bad", [["method.lr=1e-4"], "method.lr=1e-4", {1: 2}])
def test_overrides_that_are_not_a_dict_are_refused(bad):
    with pytest.raises(ValueError, match="overrides: expected a dict"):
        setting("smoke", overrides=bad)
