"""``method.gradient_checkpointing`` (issue 44): the mode a run's setting resolves to, and that it
reaches the model the update trains (LoRA through PEFT here; Unsloth's call takes the same mode)."""

from __future__ import annotations

import pytest
from transformers import Qwen2Config

from workbench.config import CHECKPOINTING, preset
from workbench.method.train import load_policies
from workbench.policy import checkpointing
from workbench.policy.model import Policy, tiny_model
from workbench.policy.tokenizer import train_tokenizer

QWEN_3B = Qwen2Config(hidden_size=2048, intermediate_size=11008, num_hidden_layers=36)


def test_modes_match_the_configs_list():
    assert CHECKPOINTING == checkpointing.MODES


def test_auto_keeps_activations_when_they_fit_in_half_the_free_memory():
    need = checkpointing.activation_bytes(QWEN_3B, 8 * 1024)
    assert need == 8 * 1024 * 36 * (10 * 2048 + 3 * 11008) * 2
    assert checkpointing.choose("auto", "cuda", QWEN_3B, 8 * 1024, free_bytes=2 * need) == "off"
    assert checkpointing.choose("auto", "cuda:0", QWEN_3B, 8 * 1024, free_bytes=2 * need - 1) == "standard"
    assert checkpointing.choose("auto", "cpu", QWEN_3B, 8 * 1024, free_bytes=0) == "off"  # the tiny tier's update
    assert checkpointing.choose("offload", "cpu", QWEN_3B, 1) == "offload"  # an explicit mode stands
    with pytest.raises(ValueError, match="method.gradient_checkpointing='on': expected one of"):
        checkpointing.choose("on", "cpu", QWEN_3B, 1)


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    tok = train_tokenizer(["some text about rome and paris"] * 5, vocab_size=300)
    return Policy(tiny_model(preset("smoke").backbone, tok, 0), tok).save(tmp_path_factory.mktemp("base"))


@pytest.mark.parametrize("rank", [0, 2])
@pytest.mark.parametrize("setting, on", [("auto", False), ("off", False), ("standard", True)])
def test_the_setting_reaches_the_trained_model(base, rank, setting, on):
    cfg = preset("smoke", **{"method.lora_rank": rank, "method.gradient_checkpointing": setting})
    policy, _ = load_policies(cfg, base, None)
    assert policy.checkpointing == ("standard" if on else "off")
    assert policy.model.is_gradient_checkpointing is on


def test_offload_is_refused_off_unsloth(base):
    cfg = preset("smoke", **{"method.lora_rank": 2, "method.gradient_checkpointing": "offload"})
    with pytest.raises(ValueError, match="offload is Unsloth's"):
        load_policies(cfg, base, None)
    with pytest.raises(ValueError, match="'method.gradient_checkpointing': expected one of"):
        preset("smoke", **{"method.gradient_checkpointing": "on"})
