"""The pipeline on real text beside TinyWorld (issue 45): import, walks, filters, chain pool
statistics, and retrieval recall of BM25, dense and hybrid search on the hand-written questions.

    PYTHONPATH=$PWD .venv/bin/python scripts/real_text_report.py --out /tmp/real-text

Reads the converted sample (``workbench data wiki-sample``; default ``data/wiki_sample``), imports it
into ``OUT/wiki.duckdb`` and builds TinyWorld at the same preset in ``OUT/tinyworld.duckdb`` (both
reused on a rerun), builds G_0 in each with the preset's walk settings, and prints two markdown
tables (source and pool, side by side; recall at 1/3/10 per index, and each index's questions won and
lost against BM25 at 1/3/10) and ``OUT/report.json``. ``--recall-only``: recall on ``OUT/wiki.duckdb``
as it is (e.g. a store with the wiki-18 file imported alone), no import and no pools. The hybrid
runs at the config's defaults (``search.fusion``, chosen on a development set by
``scripts/hybrid_dev.py``, never on these questions) unless ``--set`` says otherwise.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True, help="working folder (the two stores and report.json)")
    p.add_argument("--wiki", default=None, help="converted sample folder (default data/wiki_sample)")
    p.add_argument("--questions", default="data/wiki_questions/questions.jsonl", help="hand-written questions")
    p.add_argument("--preset", default="tiny", help="preset of TinyWorld's size and of the walk settings (default tiny)")
    p.add_argument("--indexes", default="bm25,dense,hybrid", help="indexes to measure recall of ('' for none)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="SECTION.FIELD=VALUE",
                   help="config override (e.g. search.rrf_k=60, pool.walks=5000)")
    p.add_argument("--recall-only", action="store_true",
                   help="only recall, on OUT/wiki.duckdb as it is (no import, no TinyWorld, no pools)")
    args = p.parse_args(argv)

    import yaml

    from workbench import config, store
    from workbench.kg import wiki_sample
    from workbench.kg.pool import build_pool
    from workbench.kg.pool_stats import pool_stats, source_stats
    from workbench.kg.tinyworld import build_world
    from workbench.search.qa_recall import KS, read_questions, recall_at
    from workbench.search.retriever import make_retriever

    sets = {k: yaml.safe_load(v) for k, v in (kv.split("=", 1) for kv in args.overrides)}
    cfg = config.preset(args.preset, **sets)
    folder = Path(args.wiki) if args.wiki else wiki_sample.default_folder()
    if not args.recall_only and not wiki_sample.is_converted(folder):
        sys.exit(f"--wiki {folder}: no converted sample; run `workbench data wiki-sample` first")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    report = {"preset": args.preset, "overrides": sets, "sources": {}, "pools": {}, "recall": {}}
    for name in () if args.recall_only else ("tinyworld", "wiki"):
        con = store.connect(str(out / f"{name}.duckdb"))
        try:
            start = time.perf_counter()
            if name == "wiki":
                report["imports"] = wiki_sample.import_sample(con, folder)
            elif not con.execute("SELECT count(*) FROM entities").fetchone()[0]:
                build_world(con, preset=args.preset, seed=0)
            build = build_pool(con, cfg.pool.walks, cfg.pool.min_hops, cfg.pool.max_hops, seed=cfg.pool.seed,
                               functional_only=cfg.pool.functional_only, unique_grounding=cfg.pool.unique_grounding)
            report["sources"][name] = source_stats(con)
            report["pools"][name] = {**pool_stats(con, build), "seconds": round(time.perf_counter() - start, 1)}
        finally:
            con.close()
    questions = read_questions(args.questions)
    con = store.connect(str(out / "wiki.duckdb"), read_only=True)
    try:
        for index in filter(None, args.indexes.split(",")):
            start = time.perf_counter()
            with make_retriever(con, config.preset(args.preset, **{**sets, "search.index": index}).search) as tool:
                report["recall"][index] = {**recall_at(tool, questions, KS), "seconds": round(time.perf_counter() - start, 1)}
    finally:
        con.close()
    if "bm25" in report["recall"]:
        base = report["recall"]["bm25"]["ranks"]
        for row in report["recall"].values():
            row["vs_bm25"] = {f"@{k}": won_lost(row["ranks"], base, k) for k in KS}
    (out / "report.json").write_text(json.dumps(report, indent=1))
    for title, table in (("source", report["sources"]), ("G_0", report["pools"])) if report["pools"] else ():
        keys = list(next(iter(table.values())))
        print(f"\n| {title} | " + " | ".join(table) + " |\n|---|" + "---|" * len(table))
        for key in keys:
            print(f"| {key} | " + " | ".join(str(table[n].get(key, "")) for n in table) + " |")
    if report["recall"]:
        cols = [f"recall@{k}" for k in KS] + [f"page_recall@{k}" for k in KS]
        print(f"\n| index ({len(questions)} questions) | " + " | ".join(cols) + " |\n|---|" + "---|" * len(cols))
        for index, row in report["recall"].items():
            print(f"| {index} | " + " | ".join(f"{row[c]:.3f}" for c in cols) + " |")
        for index, row in report["recall"].items():
            print(f"{index} first gold ranks: {row['ranks']}")
            if "vs_bm25" in row and index != "bm25":
                print(f"{index} against bm25, questions won / lost: " +
                      ", ".join(f"{at} {w} / {lo}" for at, (w, lo) in row["vs_bm25"].items()))
    return 0


def won_lost(ranks: list, base: list, k: int) -> tuple[int, int]:
    """Questions with a gold passage in the top ``k`` here but not in ``base``, and the reverse.

    Example:
        >>> won_lost([1, 4, None], [2, 1, 1], k=1)
        (1, 2)
    """
    inside = [r is not None and r <= k for r in ranks]
    before = [r is not None and r <= k for r in base]
    return sum(a and not b for a, b in zip(inside, before)), sum(b and not a for a, b in zip(inside, before))


if __name__ == "__main__":
    sys.exit(main())
