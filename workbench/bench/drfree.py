"""``workbench bench drfree``: the proposer-side cost of scoring a round's candidates, Dr. Free's
information gain against the difficulty reward's extra solver rollouts, as ratios in one run.

A difficulty reward (Eq. 10, Dr. Zero's pass rate) can score a candidate only after G solver
rollouts of it (multi-turn generation with search); Dr. Free scores it from teacher-forced
likelihoods alone (seed 002: "it removes the need for pass-rate estimation and reduces proposer
training time by over 7x"). On the same policy, store and candidates this times:

* ``info_gain_batched_s`` -- :func:`drfree.batch_information_gain` over all candidates (one
  retrieval batch, padded forwards of ``drfree_micro_batch`` rows), what ``--method drfree`` runs;
* ``info_gain_per_candidate_s`` -- :func:`drfree.information_gain` one candidate at a time (the
  batching's gain);
* ``difficulty_rollouts_s`` -- G rollouts per candidate at the training temperature, what the pass
  rate p_s needs (the baseline), plus the p_s bookkeeping (negligible).

Candidates are one constructed question per G_0 chain ("What is the <r_L> of the <r_1> of <e_1>?",
answer e_L; the form the tests' forced gate uses), so no two share a one-shot retrieval.

Example:
    >>> r = bench_drfree(preset="smoke", candidates=2)  # doctest: +SKIP
    >>> r["speedup_batched_vs_difficulty"] > 1  # doctest: +SKIP
    True
"""

from __future__ import annotations

import time


def _candidates(con, n: int, seed: int) -> list[tuple]:
    from workbench.kg.pool import sample_chains
    from workbench.method.proposer import chain_view

    chains = [chain_view(c) for c in sample_chains(con, n, seed=seed)]
    return [(c, f"What is the {c.relations[-1]} of the {c.relations[0]} of {c.titles[0]}?", c.titles[-1])
            for c in chains]


def bench_drfree(db: str | None = None, preset: str = "smoke", candidates: int = 16, model: str | None = None,
                 seed: int = 0) -> dict:
    """Seconds to score ``candidates`` candidates three ways (module docstring) on the preset's warm
    start (or ``model``) and the ratios against the difficulty reward's rollouts measured in the
    same run. The store: the preset's world and G_0 built in memory (default), ``db`` a store path
    read-only (``bench.store``; it must hold its G_0 pool), or an open connection."""
    import torch

    from workbench.config import preset as get_preset
    from workbench.bench.store import bench_store
    from workbench.kg.pool import build_pool
    from workbench.peers.drfree import info_gain as drfree
    from workbench.policy.model import Policy
    from workbench.policy.rollout import rollout
    from workbench.policy.warmstart import warmstart
    from workbench.search.tool import SearchTool

    if candidates < 1:
        raise ValueError(f"--candidates: expected a number >= 1, got {candidates}")
    cfg = get_preset(preset)
    own = not hasattr(db, "execute")  # a path (or None: in memory), else an open connection
    con, where = bench_store(db, preset) if own else (db, "the given connection")
    try:
        if con.execute("SELECT count(*) FROM chains WHERE run IS NULL").fetchone()[0] == 0:
            if own and not where.startswith(":memory:"):
                raise ValueError(f"--db {db}: the store holds no G_0 pool (workbench pool build --db {db}), or leave "
                                 "--db out to build the preset's world in memory")
            build_pool(con, cfg.pool.walks, cfg.pool.min_hops, cfg.pool.max_hops, seed=cfg.pool.seed)
        policy = Policy.load(model or warmstart(con, preset=cfg, seed=cfg.backbone.seed, log=lambda *_: None))
        search = SearchTool(con, index=cfg.search.index, topk=cfg.search.topk, cache=False)
        items = _candidates(con, candidates, seed)
        r, m = cfg.rollout, cfg.method
        drfree.batch_information_gain(policy, items[:1], search)  # warm-up (allocator, index pages)
        torch.manual_seed(seed)
        t0 = time.perf_counter()
        batched = drfree.batch_information_gain(policy, items, search, micro_batch=m.drfree_micro_batch)
        t1 = time.perf_counter()
        single = [drfree.information_gain(policy, c, q, a, search) for c, q, a in items]
        t2 = time.perf_counter()
        trajectories = rollout(policy, search, [q for _, q, _ in items], m.group_size, max_turns=r.max_turns,
                               topk=cfg.search.topk, temperature=r.temperature, top_p=r.top_p,
                               max_new_tokens=r.max_new_tokens, max_total_tokens=r.max_total_tokens, seed=seed)
        t3 = time.perf_counter()
    finally:
        if own:
            con.close()
    agree = max(abs(a["gain"] - b["gain"]) for a, b in zip(batched, single))
    return {"preset": preset, "candidates": candidates, "group_size": m.group_size, "model": str(model or "warm start"),
            "info_gain_batched_s": round(t1 - t0, 4), "info_gain_per_candidate_s": round(t2 - t1, 4),
            "difficulty_rollouts_s": round(t3 - t2, 4),
            "speedup_batched_vs_difficulty": round((t3 - t2) / (t1 - t0), 2),
            "speedup_per_candidate_vs_difficulty": round((t3 - t2) / (t2 - t1), 2),
            "batching_speedup": round((t2 - t1) / (t1 - t0), 2),
            "rollout_tokens": int(sum(t.n_generated for t in trajectories)),
            "max_gain_difference_batched_vs_single": agree,
            "share_positive_gain": round(sum(b["gain"] > 0 for b in batched) / len(batched), 3)}
