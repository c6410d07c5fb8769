"""This machine's resources: sizes checked against its memory before any work (a request that cannot
fit is one line naming what to change, not an out-of-memory kill an hour later), its peak memory
so far, and its default device.

Example:
    >>> check_memory(10, "a tiny request", "ask for less")
    >>> human_size(3 * 2**30)
    '3.0 GiB'
"""

from __future__ import annotations

INT_LIMIT = 2**31  # every int setting (a count, a size, a seed) is below it: the store's columns and numpy's seeds hold it
# A world's entities in memory while it is generated and written (peak RSS over 20k-200k entities:
# ~3.3 KiB each, LOG.md 2026-12-04; ours, rounded up).
WORLD_BYTES_PER_ENTITY = 4096


def check_seed(seed, name: str) -> int:
    """``seed`` when it is an integer in [0, 2^31), else ValueError naming ``name``.

    Example:
        >>> check_seed(-1, "--seed")
        Traceback (most recent call last):
        ...
        ValueError: --seed -1: expected a seed in [0, 2^31)
    """
    if isinstance(seed, bool) or not hasattr(seed, "__index__") or not 0 <= seed < INT_LIMIT:
        raise ValueError(f"{name} {seed!r}: expected a seed in [0, 2^31)")
    return int(seed)


def human_size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.1f} {unit}"
        n /= 1024


def available_memory(total: bool = False) -> int:
    """Bytes of memory available now (``total``: the machine's whole memory)."""
    import psutil

    memory = psutil.virtual_memory()
    return memory.total if total else memory.available


def check_memory(need: int, what: str, advice: str, total: bool = False) -> None:
    """ValueError when ``need`` bytes exceed the memory available now (``total``: the machine's
    whole memory, for a need that must fit on any quiet day), naming ``what`` and ``advice``.

    Example:
        >>> check_memory(2**60, "--entities 281,474,976,710,656", "ask for fewer")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ValueError: --entities 281,474,976,710,656: needs about 1048576.0 TiB of memory, more than the ... available; ask for fewer
    """
    have = available_memory(total)
    if need > have:
        raise ValueError(f"{what}: needs about {human_size(need)} of memory, more than the {human_size(have)} "
                         f"{'this machine has' if total else 'available'}; {advice}")


def peak_rss_mb() -> float:
    """Peak resident memory of this process so far, in MiB (Linux ``ru_maxrss`` is in KiB)."""
    import resource

    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def default_device() -> str:
    """Where a policy goes when no device is given, and what ``search.device`` 'auto' means: 'cuda'
    when torch sees a GPU, else 'cpu'.

    Example:
        >>> default_device() in ("cuda", "cpu")
        True
    """
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"
