"""``workbench pool build|export``: the chain pool G_0 by random walks, and G_t as JSON lines."""

from __future__ import annotations

import argparse

from workbench.commands import add_db, db_path, existing_db


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("pool", help="build the chain pool G_0 by random walks; export G_t")
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)

    build = actions.add_parser("build", help="random walks -> filters -> dedup -> G_0 in the store")
    add_db(build)
    build.add_argument("--preset", default="tiny", help="preset whose pool settings are the defaults")
    build.add_argument("--walks", type=int, default=None, help="number of random walks (default: the preset's)")
    build.add_argument("--hops", default=None, help="walk length N or MIN-MAX, e.g. 2-3 (default: the preset's)")
    build.add_argument("--seed", type=int, default=None, help="walk seed (default: the preset's)")
    build.add_argument("--functional-only", action="store_true", default=None,
                       help="Dr. Free: keep only relations marked functional")
    build.add_argument("--unique-grounding", action="store_true", default=None,
                       help="Dr. Free: each next entity must be the only object of (entity, relation)")
    build.add_argument("--retrieval-verify", dest="retrieval_verify", action="store_true", default=None,
                       help="Dr. Free (Fig. 5): the source passage names the first bridge entity and each later "
                            "entity is in the top k of a per-hop retrieval")
    build.add_argument("--hop-ratio", dest="hop_ratio", default=None,
                       help="Dr. Free (Table 7): hop-sampling ratio over the hop range, e.g. 1:1:1 for --hops 2-4")
    build.add_argument("--force", action="store_true",
                       help="rebuild even if runs have attached evidence/candidates to G_0 chains")
    build.set_defaults(func=_build)

    export = actions.add_parser(
        "export", help="write G_t as JSON lines, one chain per line, with its evidence passages",
        description="One JSON object per chain: entities, relations, hash, hops, run, origin, the evidence count and "
                    "(unless --no-passages) `passages`, each evidence row with its position, target (node or edge), "
                    "entity and passage ids, text, source, run and round: the data load_pool gives. Opens the store "
                    "read-only.")
    add_db(export)
    export.add_argument("--preset", default="tiny", help=argparse.SUPPRESS)
    export.add_argument("--run", default=None, help="include this run's write-back (default: G_0 only)")
    export.add_argument("--round", type=int, default=None, help="round t of G_t (default: every round)")
    export.add_argument("--no-passages", dest="passages", action="store_false",
                        help="write the evidence count only, not the passages (a smaller file)")
    export.add_argument("file", help="output .jsonl file (refused when it is the store, or exists without --force)")
    export.add_argument("--force", action="store_true", help="replace FILE when it is already there")
    export.set_defaults(func=_export)


def _build(args: argparse.Namespace) -> int:
    from workbench import config, store
    from workbench.kg.pool import build_pool
    from workbench.search.retriever import pool_retriever
    from workbench.kg.walks import hop_range

    cfg = config.preset(args.preset).pool
    lo, hi = hop_range(args.hops, name="--hops") if args.hops is not None else (cfg.min_hops, cfg.max_hops)
    con = store.connect(db_path(args))
    try:
        verify = cfg.retrieval_verify if args.retrieval_verify is None else True
        result = build_pool(
            con, walks=args.walks if args.walks is not None else cfg.walks, min_hops=lo, max_hops=hi,
            seed=args.seed if args.seed is not None else cfg.seed,
            functional_only=cfg.functional_only if args.functional_only is None else True,
            unique_grounding=cfg.unique_grounding if args.unique_grounding is None else True,
            force=args.force,
            retrieval_verify=verify, hop_ratio=cfg.hop_ratio if args.hop_ratio is None else args.hop_ratio,
            search=pool_retriever(con) if verify else None)
    finally:
        con.close()
    print(f"G_0: {result['chains']} chains from {result['walks']} walks "
          f"({result['rejected']} rejected, {result['evidence']} evidence rows)")
    for reason, count in sorted(result["rejections"].items(), key=lambda kv: -kv[1]):
        print(f"  rejected {reason:<15} {count}")
    return 0


def _export(args: argparse.Namespace) -> int:
    from workbench import store
    from workbench.kg.pool import export_pool

    con = store.connect(existing_db(args, "run `workbench pool build` first"), read_only=True)
    try:
        n = export_pool(con, args.file, run=args.run, round=args.round, passages=args.passages, force=args.force)
    finally:
        con.close()
    print(f"wrote {n} chains{' with their evidence passages' if args.passages else ''} to {args.file}")
    return 0
