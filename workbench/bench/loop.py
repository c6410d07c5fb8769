"""``workbench bench loop``: the round's own speed figures (issue 3).

``bench_loop``:

* ``path_support_per_s``: trajectories/s scored by Eq. 9 against the precomputed G_t index (M per
  step, S_path, pass flag); goal >= 10,000 on CPU. ``extract_and_score_per_s`` adds Eq. 8's
  deterministic extraction from queries and retrieved entities.
* ``writeback_per_s``: evidence records/s merged by verified write-back (section 3.4, one
  transaction, set-based); goal >= 10,000.
* ``overhead_vs_search_r1``: a CoEvoKG round's time over a Search-R1 round's.

Synthetic inputs (ours, seeded): a pool of 3-entity chains over a world of named entities, each
node carrying its passage, and trajectories that follow a chain, take a shortcut, or wander.

Example:
    >>> r = bench_path_support(n_chains=200, n_trajectories=2000, seed=0)
    >>> r["trajectories"], r["path_support_per_s"] > 0
    (2000, True)
"""

from __future__ import annotations

import time

import numpy as np

from workbench.bench.store import bench_store


def _synthetic_pool(n_chains: int, seed: int):
    """Entity titles, chains (entity id triples) and node passages naming the next entity."""
    rng = np.random.default_rng(seed)
    n_entities = max(3 * n_chains // 2, 10)
    titles = {i: f"Ent{i:06d}" for i in range(n_entities)}
    chains = [[int(x) for x in rng.choice(n_entities, 3, replace=False)] for _ in range(n_chains)]
    return rng, titles, chains


def bench_path_support(n_chains: int = 5000, n_trajectories: int = 20000, seed: int = 0) -> dict:
    """Build the G_t index for ``n_chains`` chains, then extract and score ``n_trajectories`` paths."""
    from workbench.method.path_support import EvidenceGraph, Record, extract_path

    rng, titles, chains = _synthetic_pool(n_chains, seed)
    records = [Record(c, [(c[i], f"{titles[c[i]]} is linked to {titles[c[i + 1]]}.") for i in range(2)]
                      + [(c[2], f"{titles[c[2]]} is a place.")]) for c in chains]
    t0 = time.perf_counter()
    graph = EvidenceGraph.from_records(records, titles)
    build_s = time.perf_counter() - t0
    trajectories = []
    for _ in range(n_trajectories):
        c = chains[int(rng.integers(len(chains)))]
        noise = [int(x) for x in rng.integers(0, len(titles), 2)]
        kind = rng.random()
        hops = c if kind < 0.6 else [c[0], c[2]] if kind < 0.8 else [c[0], noise[0], c[2]]
        queries = [f"who is {titles[e]}" for e in hops[:-1]]
        retrieved = [e for e in hops[:-1] for e in (e, noise[1])]
        local = {e: titles[e] for e in set(retrieved) | set(c)}
        trajectories.append((queries, retrieved, local, titles[hops[-1]]))
    t0 = time.perf_counter()
    paths = [extract_path(*t) for t in trajectories]
    extract_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    passed = sum(graph.path_support(p).passed for p in paths)
    score_s = time.perf_counter() - t0
    return {"chains": n_chains, "trajectories": n_trajectories, "index_pairs": len(graph),
            "index_build_s": round(build_s, 3), "extract_s": round(extract_s, 3), "score_s": round(score_s, 3),
            "path_support_per_s": round(n_trajectories / score_s),
            "extract_and_score_per_s": round(n_trajectories / (extract_s + score_s)),
            "pass_rate": round(passed / n_trajectories, 3)}


def bench_writeback(n_chains: int = 2000, n_items: int = 4000, seed: int = 0) -> dict:
    """Merge ``n_items`` verified trajectories (3 passages each) into a fresh in-memory store holding
    ``n_chains`` 2-hop chains, then replay the same round (every row is a duplicate); report
    evidence records/s of the first pass."""
    import pandas as pd

    from workbench import store
    from workbench.kg.pool import chain_hash
    from workbench.method.memory import ChainView, RetrievedPassage, WriteBackItem, write_back

    rng, titles, chains = _synthetic_pool(n_chains, seed)
    con = store.connect(":memory:")
    con.register("_e", pd.DataFrame({"entity_id": list(titles), "title": list(titles.values())}))
    con.execute("INSERT INTO entities SELECT entity_id, title, 'thing', 'entity', 'bench' FROM _e")
    con.unregister("_e")
    views = [ChainView(i, chain_hash([titles[e] for e in c]), c, [titles[e] for e in c], ["linked to"] * 2,
                       [""] * 3) for i, c in enumerate(chains)]
    with store.registered(con, "_c", pd.DataFrame({"chain_id": range(len(views)), "hash": [v.hash for v in views]})):
        con.execute("INSERT INTO chains SELECT chain_id, hash, 2, NULL, 0, 'walk', NULL FROM _c")
    nodes = [(v.chain_id, pos, e, "linked to" if pos < 2 else None) for v in views for pos, e in enumerate(v.entity_ids)]
    with store.registered(con, "_n", pd.DataFrame(nodes, columns=["chain_id", "position", "entity_id", "relation"])):
        con.execute("INSERT INTO chain_nodes SELECT * FROM _n")
    items = []
    for t in range(n_items):
        v = views[int(rng.integers(len(views)))]
        # 70% walk their originating chain; the rest traverse it backwards, a new sequence
        path = v.entity_ids if rng.random() < 0.7 else v.entity_ids[::-1]
        passages = [RetrievedPassage(int(t * 3 + k), path[k % len(path)],
                                     f"{titles[path[k % len(path)]]} is linked to {titles[path[(k + 1) % len(path)]]}.")
                    for k in range(3)]
        items.append(WriteBackItem(t, v, 1, 0.9, list(path), passages))
    t0 = time.perf_counter()
    first = write_back(con, "bench", 0, items)
    first_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    replay = write_back(con, "bench", 0, items)
    replay_s = time.perf_counter() - t0
    orphans = con.execute("SELECT count(*) FROM evidence WHERE chain_id NOT IN (SELECT chain_id FROM chains)").fetchone()[0]
    if orphans:
        raise RuntimeError(f"bench_writeback: {orphans} evidence rows point to no chain")
    return {"items": n_items, "evidence_written": first["merged_evidence"], "new_chains": first["new_chains"],
            "writeback_s": round(first_s, 3), "writeback_per_s": round(first["merged_evidence"] / first_s),
            "replay_s": round(replay_s, 3), "replay_written": replay["merged_evidence"],
            "replay_skipped": replay["skipped_duplicates"]}


def bench_overhead(con, preset: str = "smoke", rounds: int = 1, model=None) -> dict:
    """CoEvoKG's round time over a Search-R1 round with the same solver rollouts (one store, the
    open connection ``con``, which gets the runs and is closed; one base, the same seed).
    Validation is excluded: both methods pay it equally."""
    from workbench.method.train import train

    try:
        seconds = {}
        for method in ("search_r1", "coevokg"):
            rows = train(con, run=f"bench-{method}", method=method, preset=preset, steps=rounds, model=model,
                         progress=False, log=None, overwrite=True)  # the bench's own runs
            seconds[method] = sum(v for r in rows for k, v in r.items()
                                  if k.startswith("time_") and k != "time_validation") / len(rows)
    finally:
        con.close()
    return {"coevokg_round_s": seconds["coevokg"], "search_r1_round_s": seconds["search_r1"],
            "overhead_vs_search_r1": seconds["coevokg"] / seconds["search_r1"]}


def bench_loop(db: str | None = None, preset: str = "smoke") -> dict:
    """``workbench bench loop --preset P [--db PATH]``: CoEvoKG's per-round time relative to a
    Search-R1 round with the same number of solver rollouts, path-support scoring rate, write-back
    rate. The two runs train in memory: on the preset's TinyWorld, or on an in-memory copy of the
    store ``db`` (``bench.store``: the user's store is never written).

    Example:
        >>> r = bench_loop(preset="smoke")  # doctest: +SKIP
        >>> sorted(r)[:2]  # doctest: +SKIP
        ['coevokg_round_s', 'overhead_vs_search_r1']
    """
    con, where = bench_store(db, preset, copy=True)  # first: a bad --db fails before any timing
    ps = bench_path_support()
    wb = bench_writeback()
    overhead = bench_overhead(con, preset)
    return {**overhead, "db": where, "path_support_per_s": ps["path_support_per_s"], "writeback_per_s": wb["writeback_per_s"],
            "preset": preset, "path_support": ps, "writeback": wb}
