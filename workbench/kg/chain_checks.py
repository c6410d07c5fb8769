"""Dr. Free's chain construction (seed 002, Fig. 5 and Table 7): its pool-build checks, off by
default, and :func:`drfree_selection`, the chains the Dr. Free rows draw from (all of Fig. 5's checks
and the hop ratio applied to G_0's chains, on by default for those rows).

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

**Selection for the Dr. Free rows** (:func:`drfree_selection`, ``method.chain_selection``): G_0's
walk filters already reject cycles (Fig. 5's acyclicity); the selection adds, per chain and counted
under the first that fails, the relation whitelist (``non_functional``: a relation whose
``relations.functional`` is not true; Table 10 lists such relations, "approximately 40 relation
types" in Wikidata5M, TinyWorld marks its own), unique entity grounding (``not_unique``: a hop (e,
r, e') where (e, r) has another object in ``edges``), then retrieval verification as above with the
run's training retriever; the survivors are subsampled to the hop ratio (``method.drfree_hop_ratio``;
"" = equal shares over the hop counts present, ours: Table 7's best, 1:1:1, is equal shares over
three hop classes its text does not name). The pool itself is not rebuilt, so Dr. Free and CoEvoKG
runs share a store and its G_0.

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
SELECTION_REASONS = ("non_functional", "not_unique") + RETRIEVAL_REASONS + ("hop_ratio",)  # drfree_selection's order


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


def equal_shares(hops) -> dict[int, float]:
    """Equal shares over the hop counts present (the default hop ratio of :func:`drfree_selection`).

    Example:
        >>> equal_shares([2, 3, 3, 2, 2])
        {2: 0.5, 3: 0.5}
    """
    present = sorted({int(h) for h in hops})
    return {h: 1 / len(present) for h in present}


def _g0_chains(con) -> tuple[list[int], list[int], list[list[int]], list[list[str]], list[list[str]]]:
    """G_0's chains (``run`` NULL) in id order: ids, hops, entity ids, titles, relation labels."""
    rows = con.execute("""
        SELECT n.chain_id, any_value(c.hops), list(n.entity_id ORDER BY n.position),
               list(e.title ORDER BY n.position),
               list(n.relation ORDER BY n.position) FILTER (WHERE n.relation IS NOT NULL)
        FROM chain_nodes n JOIN chains c USING (chain_id) LEFT JOIN entities e USING (entity_id)
        WHERE c.run IS NULL GROUP BY n.chain_id ORDER BY n.chain_id""").fetchall()
    return ([int(r[0]) for r in rows], [int(r[1]) for r in rows], [list(r[2]) for r in rows],
            [list(r[3]) for r in rows], [list(r[4] or []) for r in rows])


def drfree_selection(con, search, topk: int = 3, ratio: str = "", seed: int = 0) -> dict:
    """The G_0 chains Dr. Free's rows draw from (see the module docstring): ``ids`` (chain ids,
    ascending), ``hops`` (theirs), ``rejections`` ({reason: chains}, in :data:`SELECTION_REASONS`
    order, each chain once) and ``considered`` (G_0's size). ``search`` is the training retriever
    (``search(queries, k)``), ``topk`` its depth; ``ratio`` "a:b[:c]" over the hop counts present,
    "" for equal shares; ``seed`` draws the hop-ratio subsample.

    Example:
        >>> # drfree_selection(con, SearchTool(con, topk=3), topk=3)["ids"][:5]
    """
    ids, hops, entity_ids, titles, relations = _g0_chains(con)
    if not ids:
        raise ValueError("Dr. Free's chain selection: the store holds no G_0 chains (workbench pool build)")
    functional = dict(con.execute("SELECT label, coalesce(functional, false) FROM relations").fetchall())
    # per G_0 chain, the most objects any of its hops' (subject, relation) has in the graph
    most = dict(con.execute("""
        WITH hop AS (SELECT n.chain_id, n.entity_id, n.relation FROM chain_nodes n JOIN chains c USING (chain_id)
                     WHERE c.run IS NULL AND n.relation IS NOT NULL),
             objects AS (SELECT e.src, e.relation, count(DISTINCT e.dst) AS n FROM edges e
                         SEMI JOIN hop h ON h.entity_id = e.src AND h.relation = e.relation GROUP BY ALL)
        SELECT h.chain_id, max(coalesce(o.n, 0)) FROM hop h
        LEFT JOIN objects o ON o.src = h.entity_id AND o.relation = h.relation GROUP BY h.chain_id""").fetchall())
    reasons: list[str | None] = []
    for cid, rels in zip(ids, relations):
        if not all(functional.get(r, False) for r in rels):
            reasons.append("non_functional")
        elif most.get(cid, 0) > 1:
            reasons.append("not_unique")
        else:
            reasons.append(None)
    todo = [i for i, r in enumerate(reasons) if r is None]
    first = dict(con.execute("SELECT entity_id, arg_min(text, paragraph) FROM passages WHERE entity_id IN "
                             "(SELECT unnest(?)) GROUP BY entity_id",
                             [sorted({entity_ids[i][0] for i in todo})]).fetchall()) if todo else {}
    verdicts = retrieval_verdicts([entity_ids[i] for i in todo], [titles[i] for i in todo],
                                  [relations[i] for i in todo], [first.get(entity_ids[i][0]) for i in todo],
                                  search, topk)
    for i, v in zip(todo, verdicts):
        reasons[i] = v
    passed = np.array([i for i, r in enumerate(reasons) if r is None], dtype=np.int64)
    passed_hops = np.array([hops[i] for i in passed], dtype=np.int64)
    shares = (parse_hop_ratio(ratio, int(passed_hops.min()), int(passed_hops.max())) if ratio.strip()
              else equal_shares(passed_hops)) if len(passed) else {}
    kept = passed[hop_ratio_keep(passed_hops, shares, seed)] if len(passed) else passed
    counts = {r: sum(x == r for x in reasons) for r in SELECTION_REASONS[:-1]}
    counts["hop_ratio"] = len(passed) - len(kept)
    return {"ids": [ids[i] for i in kept], "hops": [hops[i] for i in kept], "considered": len(ids),
            "rejections": {r: n for r, n in counts.items() if n}, "shares": shares}
