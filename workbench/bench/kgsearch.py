"""``workbench bench kgsearch``: DynaSearcher's KG search against document search, in one run.

The same entity names (the subjects of TinyWorld's single-hop questions, each question as the
filter's context) are searched with the KG tool (``search.kg_search.KGSearch``: linking, triples,
overlap filter) and with BM25 document search, in-process and through the retrieval server on
loopback (``/kg_search`` and ``/retrieve`` of one server), every cache off. Per path: queries/s
for one batched call of ``batch`` queries and for one call per query. A third of the names carry
one dropped letter, so the fuzzy path is timed too (``fuzzy_share``; ``linked`` counts the names
that found an entity). Ratios are within this run: ``kg_vs_doc`` (KG queries/s over document
queries/s, same path), ``server_vs_in_process`` (per tool).

Example (CLI):
    workbench bench kgsearch --preset tiny [--db data/tiny.duckdb]
"""

from __future__ import annotations

import os
import time

from workbench.bench.store import bench_store


def bench_names(con, batch: int) -> tuple[list[str], list[str]]:
    """(entity names, questions): single-hop subjects, every third with one letter dropped, cycled
    to ``batch`` with a numbered question so no two requests are equal.

    Example:
        >>> from workbench import store
        >>> from workbench.kg.tinyworld import build_world
        >>> con = store.connect(":memory:"); _ = build_world(con, preset="smoke")
        >>> names, questions = bench_names(con, 4)
        >>> len(names), len(questions)
        (4, 4)
    """
    rows = con.execute("SELECT q.question, e.title FROM questions q JOIN entities e ON e.entity_id = q.chain[1] "
                       "WHERE q.dataset = 'tinyworld' AND q.family = 'single_hop' ORDER BY q.question_id").fetchall()
    if not rows:
        raise ValueError("the store holds no 'tinyworld' single_hop questions: build the world first")
    names, questions = [], []
    for i in range(batch):
        question, title = rows[i % len(rows)]
        cut = len(title) // 2
        names.append(title[:cut] + title[cut + 1:] if i % 3 == 2 and len(title) > 4 else title)
        questions.append(question + (f" ({i // len(rows)})" if i >= len(rows) else ""))
    return names, questions


def _timed(call, items: list, single: bool) -> float:
    start = time.perf_counter()
    if single:
        for item in items:
            call([item])
    else:
        call(items)
    return time.perf_counter() - start


def _rates(kg_call, doc_call, names: list[str], questions: list[str]) -> dict:
    """Batched and single queries/s of the KG tool and of document search, and their ratios."""
    pairs = list(zip(names, questions))
    kg = lambda items: kg_call([n for n, _ in items], [q for _, q in items])  # noqa: E731
    doc = lambda items: doc_call([n for n, _ in items])  # noqa: E731
    kg(pairs[:8]), doc(pairs[:8])  # warm-up
    out = {}
    for name, call in (("kg", kg), ("doc", doc)):
        out[f"{name}_batched_qps"] = len(pairs) / _timed(call, pairs, single=False)
        out[f"{name}_single_qps"] = len(pairs) / _timed(call, pairs, single=True)
    out["kg_vs_doc_batched"] = out["kg_batched_qps"] / out["doc_batched_qps"]
    out["kg_vs_doc_single"] = out["kg_single_qps"] / out["doc_single_qps"]
    return out


def bench_kgsearch(db: str | None = None, preset: str = "tiny", batch: int = 256) -> dict:
    """KG search vs document search speed, in-process and through the server (module doc), over
    the ``preset``'s TinyWorld built in memory, or the store ``db`` read-only (``bench.store``).

    Example:
        >>> r = bench_kgsearch(preset="smoke", batch=16)  # doctest: +SKIP
        >>> r["in_process"]["kg_batched_qps"] > 0  # doctest: +SKIP
        True
    """
    from workbench.search.client import RemoteKGSearch, RemoteRetriever
    from workbench.search.kg_search import KGSearch
    from workbench.search.server import running_server
    from workbench.search.tool import SearchTool

    if int(batch) < 8:
        raise ValueError(f"--batch must be at least 8, got {batch}")
    con, where = bench_store(db, preset)
    try:
        names, questions = bench_names(con, int(batch))
        t0 = time.perf_counter()
        kg = KGSearch(con, cache=False)
        kg_open = time.perf_counter() - t0
        t0 = time.perf_counter()
        doc = SearchTool(con, index="bm25", topk=3, cache=False)
        doc_open = time.perf_counter() - t0
        hits = kg.search(names, questions)
        out = {"db": where, "built_world": where.startswith(":memory:"), "batch": len(names), "load_avg_1min": os.getloadavg()[0],
               "entities": len(kg.titles), "edges": kg.n_edges, "passages": len(doc.corpus),
               "kg_open_seconds": kg_open, "doc_open_seconds": doc_open,
               "fuzzy_share": sum(i % 3 == 2 for i in range(len(names))) / len(names),
               "linked": sum(h.entity_id is not None for h in hits) / len(hits),
               "in_process": _rates(kg.search, lambda qs: doc.search(qs, 3), names, questions)}
        with running_server(doc, kg=kg) as url:
            remote_kg, remote_doc = RemoteKGSearch(url), RemoteRetriever(url, cache=False)
            out["server"] = _rates(remote_kg.search, lambda qs: remote_doc.search(qs, 3), names, questions)
        for tool in ("kg", "doc"):
            for mode in ("batched", "single"):
                key = f"{tool}_{mode}_qps"
                out["server"][f"{tool}_{mode}_server_vs_in_process"] = out["server"][key] / out["in_process"][key]
        return out
    finally:
        con.close()
