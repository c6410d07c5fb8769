"""Sequence packing for the update's forward (``method.pack_sequences``, ours; issue 44).

A micro-batch of right-padded rows [B, T] spends compute on every pad. Packed, a step's rows are
first grouped first-fit decreasing into rows of the longest one's length (:func:`bins`; the
update's micro-batches are then ``method.micro_batch`` of these packed rows, not of padded ones:
the same memory, far fewer forwards when lengths vary), and each micro-batch's real tokens are
laid out in order (:func:`pack`), each sequence with its own positions 0..n-1; the rest of a
packed row is padding with positions of its own. Transformers (5.x) reads restarting
``position_ids`` without an attention mask as packed sequences and masks attention
block-diagonally (``masking_utils.find_packed_sequence_indices``; FlashAttention 2 goes varlen
on them), so each token sees its own sequence only: the same log-probs as the padded rows, up to
float rounding, and with the update's token-mean loss the same gradient however the rows are
grouped (``tests/test_packing.py``).

Example:
    >>> import torch
    >>> ids = torch.tensor([[5, 6, 7, 0], [8, 9, 0, 0], [4, 0, 0, 0]])
    >>> p = pack(ids, (ids > 0).long(), pad_token_id=0)
    >>> p.input_ids.tolist(), p.position_ids.tolist()
    ([[5, 6, 7, 0], [8, 9, 4, 0]], [[0, 1, 2, 0], [0, 1, 0, 0]])
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


def bins(lengths: list[int], capacity: int) -> list[list[int]]:
    """Row indices grouped first-fit decreasing into bins of at most ``capacity`` tokens (a row
    longer than ``capacity`` is an error). Deterministic: ties keep the rows' order.

    Example:
        >>> bins([3, 2, 1, 2], capacity=4)
        [[0, 2], [1, 3]]
    """
    out: list[list[int]] = []
    room: list[int] = []
    for i in sorted(range(len(lengths)), key=lambda i: -lengths[i]):
        if lengths[i] > capacity:
            raise ValueError(f"pack: a row of {lengths[i]} tokens does not fit a packed row of {capacity}")
        for b, left in enumerate(room):
            if lengths[i] <= left:
                out[b].append(i)
                room[b] -= lengths[i]
                break
        else:
            out.append([i])
            room.append(capacity - lengths[i])
    return out


@dataclass
class Packed:
    """Packed inputs and where each padded position's token went.

    ``input_ids``, ``position_ids``: [packed rows, width]. ``source``: [B, T], the flat index
    (packed row * width + offset) of padded position (b, t), -1 where (b, t) is padding.
    """

    input_ids: torch.Tensor
    position_ids: torch.Tensor
    source: torch.Tensor


def pack(input_ids: torch.Tensor, attention_mask: torch.Tensor, pad_token_id: int, width: int | None = None) -> Packed:
    """The rows of ``input_ids`` (their tokens where ``attention_mask`` is 1, in order) laid out
    in order into packed rows of ``width`` tokens (default: the padded width), a new packed row
    when the next does not fit: rows ordered by :func:`bins` fill exactly its bins.

    Example: see the module docstring.
    """
    batch, padded = input_ids.shape
    width = width or padded
    keep = attention_mask.bool()
    lengths = keep.sum(-1).tolist()
    groups: list[list[int]] = []
    room = 0
    for i, n in enumerate(lengths):
        if n > width:
            raise ValueError(f"pack: a row of {n} tokens does not fit a packed row of {width}")
        if not groups or n > room:
            groups.append([])
            room = width
        groups[-1].append(i)
        room -= n
    device = input_ids.device
    ids = torch.full((len(groups), width), pad_token_id, dtype=input_ids.dtype, device=device)
    positions = torch.zeros(len(groups), width, dtype=torch.long, device=device)
    source = torch.full((batch, padded), -1, dtype=torch.long, device=device)
    for b, rows in enumerate(groups):
        offset = 0
        for i in rows:
            n = lengths[i]
            ids[b, offset:offset + n] = input_ids[i][keep[i]]
            positions[b, offset:offset + n] = torch.arange(n, device=device)
            source[i, keep[i]] = b * width + offset + torch.arange(n, device=device)
            offset += n
        # the rest is padding, positions of its own: a sequence apart that no real token attends to
        positions[b, offset:] = torch.arange(width - offset, device=device)
    return Packed(ids, positions, source)


def segment_lengths(positions: torch.Tensor) -> torch.Tensor:
    """The lengths of the segments of one packed row (its sequences, then its padding), each
    starting at position 0: what Unsloth's attention reads as ``packed_seq_lengths`` (int32).

    Example:
        >>> segment_lengths(torch.tensor([0, 1, 2, 0, 0, 1])).tolist()
        [3, 1, 2]
    """
    starts = torch.nonzero(positions == 0).flatten()
    return torch.diff(torch.cat([starts, starts.new_tensor([len(positions)])])).to(torch.int32)
