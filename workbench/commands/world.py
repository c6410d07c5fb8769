"""``workbench world`` (build a TinyWorld and its question sets) and ``workbench export-qa``."""

from __future__ import annotations

import argparse

from workbench.commands import add_db, db_path, existing_db


def register(sub: argparse._SubParsersAction) -> None:
    from workbench.config import PRESETS

    p = sub.add_parser("world", help="generate a seeded TinyWorld (entities, articles, anchors, edges, "
                                     "question sets) into the store",
                       description="Generate a TinyWorld and its held-out question sets into the store "
                                   "(replaces the store's world, pool and questions). A store that holds this "
                                   "very world is kept as it is; replacing a world that runs, evaluations or "
                                   "imports use is refused unless --force.")
    p.add_argument("--preset", default="tiny", choices=sorted(PRESETS),
                   help="size preset: smoke ~200 entities, tiny ~2,000 (default: tiny)")
    p.add_argument("--seed", type=int, default=0, help="generator seed (default: 0)")
    p.add_argument("--entities", type=int, default=None, metavar="N",
                   help="number of entities, overriding the preset (any size; 1,000,000 take about 1-2 minutes)")
    p.add_argument("--force", action="store_true",
                   help="replace the store's world even when runs, evaluations or imports use it (their rows "
                        "are deleted, since their ids would point into the new world; run folders are kept)")
    add_db(p)
    p.set_defaults(func=_world)

    q = sub.add_parser("export-qa", help="write one question split in the Search-R1 parquet layout",
                       description="Export questions of one split as Search-R1 parquet (data_source, prompt, "
                                   "ability, reward_model.ground_truth.target, extra_info).")
    q.add_argument("out", metavar="OUT.parquet", help="parquet file to write")
    q.add_argument("--split", default="test", help="seed, val or test (default: test)")
    q.add_argument("--dataset", default="tinyworld",
                   help="questions.dataset to export (default: tinyworld; tw-nq ... tw-bamboogle: a Table 1 benchmark)")
    q.add_argument("--suite", choices=["table1"], default=None,
                   help="table1: the six TinyWorld benchmarks' test questions in one file, data_source per row "
                        "(as Search-R1's test.parquet)")
    q.add_argument("--preset", default="tiny", help="where the suite is not yet in the store: build it at this "
                                                    "preset's world.suite_questions (default: tiny)")
    q.add_argument("--force", action="store_true", help="replace OUT when it is already there")
    add_db(q)
    q.set_defaults(func=_export)


def _world(args: argparse.Namespace) -> int:
    from workbench.kg.tinyworld import build_world

    db = db_path(args)
    s = build_world(db, preset=args.preset, seed=args.seed, n_entities=args.entities, force=args.force)
    done = "kept (the store already holds this world)" if s["kept"] else f"in {s['seconds']:.1f} s"
    print(f"world {args.preset} seed {args.seed}: {s['entities']} entities, {s['passages']} passages, "
          f"{s['anchors']} anchors, {s['edges']} edges, {s['questions']} questions {done} "
          f"(generate {s['generate_s']:.1f} s) -> {db}")
    return 0


def _export(args: argparse.Namespace) -> int:
    from workbench import config, paths, store
    from workbench.kg import benchmarks
    from workbench.kg.qa_sets import export_searchr1_parquet

    db = existing_db(args)
    suite = args.suite is not None or args.dataset in benchmarks.SUITE
    if suite and args.split != "test":
        raise ValueError(f"--split {args.split!r}: the Table 1 benchmarks have a test split only")
    paths.output_file(args.out, "OUT", inputs=[db], force=args.force)  # before the suite is built into the store
    con = store.connect(db, read_only=not suite)  # the suite is built on first use
    try:
        if suite:
            benchmarks.ensure_suite(con, n=config.preset(args.preset).world.suite_questions)
        if args.suite:
            n = benchmarks.export_suite_parquet(con, args.out, force=args.force)
        else:
            n = export_searchr1_parquet(con, args.out, args.split, dataset=args.dataset, force=args.force)
    finally:
        con.close()
    print(f"export-qa: {n} {args.suite or args.dataset}/{args.split} questions -> {args.out}")
    return 0
