"""The paper tier's presets against what seed 000 states (issue 16)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from workbench.config import PAPER_MODELS, PAPER_VALUES, PRESETS, preset

ROOT = Path(__file__).resolve().parents[1]
SEED = next((f for d in (ROOT.parent / "shared" / "seeds", ROOT.parent.parent / "shared" / "seeds")
             if d.is_dir() for f in d.glob("000_*.txt")), None)


@pytest.mark.parametrize("name", sorted(PAPER_MODELS))
@pytest.mark.parametrize("key", sorted(PAPER_VALUES))
def test_paper_presets_hold_every_value_the_paper_states(name, key):
    section, field = key.split(".")
    assert getattr(getattr(PRESETS[name], section), field) == PAPER_VALUES[key][0]


@pytest.mark.parametrize("name", sorted(PAPER_MODELS))
def test_paper_budget_is_314_optimiser_steps(name):
    m = preset(name).method
    assert m.steps * m.minibatches == 314


def test_paper_presets_name_the_three_backbones_and_e5():
    assert preset("paper").backbone.model == "Qwen/Qwen2.5-3B-Instruct"
    assert preset("paper-7b").backbone.model == "Qwen/Qwen2.5-7B-Instruct"
    assert preset("paper-8b").backbone.model == "meta-llama/Llama-3.1-8B-Instruct"
    assert {preset(n).search.dense_model for n in PAPER_MODELS} == {"intfloat/e5-base-v2"}


def test_paper_presets_differ_only_in_their_backbone():
    import dataclasses

    base = dataclasses.replace(preset("paper"), name="x", backbone=preset("paper").backbone)
    for name in ("paper-7b", "paper-8b"):
        other = preset(name)
        assert dataclasses.replace(other, name="x", backbone=base.backbone) == base


def test_paper_real_model_settings():
    cfg = preset("paper")
    assert cfg.method.lora_rank > 0 and cfg.method.proposer_answer_choices is False
    assert cfg.rollout.max_new_tokens >= 256 and cfg.rollout.max_total_tokens >= 4096
    assert cfg.method.proposer_max_new_tokens >= 128 and cfg.rollout.backend == "auto"
    assert cfg.search.url == ""


@pytest.mark.skipif(SEED is None, reason="seed papers not present")
def test_paper_values_quote_the_paper():
    """Each stated value's number occurs in the seed text (a typo in PAPER_VALUES fails here)."""
    text = SEED.read_text()
    for phrase in ["$314$ optimization steps", "group size $G=8$", r"\beta{=}0.2", "top-3 passages",
                   "up to 8 turns", "temperature 0.6", "top-$p$ 0.95"]:
        assert phrase in text, phrase


def test_overrides_reach_paper_presets_and_bad_ones_name_the_field():
    assert preset("paper", **{"search.url": "http://127.0.0.1:8000"}).search.url == "http://127.0.0.1:8000"
    with pytest.raises(ValueError, match="config field 'search.url'"):
        preset("paper", **{"search.url": "127.0.0.1:8000"})
    with pytest.raises(ValueError, match="config field 'method.path_extractor'"):
        preset("paper", **{"method.path_extractor": "oracle"})
    assert re.fullmatch(r"[0-9a-f]{12}", preset("paper-8b").hash())
