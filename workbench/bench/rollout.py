"""``workbench bench rollout``: the policy's rollout speed (issue 4).

For each batch size, (1) generated tokens/s of one sampled turn (temperature 0.6, top-p 0.95,
``rollout.max_new_tokens`` new tokens, KV cache, HF backend) against the same turn with
Transformers' own attention rule, which copies the KV cache per query head (``policy.attention``;
the same tokens, checked; each timed twice, alternating, the faster kept;
``speedup_vs_copying_kv``), and (2) questions/s of full multi-turn rollouts
(``policy.rollout.rollout``, one sample per question, the preset's turn and length limits) against
the real ``SearchTool`` over the preset's TinyWorld built in memory (or the store ``db``,
read-only). The model is randomly initialised (a speed figure does not need a trained model; pass
``model`` to time a trained one instead). A random model almost never writes ``</search>``, so
the retrieval share measured in its rollouts is near 0 and says little; the bench therefore also
reports ``retrieval_share_if_every_row_searches``: the time of one batched search for every row
divided by (that time + one generated turn), at each batch size, which is the share a model that
searches in every turn would see. ``threads`` sets torch's CPU threads: on a loaded machine, 2
threads spin against other processes and can be 10x slower than 1.

Example:
    >>> r = bench_rollout(preset="smoke", batch_sizes=[1])  # doctest: +SKIP
    >>> sorted(r)[:3]  # doctest: +SKIP
    ['backbone', 'batch_sizes', 'model']
"""

from __future__ import annotations

import sys
import time

from workbench.bench.store import bench_store


DEFAULT_BATCH_SIZES = (1, 4, 16, 32, 64, 256)


def bench_rollout(preset: str = "tiny", db: str | None = None, model: str | None = None,
                  threads: int | None = None, batch_sizes=DEFAULT_BATCH_SIZES) -> dict:
    """Tokens/s and questions/s by batch size, and the share of rollout time spent searching
    (see the module docstring); ``db``: a store with a world, read-only (default: the preset's
    built in memory; ``bench.store``).

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
