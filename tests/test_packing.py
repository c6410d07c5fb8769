"""Sequence packing in the update (``method.pack_sequences``, issue 44): per-token log-probs,
entropy, loss and gradients of multi-turn trajectories of different lengths (retrieved tokens
masked out of the loss) equal the padded computation's up to float rounding."""

from __future__ import annotations

import copy
import dataclasses

import pytest
import torch

from workbench.config import preset
from workbench.method.update import PolicyStep
from workbench.policy import packing
from workbench.policy.model import Policy, tiny_model
from workbench.policy.rollout import Trajectory, batch_tensors
from workbench.policy.tokenizer import train_tokenizer


@pytest.fixture(scope="module")
def tok():
    return train_tokenizer(["who was the mayor of rome <search> paris </search> <information> a b c"] * 5,
                           vocab_size=300)


def _rows(vocab: int, lengths, seed: int = 0) -> list[Trajectory]:
    """Multi-turn rows: a prompt, then generated turns with a retrieved block between them (loss 0)."""
    gen = torch.Generator().manual_seed(seed)
    rows = []
    for i, (prompt, response) in enumerate(lengths):
        ids = torch.randint(3, vocab, (prompt + response,), generator=gen).tolist()
        mask = [1] * response
        for start in range(3, response - 2, 7):  # a retrieved block of 3 tokens every 7
            mask[start:start + 3] = [0, 0, 0]
        logps = (-torch.rand(response, generator=gen)).tolist()
        rows.append(Trajectory(i, 0, "", ids[:prompt], ids[prompt:], mask, logps))
    return rows


LENGTHS = [(5, 30), (4, 9), (6, 21), (3, 4), (5, 14), (4, 26), (7, 2)]


def test_pack_puts_every_token_once_with_its_own_positions(tok):
    t = batch_tensors(_rows(len(tok), LENGTHS), tok.pad_token_id)
    p = packing.pack(t["input_ids"], t["attention_mask"], tok.pad_token_id)
    assert p.input_ids.shape[0] < t["input_ids"].shape[0]  # fewer rows: the padding is gone
    valid = t["attention_mask"].bool()
    assert torch.equal(p.input_ids.flatten()[p.source[valid]], t["input_ids"][valid])
    assert torch.equal(p.position_ids.flatten()[p.source[valid]], (t["attention_mask"].cumsum(-1) - 1)[valid])
    assert (p.source[~valid] == -1).all() and len(set(p.source[valid].tolist())) == int(valid.sum())
    with pytest.raises(ValueError, match="a row of 5 tokens does not fit a packed row of 4"):
        packing.bins([5], 4)
    width = p.input_ids.shape[1]
    for b, row in enumerate(p.position_ids):  # Unsloth's packed_seq_lengths: the row's sequences, then its padding
        starts = sorted((int(p.source[i][valid[i]].min()), int(valid[i].sum())) for i in range(len(valid))
                        if int(p.source[i][valid[i]].min()) // width == b)
        want = [n for _, n in starts] + ([width - sum(n for _, n in starts)] if sum(n for _, n in starts) < width else [])
        assert packing.segment_lengths(row).tolist() == want


def test_packed_logprobs_and_entropy_equal_the_padded_ones(tok):
    policy = Policy(tiny_model(preset("smoke").backbone, tok, 0), tok, device="cpu")
    t = batch_tensors(_rows(len(tok), LENGTHS), tok.pad_token_id)
    padded, ent = policy.token_logprobs(t["input_ids"], t["attention_mask"], entropy_mask=t["loss_mask"])
    packed, ent_p = policy.token_logprobs(t["input_ids"], t["attention_mask"], entropy_mask=t["loss_mask"],
                                          packed=True)
    assert packed.shape == padded.shape and (packed[~t["attention_mask"].bool()] == 0).all()
    torch.testing.assert_close(packed, padded, atol=2e-5, rtol=1e-5)
    torch.testing.assert_close(ent_p, ent, atol=2e-5, rtol=1e-5)


@pytest.mark.parametrize("lora_rank", [0, 2])
def test_a_packed_update_step_has_the_padded_loss_and_gradients(tok, lora_rank):
    base = Policy(tiny_model(preset("smoke").backbone, tok, 0), tok, device="cpu")
    reference = None if lora_rank else Policy(tiny_model(preset("smoke").backbone, tok, 0), tok, device="cpu")
    if lora_rank:
        base.add_lora(lora_rank, 2 * lora_rank, seed=0)
    rows = _rows(len(tok), LENGTHS, seed=1)
    gen = torch.Generator().manual_seed(2)
    advantages = [torch.randn(len(r.response_ids), generator=gen) for r in rows]
    m = dataclasses.replace(preset("smoke").method, micro_batch=3, kl_coef=0.1)  # 3 micro-batches
    out = {}
    for packed in (False, True):
        policy = copy.deepcopy(base)
        step = PolicyStep(policy, reference, dataclasses.replace(m, pack_sequences=packed))
        stats = step(0, rows, advantages)
        grads = {n: p.grad.clone() for n, p in policy.model.named_parameters() if p.grad is not None}
        out[packed] = stats, grads
    (stats, grads), (stats_p, grads_p) = out[False], out[True]
    assert stats["skipped"] == stats_p["skipped"] == 0 and grads.keys() == grads_p.keys() and grads
    for key in ("loss", "kl", "entropy", "clip_fraction"):
        assert stats_p[key] == pytest.approx(stats[key], rel=1e-4, abs=1e-6), key
    for name, g in grads.items():
        torch.testing.assert_close(grads_p[name], g, atol=1e-6, rtol=1e-4, msg=name)


def test_packed_micro_batches_hold_whole_bins_and_a_rank_without_rows_gets_none(tok):
    policy = Policy(tiny_model(preset("smoke").backbone, tok, 0), tok, device="cpu")
    rows = _rows(len(tok), LENGTHS)
    m = dataclasses.replace(preset("smoke").method, micro_batch=2, pack_sequences=True)
    step = PolicyStep(policy, copy.deepcopy(policy), m)
    order = sorted(range(len(rows)), key=lambda i: rows[i].length)
    batches, width = step.micro_batches(rows, order)
    assert width == max(r.length for r in rows) and sorted(i for b in batches for i in b) == sorted(order)
    assert len(batches) < -(-len(rows) // 2)  # fewer forwards than 2 padded rows at a time
    assert step.micro_batches(rows, []) == ([], None)  # distributed.step_rows of a step smaller than the world
