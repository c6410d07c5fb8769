"""``workbench bench rollout``: generation and rollout speed of the tiny backbone on this machine.

Measures, for each batch size, (1) generated tokens/s of one sampled turn (temperature 0.6,
top-p 0.95, ``rollout.max_new_tokens`` new tokens, KV cache, HF backend) and (2) questions/s of
full multi-turn rollouts (``method.rollout.rollout``, one sample per question, the preset's
turn and length limits) against the real ``SearchTool`` over a TinyWorld store (``--db``, or a
world built in memory when the store does not exist).

The model is randomly initialised (a speed figure does not need a trained model; pass ``--model``
to time a trained one instead). A random model almost never writes ``</search>``, so the
retrieval share measured in its rollouts is near 0 and says little; the bench therefore also
reports ``retrieval_share_if_every_row_searches``: the time of one batched search for every
row divided by (that time + one generated turn), at each batch size, which is the share a
model that searches in every turn would see. ``--threads`` sets torch's CPU threads: on a loaded
machine, 2 threads spin against other processes and can be 10x slower than 1.

Example:
    >>> import argparse
    >>> r = bench_rollout(argparse.Namespace(preset="smoke", db=None, batch_sizes=[1]))  # doctest: +SKIP
    >>> sorted(r)[:3]  # doctest: +SKIP
    ['backbone', 'batch_sizes', 'model']
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

DEFAULT_BATCH_SIZES = (1, 4, 16, 32, 64, 256)


def _world(args, cfg):
    """An open store with a world: ``--db`` when it exists, else a TinyWorld built in memory."""
    from workbench import store
    from workbench.commands import db_path

    db = db_path(args)
    if Path(db).exists():
        con = store.connect(db, read_only=True)
        if con.execute("SELECT count(*) FROM passages").fetchone()[0]:
            return con, db
        con.close()
    from workbench.kg.tinyworld import build_world

    con = store.connect(":memory:")
    build_world(con, preset=args.preset, seed=cfg.world.seed)
    return con, f":memory: (TinyWorld, preset {args.preset}, built because {db} has no passages)"


def _policy(args, cfg, con):
    from workbench.policy import protocol
    from workbench.policy.model import Policy, tiny_model
    from workbench.policy.tokenizer import train_tokenizer

    if getattr(args, "model", None):
        return Policy.load(args.model, device="cpu"), args.model
    texts = [t for (t,) in con.execute("SELECT text FROM passages ORDER BY passage_id LIMIT 20000").fetchall()]
    tok = train_tokenizer([protocol.SOLVER_INSTRUCTION, *texts], cfg.backbone.vocab_size)
    return Policy(tiny_model(cfg.backbone, tok, cfg.backbone.seed), tok, device="cpu"), "random init (tiny_model)"


def bench_rollout(args) -> dict:
    """Tokens/s and questions/s by batch size, and the share of rollout time spent searching.

    Example: see the module docstring.
    """
    import torch

    from workbench.config import preset
    from workbench.method.rollout import rollout
    from workbench.policy import protocol
    from workbench.search.tool import SearchTool

    cfg = preset(args.preset)
    if getattr(args, "threads", None):
        torch.set_num_threads(int(args.threads))  # on a shared 2-core machine 1 thread avoids spinning
    sizes = [int(b) for b in (getattr(args, "batch_sizes", None) or DEFAULT_BATCH_SIZES)]
    con, source = _world(args, cfg)
    policy, model_name = _policy(args, cfg, con)
    tool = SearchTool(con, index=cfg.search.index, topk=cfg.search.topk, cache=False)
    questions = [q for (q,) in con.execute(
        "SELECT question FROM questions ORDER BY question_id LIMIT ?", [max(sizes)]).fetchall()]
    if not questions:
        raise ValueError(f"bench rollout: the store {source} has no questions")
    questions = (questions * (max(sizes) // len(questions) + 1))[:max(sizes)]
    r = cfg.rollout
    prompts = [policy.encode(policy.chat_prompt(protocol.solver_user_message(q))) for q in questions]
    policy.generate_ids(prompts[:2], max_new_tokens=4, temperature=r.temperature, top_p=r.top_p)  # warm-up

    out = {"batch_sizes": sizes, "tokens_per_s": [], "questions_per_s": [],
           "retrieval_share_if_every_row_searches": []}
    gen_total = search_total = 0.0
    for b in sizes:
        start = time.perf_counter()
        gens = policy.generate_ids(prompts[:b], max_new_tokens=r.max_new_tokens, temperature=r.temperature,
                                   top_p=r.top_p, stop=protocol.STOP_STRINGS, seed=0)
        turn_s = time.perf_counter() - start
        out["tokens_per_s"].append(round(sum(len(g.token_ids) for g in gens) / turn_s, 1))
        start = time.perf_counter()
        tool.search(questions[:b], cfg.search.topk)
        search_s = time.perf_counter() - start
        out["retrieval_share_if_every_row_searches"].append(round(search_s / (search_s + turn_s), 4))

        start = time.perf_counter()
        trajs = rollout(policy, tool, questions[:b], 1, max_turns=r.max_turns, topk=cfg.search.topk,
                        temperature=r.temperature, top_p=r.top_p, max_new_tokens=r.max_new_tokens,
                        max_total_tokens=r.max_total_tokens, seed=0)
        out["questions_per_s"].append(round(b / (time.perf_counter() - start), 3))
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
        "max_new_tokens": r.max_new_tokens, "max_turns": r.max_turns, "preset": args.preset,
    })
    return out
