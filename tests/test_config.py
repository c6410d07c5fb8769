"""Config values are validated before any work starts, each error naming its field (issue 12)."""

from __future__ import annotations

import dataclasses

import pytest

from workbench import config
from workbench.config import PRESETS, Config, preset


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_every_preset_is_valid(name):
    assert PRESETS[name].validate() is PRESETS[name]


@pytest.mark.parametrize("key, value, expected", [
    ("method.group_size", 0, "an integer >= 2"),
    ("method.group_size", 1, "an integer >= 2"),
    ("method.chains_per_round", 0, "an integer >= 1"),
    ("method.minibatches", 0, "an integer >= 1"),  # accepted before: kept the learning rate at lr/40
    ("method.lr", "nan", "a finite number"),
    ("method.lr", 0, r"a learning rate in \(0, 1\]"),
    ("method.lr", 1e308, r"a learning rate in \(0, 1\]"),
    ("method.seed", -1, r"a seed in \[0, 2\^31\)"),
    ("method.lr", "-inf", "a finite number"),
    ("method.p_start", 1.5, r"a number in \[0, 1\]"),
    ("method.verifier", "oracle", "one of"),
    ("method.pool_sampling", "weighted", "one of"),
    ("method.gate_aggregation", "max", "one of"),
    ("method.seed_families", "comparison,,two_hop", "family names joined by ','"),
    ("method.steps", 2.5, "an int"),  # int(2.5) used to truncate to 2 silently
    ("pool.min_hops", 1, "at least two relational hops"),
    ("pool.max_hops", 1, "pool.min_hops"),
    ("search.index", "faiss", "one of"),
    ("rollout.top_p", 0, r"a probability in \(0, 1\]"),
    ("backbone.kv_heads", 3, "dividing backbone.heads"),
])
def test_bad_values_are_refused_naming_the_field(key, value, expected):
    with pytest.raises(ValueError, match=rf"config field .{key}.: expected .*{expected}"):
        preset("smoke", **{key: value})


def test_validate_checks_types_of_configs_built_directly():
    bad = dataclasses.replace(Config(), method=dataclasses.replace(Config().method, steps="3"))
    with pytest.raises(ValueError, match="config field 'method.steps': expected an int, got '3'"):
        bad.validate()


def test_enumerations_match_the_method_layer():
    """config cannot import method or kg (it is the lowest layer): its copies of their names must agree."""
    from workbench.kg.filters import MIN_RELATIONAL_HOPS
    from workbench.method.gate import QUALITY_AGGREGATIONS
    from workbench.method.verifiers import make_verifier

    assert sorted(config.GATE_AGGREGATIONS) == sorted(QUALITY_AGGREGATIONS)
    for name in config.VERIFIERS:
        if name:
            make_verifier(name, policy=None)
    with pytest.raises(ValueError, match="unknown verifier"):
        make_verifier("oracle", policy=None)
    assert not config.RULES["pool.min_hops"][0](MIN_RELATIONAL_HOPS - 1, None)
    assert config.RULES["pool.min_hops"][0](MIN_RELATIONAL_HOPS, None)


def test_engine_enumerations_match_the_policy_layer():
    """rollout.backend and rollout.vllm_sync name what policy.generation builds (issue 14)."""
    from workbench.policy.generation import BACKENDS, SYNC_MODES

    assert sorted(config.BACKENDS) == sorted(BACKENDS)
    assert sorted(config.VLLM_SYNC) == sorted(SYNC_MODES)
    with pytest.raises(ValueError, match="config field 'rollout.backend': expected one of"):
        preset("smoke", **{"rollout.backend": "tgi"})
    with pytest.raises(ValueError, match="config field 'method.lora_rank': expected an integer >= 0"):
        preset("smoke", **{"method.lora_rank": -1})
    assert preset("tiny").method.lora_rank == 0  # the tiny tier fine-tunes every weight
