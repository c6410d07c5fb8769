"""A helper several test modules share (pytest puts tests/ on the import path)."""

from __future__ import annotations

import contextlib

import torch


@contextlib.contextmanager
def memorized(policy, ids, labels, steps: int, attention_mask=None):
    """``policy`` trained on ``ids`` (loss where ``labels`` is not -100) for ``steps`` seeded AdamW
    steps at lr 3e-3, until greedy decoding repeats the demonstrations; on one torch thread while
    the block runs (tiny matrices: extra threads only spin on a shared 2-core machine), restored after.
    """
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        torch.manual_seed(0)
        opt = torch.optim.AdamW(policy.model.parameters(), lr=3e-3)
        policy.model.train()
        for _ in range(steps):
            loss = policy.model(input_ids=ids, attention_mask=attention_mask, labels=labels).loss
            opt.zero_grad()
            loss.backward()
            opt.step()
        policy.model.eval()
        yield policy
    finally:
        torch.set_num_threads(threads)
