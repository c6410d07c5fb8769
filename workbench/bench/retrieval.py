"""``workbench bench retrieval``: batched vs one-at-a-time search speed, and recall@3 on TinyWorld.

Speed: ``batch`` distinct queries (TinyWorld's single-hop questions; when fewer, cycled with a
numbered suffix) searched in one call vs one call per query, cache off, after a warm-up call;
keys ``batched_qps``, ``single_qps``, ``batched_vs_single`` per index (goal: at least 10x at
batch 256 for dense). ``dense.encode``: the encoder's passages/s against sentence-transformers'
``encode`` over the same (at most 2,048) passages (``encode_speed``). ``torch_threads`` and
``load_avg_1min`` are reported beside them: on a shared, busy CPU a multi-threaded single-query
encode mostly waits for its threads, which inflates the ratio; ``OMP_NUM_THREADS=1`` gives the
uncontended per-core picture.

Recall@k on the single-hop questions (dataset 'tinyworld', family 'single_hop'), our definition:
a question's gold passages are the passages of its chain's entities (subject and answer entity)
whose normalised text contains a normalised gold answer on word boundaries. ``recall_at_k`` is
the share of questions with a gold passage among the top k; ``evidence_recall_at_k`` is the
stricter share whose top k holds a passage of the *subject* that contains the answer (the
passage that states the fact). Questions with no gold passage are left out and counted.

Example (CLI):
    workbench bench retrieval --db data/tiny.duckdb --preset tiny
"""

from __future__ import annotations

import os
import re
import time

from workbench.scoring import normalize_answer


def single_hop_questions(con, dataset: str = "tinyworld", family: str = "single_hop") -> list[tuple]:
    """(question, answers, chain) of every question of one dataset and family, by question_id."""
    return con.execute("SELECT question, answers, chain FROM questions WHERE dataset = ? AND family = ? "
                       "ORDER BY question_id", [dataset, family]).fetchall()


def gold_passages(corpus, answers: list[str], chain: list[int]) -> tuple[set, set]:
    """(gold passage ids, evidence passage ids) of one question, as the module docstring defines.

    Example:
        >>> from workbench.search.index import Corpus
        >>> c = Corpus([1, 2, 3], [7, 7, 8], ["Ada", "Ada", "Rome"], ["Ada was born in Rome.", "Ada sang.", "Rome is old."])
        >>> gold_passages(c, ["Rome"], [7, 8])
        ({1, 3}, {1})
    """
    patterns = [re.compile(r"\b" + re.escape(a) + r"\b") for a in map(normalize_answer, answers) if a]
    chain = list(chain or [])
    gold, evidence = set(), set()
    for pid, ent, text in zip(corpus.passage_ids, corpus.entity_ids, corpus.texts):
        if ent in chain and any(p.search(normalize_answer(text)) for p in patterns):
            gold.add(pid)
            if chain and ent == chain[0]:
                evidence.add(pid)
    return gold, evidence


def recall(tool, questions: list[tuple], k: int = 3) -> dict:
    """Recall@k of gold passages (and of subject evidence) over ``questions``; one batched search."""
    golds = [gold_passages(tool.corpus, answers, chain) for _, answers, chain in questions]
    kept = [(q, g) for (q, _, _), g in zip(questions, golds) if g[0]]
    hits = tool.search([q for q, _ in kept], k)
    found = [{h.passage_id for h in row} for row in hits]
    n = len(kept)
    return {"questions": n, "no_gold_passage": len(questions) - n,
            f"recall_at_{k}": sum(bool(f & g) for f, (_, (g, _)) in zip(found, kept)) / n if n else None,
            f"evidence_recall_at_{k}": sum(bool(f & e) for f, (_, (_, e)) in zip(found, kept)) / n if n else None}


def speed(tool, queries: list[str], batch: int = 256, k: int = 3) -> dict:
    """Queries/s for one batched call of ``batch`` queries vs ``batch`` single-query calls (cache off)."""
    # Distinct strings even when cycling, so neither path can skip duplicates.
    qs = [queries[i % len(queries)] + (f" ({i // len(queries)})" if i >= len(queries) else "") for i in range(batch)]
    tool.use_cache = False
    tool.search(qs[:8], k)  # warm-up: model load, thread pools
    t0 = time.perf_counter()
    tool.search(qs, k)
    batched = time.perf_counter() - t0
    t0 = time.perf_counter()
    for q in qs:
        tool.search([q], k)
    single = time.perf_counter() - t0
    tool.use_cache = True
    return {"batch": batch, "batched_qps": batch / batched, "single_qps": batch / single,
            "batched_vs_single": single / batched}


def encode_speed(encoder, texts: list[str]) -> dict:
    """Passages/s of ``encoder.passages`` (one Rust tokenizer call, numpy padding) against the same
    call through sentence-transformers' ``encode`` (its own tokenisation; the encoder's fallback,
    ``tokens`` None), after a warm-up of each; ``max_abs_diff`` between their vectors."""
    import numpy as np

    tokens, timings = encoder.tokens, {}
    try:
        for name, path in (("encode", None), ("workbench", tokens)):
            encoder.tokens = path
            encoder.passages(texts)
            t0 = time.perf_counter()
            timings[name] = (encoder.passages(texts), time.perf_counter() - t0)
    finally:
        encoder.tokens = tokens
    (theirs, slow), (ours, fast) = timings["encode"], timings["workbench"]
    return {"passages": len(texts), "encode_per_s": len(texts) / slow, "workbench_per_s": len(texts) / fast,
            "workbench_vs_encode": slow / fast, "max_abs_diff": float(np.abs(ours - theirs).max())}


def bench_retrieval(db: str | None = None, preset: str = "tiny", batch: int = 256, threads: int | None = None) -> dict:
    """Speed and recall@3 of BM25 and dense retrieval (see module doc) over the ``preset``'s
    TinyWorld built in memory, or the store ``db`` read-only (``bench.store``). ``batch``:
    queries per batched call; ``threads``: torch's CPU threads (default: torch's). Raises
    ValueError when the store has passages but no TinyWorld single-hop questions.

    Example:
        >>> r = bench_retrieval(preset="smoke", batch=16)  # doctest: +SKIP
        >>> r["bm25"]["recall_at_3"] > 0  # doctest: +SKIP
        True
    """
    from workbench.bench.store import bench_store
    from workbench.search.tool import SearchTool

    con, where = bench_store(db, preset)
    try:
        questions = single_hop_questions(con)
        if not questions:
            raise ValueError(f"{db} holds no 'tinyworld' single_hop questions: "
                             "build the world first (`workbench world`)")
        import torch

        if threads:
            torch.set_num_threads(int(threads))
        # Thread count and load make CPU figures interpretable: on a shared, busy machine a
        # multi-threaded single-query encode mostly waits for its threads.
        out = {"db": where, "single_hop_questions": len(questions),
               "torch_threads": torch.get_num_threads(), "load_avg_1min": os.getloadavg()[0],
               "built_world": where.startswith(":memory:")}
        for kind in ("bm25", "dense"):
            t0 = time.perf_counter()
            tool = SearchTool(con, index=kind, topk=3)
            result = {"open_seconds": time.perf_counter() - t0}
            result.update(speed(tool, [q for q, _, _ in questions], batch=batch))
            result.update(recall(tool, questions, k=3))
            if kind == "dense":
                result["encode"] = encode_speed(tool.index.encoder, tool.corpus.contents[:2048])
            out[kind] = result
        out["passages"] = len(tool.corpus)
        return out
    finally:
        con.close()
