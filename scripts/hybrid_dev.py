"""Choose the hybrid's fusion on a development set that is not the hand-written questions (issue 45).

    PYTHONPATH=$PWD .venv/bin/python scripts/hybrid_dev.py --db OUT/wiki.duckdb --out OUT/dev.json

Two synthetic query sets from the converted sample (``data/wiki_sample``), both with one target
page each and both leaving out every page the hand-written questions name (the test set):

* ``desc``: the page's Wikidata short description (the sample keeps it in ``wikidata_info``; the
  importers do not index it, so it is human-written text that is not in the corpus), when it has
  at least 3 words and no other page has the same description;
* ``ict``: one sentence of the page's lead (an inverse cloze query, Lee et al. 2019), drawn at
  random, with at least 8 words once the page's title is removed from it (the title, and the title
  without a parenthesised qualifier, removed case-insensitively; from ``desc`` queries too).

``--n`` pages are drawn for each (seeded), then split in two halves: ``tune`` (the fusion and its
parameters are chosen there) and ``check`` (the chosen one measured once, with paired bootstrap
intervals against BM25). Target: any passage of the page (page recall). Every fusion is
``search.index.fuse`` on the two retrievers' top ``--depth`` hits, computed once per query.
Selection rule (fixed before measuring): the highest mean page R@1 over the two sets' ``tune``
halves (over every store given), ties to the higher mean MRR@10, then to the earlier grid row.
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import re
import sys
import time
from pathlib import Path

import numpy as np

KS = (1, 3, 10)
SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])")


def mask(text: str, title: str) -> str:
    """``text`` without ``title`` (and the title without its parenthesised qualifier), any case.

    Example:
        >>> mask("A scale in music spans an octave; scales vary.", "Scale (music)")
        'A in music spans an octave; scales vary.'
    """
    for name in {title, re.sub(r"\s*\([^)]*\)$", "", title)}:
        if name:
            text = re.sub(r"(?<!\w)" + re.escape(name) + r"(?!\w)", " ", text, flags=re.IGNORECASE)
    return " ".join(text.split())


def dev_queries(kilt_file: Path, exclude: set[str], n: int, seed: int) -> dict[str, list[dict]]:
    """{"desc": [...], "ict": [...]}: up to ``n`` queries each, {"query", "title", "half"} (module docstring)."""
    pages = []
    with gzip.open(kilt_file, "rt", encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            pages.append((row["wikipedia_title"], row["text"][1:], (row.get("wikidata_info") or {}).get("description", "")))
    counts: dict[str, int] = {}
    for _, _, desc in pages:
        counts[desc.lower()] = counts.get(desc.lower(), 0) + 1
    rng = random.Random(seed)
    eligible = {"desc": [], "ict": []}
    for title, paragraphs, desc in pages:
        if title in exclude:
            continue
        query = mask(desc, title)
        if counts[desc.lower()] == 1 and len(query.split()) >= 3:
            eligible["desc"].append((title, [query]))
        sentences = [mask(s, title) for p in paragraphs for s in SENTENCE.split(p.strip())]
        sentences = [s for s in sentences if len(s.split()) >= 8]
        if sentences:
            eligible["ict"].append((title, sentences))
    out = {}
    for name, rows in eligible.items():
        drawn = rng.sample(rows, min(n, len(rows)))
        out[name] = [{"query": rng.choice(options), "title": title, "half": "tune" if i < len(drawn) // 2 else "check"}
                     for i, (title, options) in enumerate(drawn)]
    return out


def grid() -> list[dict]:
    """The fusions measured: BM25 and dense alone (weight 1 and 0), then RRF, weighted RRF and score fusion."""
    weights = [round(float(w), 2) for w in np.arange(0.1, 0.95, 0.1)]
    rows = [{"fusion": "bm25 alone", "weight": 1.0, "rrf_k": 60, "depth": 100},
            {"fusion": "dense alone", "weight": 0.0, "rrf_k": 60, "depth": 100}]
    for depth in (20, 50, 100):
        rows += [{"fusion": "rrf", "weight": w, "rrf_k": c, "depth": depth} for c in (0, 10, 30, 60, 100) for w in weights]
        rows += [{"fusion": f, "weight": w, "rrf_k": 60, "depth": depth} for f in ("minmax", "zscore") for w in weights]
    return rows


def ranks_of(config: dict, lexical, dense, titles: list[str], targets: list[str]) -> np.ndarray:
    """Each query's first rank of a passage of its target page in the fused top 10 (11: none)."""
    from workbench.search.index import fuse

    out = []
    d = config["depth"]
    for lex, den, target in zip(lexical, dense, targets):
        if config["fusion"] in ("bm25 alone", "dense alone"):  # as search.index=bm25 / dense rank
            fused = (lex if config["fusion"] == "bm25 alone" else den)[:max(KS)]
        else:
            fused = fuse(lex[:d], den[:d], max(KS), config["fusion"], config["weight"], config["rrf_k"])
        hit = [i for i, (row, _) in enumerate(fused, start=1) if titles[row] == target]
        out.append(hit[0] if hit else max(KS) + 1)
    return np.asarray(out)


def metrics(ranks: np.ndarray) -> dict:
    out = {f"R@{k}": float(np.mean(ranks <= k)) for k in KS}
    out["MRR@10"] = float(np.mean(np.where(ranks <= max(KS), 1.0 / ranks, 0.0)))
    return out


def paired_bootstrap(a: np.ndarray, b: np.ndarray, k: int, draws: int = 2000, seed: int = 0) -> list[float]:
    """95% percentile interval of R@k(a) - R@k(b) over queries resampled with replacement."""
    rng = np.random.default_rng(seed)
    diff = (a <= k).astype(float) - (b <= k).astype(float)
    means = diff[rng.integers(0, len(diff), size=(draws, len(diff)))].mean(axis=1)
    return [round(float(x), 4) for x in np.percentile(means, [2.5, 97.5])]


def retrieve(db: str, queries: list[str], depth: int):
    """BM25's (score > 0) and dense's top ``depth`` (row, score) lists for every query, and the row titles."""
    from workbench import config, store
    from workbench.search.retriever import make_retriever

    con = store.connect(db, read_only=True)
    try:
        with make_retriever(con, config.preset("tiny", **{"search.index": "hybrid"}).search) as tool:
            brows, bscores = tool.index.bm25.search(queries, depth)
            drows, dscores = tool.index.dense.search(queries, depth)
            titles = list(tool.corpus.titles)
    finally:
        con.close()
    lexical = [[(int(r), float(s)) for r, s in zip(rs, ss) if s > 0 and r >= 0] for rs, ss in zip(brows, bscores)]
    dense = [[(int(r), float(s)) for r, s in zip(rs, ss) if r >= 0] for rs, ss in zip(drows, dscores)]
    return lexical, dense, titles


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--db", action="append", required=True, help="a store with the sample imported (repeatable)")
    p.add_argument("--out", required=True, help="the JSON report")
    p.add_argument("--wiki", default="data/wiki_sample", help="converted sample folder")
    p.add_argument("--questions", default="data/wiki_questions/questions.jsonl", help="the test questions (their pages are left out)")
    p.add_argument("--n", type=int, default=2000, help="queries drawn per set (default 2000)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--depth", type=int, default=100, help="hits retrieved per retriever (the grid's largest depth)")
    args = p.parse_args(argv)

    from workbench.search.qa_recall import read_questions

    exclude = {t for q in read_questions(args.questions) for t in q["titles"]}
    sets = dev_queries(Path(args.wiki) / "kilt_knowledgesource.jsonl.gz", exclude, args.n, args.seed)
    queries = [q for name in sets for q in sets[name]]
    names = np.array([name for name in sets for _ in sets[name]])
    halves = np.array([q["half"] for q in queries])
    report = {"rule": __doc__.split("\n\n", 2)[1:], "sizes": {n: len(v) for n, v in sets.items()},
              "left_out_pages": sorted(exclude), "examples": {n: v[:5] for n, v in sets.items()}, "stores": {}}
    configs = grid()
    table = {}  # (db, config index) -> ranks over all queries
    for db in args.db:
        start = time.perf_counter()
        lexical, dense, titles = retrieve(db, [q["query"] for q in queries], args.depth)
        report["stores"][db] = {"retrieval_s": round(time.perf_counter() - start, 1), "passages": len(titles)}
        for i, cfg in enumerate(configs):
            table[db, i] = ranks_of(cfg, lexical, dense, titles, [q["title"] for q in queries])
        print(f"{db}: {len(queries)} queries, {report['stores'][db]['retrieval_s']} s retrieval", file=sys.stderr)

    def summary(i: int, half: str) -> dict:
        return {db: {name: metrics(table[db, i][(names == name) & (halves == half)]) for name in sets} for db in args.db}

    def score(i: int) -> tuple:
        s = summary(i, "tune")
        cells = [s[db][name] for db in args.db for name in sets]
        return (np.mean([c["R@1"] for c in cells]), np.mean([c["MRR@10"] for c in cells]), -i)

    scored = sorted(range(len(configs)), key=score, reverse=True)
    chosen = scored[0]
    report["grid"] = [{**configs[i], "tune_mean_R@1": round(float(score(i)[0]), 4),
                       "tune_mean_MRR@10": round(float(score(i)[1]), 4)} for i in range(len(configs))]
    report["chosen"] = configs[chosen]
    kinds = {"rrf": lambda c: c["fusion"] == "rrf" and c["weight"] == 0.5,
             "weighted rrf": lambda c: c["fusion"] == "rrf" and c["weight"] != 0.5,
             "minmax": lambda c: c["fusion"] == "minmax", "zscore": lambda c: c["fusion"] == "zscore"}
    best_of = {label: max((i for i, c in enumerate(configs) if is_kind(c)), key=score) for label, is_kind in kinds.items()}
    rows = {"bm25": 0, "dense": 1, "rrf k=60 depth=50 (old default)": next(
        i for i, c in enumerate(configs) if c == {"fusion": "rrf", "weight": 0.5, "rrf_k": 60, "depth": 50}),
        **{f"best {label}": i for label, i in best_of.items()}, "chosen": chosen}
    report["rows"] = {label: {"config": configs[i], "tune": summary(i, "tune"), "check": summary(i, "check")}
                      for label, i in rows.items()}
    report["check_vs_bm25"] = {db: {name: {f"R@{k}": paired_bootstrap(
        table[db, chosen][(names == name) & (halves == "check")], table[db, 0][(names == name) & (halves == "check")], k)
        for k in KS} for name in sets} for db in args.db}
    Path(args.out).write_text(json.dumps(report, indent=1))
    for half in ("tune", "check"):
        print(f"\n{half} half (page R@1 / R@3 / R@10, MRR@10)")
        for db in args.db:
            print(f"\n{db}\n| row | config | " + " | ".join(f"{n} (n={int(((names == n) & (halves == half)).sum())})" for n in sets)
                  + " |\n|---|---|" + "---|" * len(sets))
            for label, i in rows.items():
                s = summary(i, half)[db]
                cells = [f"{s[n]['R@1']:.3f} / {s[n]['R@3']:.3f} / {s[n]['R@10']:.3f}, {s[n]['MRR@10']:.3f}" for n in sets]
                print(f"| {label} | {configs[i]} | " + " | ".join(cells) + " |")
    print("\nchosen:", configs[chosen], "\ncheck half, chosen - bm25, 95% paired bootstrap:",
          json.dumps(report["check_vs_bm25"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
