"""``workbench bench loop`` and ``workbench bench rollout``: the method's speed figures (issues 3-4).

``bench_loop``:

* ``path_support_per_s``: trajectories/s scored by Eq. 9 against the precomputed G_t index (M per
  step, S_path, pass flag); goal >= 10,000 on CPU. ``extract_and_score_per_s`` adds Eq. 8's
  deterministic extraction from queries and retrieved entities.
* ``writeback_per_s``: evidence records/s merged by verified write-back (section 3.4, one
  transaction, set-based); goal >= 10,000.
* ``overhead_vs_search_r1``: a CoEvoKG round's time over a Search-R1 round's.

Synthetic inputs (ours, seeded): a pool of 3-entity chains over a world of named entities, each
node carrying its passage, and trajectories that follow a chain, take a shortcut, or wander.

``bench_rollout``: for each batch size, (1) generated tokens/s of one sampled turn (temperature
0.6, top-p 0.95, ``rollout.max_new_tokens`` new tokens, KV cache, HF backend) against the same
turn with Transformers' own attention rule, which copies the KV cache per query head
(``policy.attention``; the same tokens, checked; each timed twice, alternating, the faster kept;
``speedup_vs_copying_kv``), and (2) questions/s
of full multi-turn rollouts (``method.rollout.rollout``, one sample per question, the preset's
turn and length limits) against the real ``SearchTool`` over the preset's TinyWorld built in
memory (or the store ``db``, read-only). The model is randomly initialised (a speed figure does
not need a trained model; pass ``model`` to time a trained one instead). A random model almost
never writes ``</search>``, so the retrieval share measured in its rollouts is near 0 and says
little; the bench therefore also reports ``retrieval_share_if_every_row_searches``: the time of
one batched search for every row divided by (that time + one generated turn), at each batch size,
which is the share a model that searches in every turn would see. ``threads`` sets torch's CPU
threads: on a loaded machine, 2 threads spin against other processes and can be 10x slower than 1.

Example:
    >>> r = bench_path_support(n_chains=200, n_trajectories=2000, seed=0)
    >>> r["trajectories"], r["path_support_per_s"] > 0
    (2000, True)
    >>> r = bench_rollout(preset="smoke", batch_sizes=[1])  # doctest: +SKIP
    >>> sorted(r)[:3]  # doctest: +SKIP
    ['backbone', 'batch_sizes', 'model']
"""

from __future__ import annotations

import sys
import time

import numpy as np

from workbench.kg.bench_store import bench_store

DEFAULT_BATCH_SIZES = (1, 4, 16, 32, 64, 256)


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
    store ``db`` (``kg.bench_store``: the user's store is never written).

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


# ----------------------------------------------------------------------------- rollout speed

def bench_rollout(preset: str = "tiny", db: str | None = None, model: str | None = None,
                  threads: int | None = None, batch_sizes=DEFAULT_BATCH_SIZES) -> dict:
    """Tokens/s and questions/s by batch size, and the share of rollout time spent searching
    (see the module docstring); ``db``: a store with a world, read-only (default: the preset's
    built in memory; ``kg.bench_store``).

    Example: see the module docstring.
    """
    import torch

    from workbench.config import preset as get_preset
    from workbench.policy import protocol
    from workbench.search.tool import SearchTool

    cfg = get_preset(preset)
    if threads:
        torch.set_num_threads(int(threads))  # on a shared 2-core machine 1 thread avoids spinning
    sizes = [int(b) for b in batch_sizes]
    con, source = bench_store(db, preset)
    policy, model_name = _policy(cfg, con, model)
    tool = SearchTool(con, index=cfg.search.index, topk=cfg.search.topk, cache=False)
    questions = [q for (q,) in con.execute(
        "SELECT question FROM questions ORDER BY question_id LIMIT ?", [max(sizes)]).fetchall()]
    if not questions:
        raise ValueError(f"bench rollout: the store {source} has no questions")
    questions = (questions * (max(sizes) // len(questions) + 1))[:max(sizes)]
    r = cfg.rollout
    prompts = [policy.encode(policy.chat_prompt(protocol.solver_user_message(q))) for q in questions]
    policy.generate_ids(prompts[:2], max_new_tokens=4, temperature=r.temperature, top_p=r.top_p)  # warm-up

    out = {"batch_sizes": sizes, "tokens_per_s": [], "tokens_per_s_copying_kv": [], "speedup_vs_copying_kv": [],
           "questions_per_s": [], "retrieval_share_if_every_row_searches": []}
    gen_total = search_total = 0.0
    for b in sizes:
        timed, trajs = _time_batch(cfg, policy, tool, prompts[:b], questions[:b])
        for key, value in timed.items():
            out[key].append(value)
        print(f"bench rollout: batch {b}: {out['tokens_per_s'][-1]} tokens/s, "
              f"{out['questions_per_s'][-1]} questions/s", file=sys.stderr, flush=True)
        gen_total += sum(t.gen_seconds for t in trajs)
        search_total += sum(t.search_seconds for t in trajs)
    con.close()
    out["retrieval_share"] = round(search_total / (gen_total + search_total), 4) if gen_total else None
    out.update({
        "model": model_name, "params": sum(p.numel() for p in policy.model.parameters()),
        "backbone": f"hidden {cfg.backbone.hidden_size}, layers {cfg.backbone.layers}, vocab {len(policy.tokenizer)}",
        "store": source, "index": cfg.search.index, "torch_threads": torch.get_num_threads(),
        "max_new_tokens": r.max_new_tokens, "max_turns": r.max_turns, "preset": preset,
    })
    return out


def _time_batch(cfg, policy, tool, prompts: list, questions: list[str]) -> tuple[dict, list]:
    """One batch: a generated turn (tokens/s), one search per row (its share of search + turn),
    full rollouts (questions/s). Returns those figures and the rollouts' trajectories."""
    from workbench.policy import attention, protocol
    from workbench.policy.rollout import rollout

    r, b = cfg.rollout, len(questions)

    def turn():
        start = time.perf_counter()
        out = policy.generate_ids(prompts, max_new_tokens=r.max_new_tokens, temperature=r.temperature,
                                  top_p=r.top_p, stop=protocol.STOP_STRINGS, seed=0)
        return out, time.perf_counter() - start

    # the baseline: Transformers' rule, the KV cache copied per query head (the same rule on CUDA,
    # so timed on the CPU only); each path timed twice, alternating, and its faster time kept, so
    # neither pays the other's first-call costs
    times = {"grouped": [], "copying": []}
    for _ in range(2 if policy.device.type == "cpu" else 1):
        if policy.device.type == "cpu":
            with attention.copying_kv():
                copied, seconds = turn()
            times["copying"].append(seconds)
        gens, seconds = turn()
        times["grouped"].append(seconds)
    if times["copying"] and [g.token_ids for g in copied] != [g.token_ids for g in gens]:
        raise RuntimeError("bench rollout: the grouped-query path generated other tokens than the copying one")
    turn_s, copied_s = min(times["grouped"]), min(times["copying"], default=None)
    start = time.perf_counter()
    tool.search(questions, cfg.search.topk)
    search_s = time.perf_counter() - start
    start = time.perf_counter()
    trajs = rollout(policy, tool, questions, 1, max_turns=r.max_turns, topk=cfg.search.topk,
                    temperature=r.temperature, top_p=r.top_p, max_new_tokens=r.max_new_tokens,
                    max_total_tokens=r.max_total_tokens, seed=0)
    tokens = sum(len(g.token_ids) for g in gens)
    return {"tokens_per_s": round(tokens / turn_s, 1),
            "tokens_per_s_copying_kv": round(tokens / copied_s, 1) if copied_s else None,
            "speedup_vs_copying_kv": round(copied_s / turn_s, 2) if copied_s else None,
            "retrieval_share_if_every_row_searches": round(search_s / (search_s + turn_s), 4),
            "questions_per_s": round(b / (time.perf_counter() - start), 3)}, trajs


def _policy(cfg, con, model: str | None):
    """The model to time: ``model`` loaded, else a randomly initialised tiny model with a tokenizer
    trained on the store's passages."""
    from workbench.policy import protocol
    from workbench.policy.model import Policy, tiny_model
    from workbench.policy.tokenizer import train_tokenizer

    if model:
        return Policy.load(model, device="cpu"), model
    texts = [t for (t,) in con.execute("SELECT text FROM passages ORDER BY passage_id LIMIT 20000").fetchall()]
    tok = train_tokenizer([protocol.SOLVER_INSTRUCTION, *texts], cfg.backbone.vocab_size)
    return Policy(tiny_model(cfg.backbone, tok, cfg.backbone.seed), tok, device="cpu"), "random init (tiny_model)"
