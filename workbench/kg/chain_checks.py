"""Dr. Free's pool-build checks on G_0's chains (seed 002, Fig. 5 and Table 7), both off by default.

**Retrieval verification** (Fig. 5: "Retrieval verification in Wiki-18 checks that the source
passage mentions the first bridge entity and that subsequent entities are reachable through
per-hop retrieval"). For a chain e_1 -r_1-> e_2 ... e_L:

* ``source_mention``: e_1's passage (its first paragraph, the chain's node passage d_1) must name
  e_2's title (case-insensitive substring; ours);
* ``hop_retrieval``: for each later hop i >= 2, one retrieval of the query "title(e_i) r_i"
  (ours: the paper does not give its query) with the training retriever must return, in its top k
  (``search.topk``), a passage that is e_{i+1}'s own or names it (ours: the hop's evidence reaches
  the next entity).

A chain failing either is rejected under that reason (the first that fails), so ``pool_builds``'
rejections count them as the walk filters' are.

**Hop-sampling ratio** (Table 7: 1:1:1 over 2/3/4 hops was best): the pool is subsampled so its
hop counts follow the ratio, keeping as many chains as the scarcest hop class allows (seeded);
the chains dropped are counted under ``hop_ratio``.

Example:
    >>> parse_hop_ratio("1:1:1", 2, 4)
    {2: 0.3333333333333333, 3: 0.3333333333333333, 4: 0.3333333333333333}
    >>> import numpy as np
    >>> hops = np.array([2, 2, 2, 2, 3, 3])
    >>> hops[hop_ratio_keep(hops, {2: 0.5, 3: 0.5})].tolist()  # as many 2-hop chains as 3-hop ones
    [2, 2, 3, 3]
"""

from __future__ import annotations

import numpy as np

RETRIEVAL_REASONS = ("source_mention", "hop_retrieval")


def parse_hop_ratio(ratio: str, min_hops: int, max_hops: int) -> dict[int, float] | None:
    """``"a:b:c"`` as {hops: share} over ``min_hops``..``max_hops``; "" gives None (no ratio).

    Example:
        >>> parse_hop_ratio("", 2, 3) is None, parse_hop_ratio("3:1", 2, 3)
        (True, {2: 0.75, 3: 0.25})
    """
    if not ratio or not ratio.strip():
        return None
    try:
        weights = [float(w) for w in ratio.split(":")]
    except ValueError:
        raise ValueError(f"hop_ratio {ratio!r}: expected weights joined by ':', e.g. '1:1:1'") from None
    hops = list(range(min_hops, max_hops + 1))
    if len(weights) != len(hops) or any(w < 0 for w in weights) or sum(weights) <= 0:
        raise ValueError(f"hop_ratio {ratio!r}: expected {len(hops)} non-negative weights (hops {hops}), "
                         "not all zero")
    total = sum(weights)
    return {h: w / total for h, w in zip(hops, weights)}


def hop_ratio_keep(hops: np.ndarray, shares: dict[int, float], seed: int = 0) -> np.ndarray:
    """Indices of ``hops`` to keep so the hop counts follow ``shares``: the largest n with
    round(n * share) chains available in every class, each class drawn without replacement (seeded),
    returned in their original order."""
    hops = np.asarray(hops)
    avail = {h: np.flatnonzero(hops == h) for h in shares}
    positive = [h for h, s in shares.items() if s > 0]
    n = int(min(len(avail[h]) / shares[h] for h in positive)) if positive else 0
    rng = np.random.default_rng(seed)
    keep = []
    for h in sorted(shares):
        k = min(len(avail[h]), int(round(n * shares[h])))
        if k:
            keep.append(rng.choice(avail[h], size=k, replace=False))
    return np.sort(np.concatenate(keep)) if keep else np.zeros(0, dtype=np.int64)


def retrieval_verdicts(entity_ids: list[list[int]], titles: list[list[str]], relations: list[list[str]],
                       source_passages: list[str | None], search, topk: int) -> list[str | None]:
    """Per chain: None when it passes retrieval verification, else the first failing reason
    (``source_mention`` or ``hop_retrieval``). Every hop query of every chain goes to ``search`` in
    one batch."""
    verdicts: list[str | None] = []
    queries, owners = [], []
    for c, (ids, names, rels, source) in enumerate(zip(entity_ids, titles, relations, source_passages)):
        if len(names) < 2 or not source or names[1].lower() not in source.lower():
            verdicts.append("source_mention")
            continue
        verdicts.append(None)
        for i in range(1, len(ids) - 1):
            queries.append(f"{names[i]} {rels[i]}")
            owners.append((c, ids[i + 1], names[i + 1].lower()))
    hits = search.search(queries, k=topk) if queries else []
    for (c, target, name), found in zip(owners, hits):
        if verdicts[c] is None and not any(h.entity_id == target or name in h.text.lower() for h in found[:topk]):
            verdicts[c] = "hop_retrieval"
    return verdicts
