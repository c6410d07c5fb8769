"""Grouped-query attention without KV copies on the CPU (policy.attention): the same bits as
Transformers' copying path wherever no gradient flows, and Transformers' own path where one does."""

from __future__ import annotations

import pytest
import torch
from transformers.integrations import sdpa_attention

from workbench.config import preset
from workbench.policy import attention
from workbench.policy.model import Policy, tiny_model
from workbench.policy.tokenizer import train_tokenizer


@pytest.fixture(scope="module")
def policy():
    tok = train_tokenizer(["some text about the world and the things in it"] * 40, vocab_size=400)
    return Policy(tiny_model(preset("tiny").backbone, tok, 0), tok, device="cpu")  # 4 query heads over 2 KV heads


def _batch(policy):
    ids = torch.randint(5, len(policy.tokenizer) - 1, (6, 70), generator=torch.Generator().manual_seed(0))
    mask = torch.ones_like(ids)
    mask[:3, :25] = 0  # left padding: Transformers' rule then copies the KV heads
    return ids, mask


def _forward_and_generate(policy):
    ids, mask = _batch(policy)
    with torch.no_grad():
        logp, entropy = policy.token_logprobs(ids, mask, entropy_mask=mask)
    prompts = [ids[i, mask[i].bool()].tolist() for i in range(len(ids))]
    gens = policy.generate_ids(prompts, max_new_tokens=12, temperature=1.0, top_p=0.95, seed=3)
    return logp, entropy, [g.token_ids for g in gens], [g.logprobs for g in gens]


def _gradients(policy):
    ids, mask = _batch(policy)
    policy.model.zero_grad(set_to_none=True)
    policy.token_logprobs(ids, mask).sum().backward()
    return [p.grad.clone() for p in policy.model.parameters()]


def test_the_grouped_path_gives_the_copying_paths_bits_without_gradients(policy, monkeypatch):
    assert policy.model.config.num_attention_heads > policy.model.config.num_key_value_heads
    sdpa, grouped_calls = torch.nn.functional.scaled_dot_product_attention, []

    def spy(*args, **kwargs):  # which path each attention call took
        grouped_calls.append(bool(kwargs.get("enable_gqa")))
        return sdpa(*args, **kwargs)

    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", spy)
    grouped = _forward_and_generate(policy)
    assert grouped_calls and all(grouped_calls)
    grouped_calls.clear()
    with attention.copying_kv():
        copied = _forward_and_generate(policy)
    assert grouped_calls and not any(grouped_calls)
    assert torch.equal(grouped[0], copied[0]) and torch.equal(grouped[1], copied[1])
    assert grouped[2] == copied[2] and grouped[3] == copied[3]  # sampled tokens and their log-probs


def test_training_keeps_transformers_path(policy, monkeypatch):
    taken = []

    def transformers_rule(attention_mask, key, value):  # its answer with a mask on the CPU: copy
        taken.append(torch.is_grad_enabled())
        return False

    monkeypatch.setattr(attention, "_TRANSFORMERS_RULE", transformers_rule)
    _gradients(policy)
    assert taken and all(taken)  # every layer under autograd asked Transformers' rule (which copies)
    taken.clear()
    with torch.no_grad():
        policy.token_logprobs(*_batch(policy))
    assert not taken  # no gradient: the grouped path, Transformers' rule not consulted


def test_install_is_idempotent_and_the_baseline_restores_it():
    attention.install()
    attention.install()
    assert sdpa_attention.use_gqa_in_sdpa is attention._rule
    with attention.copying_kv():
        assert sdpa_attention.use_gqa_in_sdpa is attention._TRANSFORMERS_RULE
    assert sdpa_attention.use_gqa_in_sdpa is attention._rule
