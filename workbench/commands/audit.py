"""``workbench audit shortcuts``: seed 002's gold-blind shortcut audit of runs' generated questions (Table 5)."""

from __future__ import annotations

import argparse

from workbench.commands import add_db, existing_db


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("audit", help="audits of generated questions (Dr. Free's shortcut audit)")
    audits = parser.add_subparsers(dest="audit", metavar="AUDIT", required=True)
    p = audits.add_parser(
        "shortcuts", help="share of a run's generated questions answerable from a shortcut context alone",
        description="Seed 002, Table 5: for N generated questions per run, whether a judge answers each from "
                    "the closed-book, source-only, one-shot and single-component contexts alone (gold-blind; a "
                    "match with the gold counts), with Wilson 95%% intervals and one-sided Fisher exact tests "
                    "between runs. One judge for every run.")
    add_db(p)
    p.add_argument("--run", action="append", required=True, help="a run whose generated questions to audit, in "
                   "--db, or RUN@STORE for a run in another store (repeat to compare runs; Fisher tests compare "
                   "each pair)")
    p.add_argument("--n", type=int, default=100, help="questions per run (default 100, as the paper)")
    p.add_argument("--seed", type=int, default=0, help="sampling seed")
    p.add_argument("--judge", default=None, help="judge model, never a checkpoint of an audited run (default: the base "
                   "every run starts from, the preset's warm start or backbone.model)")
    p.add_argument("--preset", default="tiny", help="whose retriever the one-shot shortcut uses")
    p.add_argument("--figure", default="audit_shortcuts", help="figure name under figures/ ('' for none)")
    p.set_defaults(func=run_shortcuts)
    o = audits.add_parser(
        "overlap", help="train-test overlap of runs' generated questions and the seed pool with a test set",
        description="Seed 002, Table 14: per training source, the evaluation questions with a similar Q-A pair in it "
                    "(question Jaccard >= 0.6 over normalised words and a shared normalised answer alias) and those "
                    "it holds exactly.")
    add_db(o)
    o.add_argument("--run", action="append", default=[], help="a run whose generated questions are a training "
                   "source (RUN, or RUN@STORE; repeat for several)")
    o.add_argument("--seed-pool", action="store_true", help="the seed pool (Search-R1's training set) as a source too")
    o.add_argument("--dataset", default="tinyworld", help="questions.dataset of the seed pool and the test set")
    o.add_argument("--split", default="test", help="the evaluation split (default test)")
    o.add_argument("--jaccard", type=float, default=None, help="the similarity threshold (default 0.6, Table 14)")
    o.set_defaults(func=run_overlap)


def run_shortcuts(args: argparse.Namespace) -> int:
    from workbench.method.shortcut_audit import audit_store

    db = existing_db(args) if any("@" not in r for r in args.run) else None  # RUN@STORE names its own store
    out = audit_store(db, args.run, n=args.n, seed=args.seed, judge=args.judge, preset=args.preset)
    shares = out["shares"].copy()
    for col in ("share", "lo", "hi"):
        shares[col] = (100 * shares[col]).round(1)
    print(f"judge: {out['judge']}")
    print(shares.to_string(index=False))
    if len(out["tests"]):
        print("\none-sided Fisher exact p (run's rate below vs's):")
        print(out["tests"].pivot_table(index=["run", "vs"], columns="shortcut", values="p_less").to_string(
            float_format=lambda p: f"{p:.3g}"))
    if args.figure:
        from workbench import figures

        figures.save_fig(figures.shortcut_audit(out["shares"]), args.figure)
    return 0


def run_overlap(args: argparse.Namespace) -> int:
    from workbench import store
    from workbench.method import overlap
    from workbench.method.shortcut_audit import split_run

    if not args.run and not args.seed_pool:
        raise ValueError("audit overlap: name a training source: --run RUN and/or --seed-pool")
    jaccard = overlap.JACCARD_MIN if args.jaccard is None else args.jaccard
    if not 0 < jaccard <= 1:
        raise ValueError(f"--jaccard {args.jaccard}: expected a similarity in (0, 1]")
    db = existing_db(args) if args.seed_pool or any("@" not in r for r in args.run) else None
    sources, evaluation = {}, None
    for spec in args.run + (["<seed pool>"] if args.seed_pool else []):
        run, where = (None, db) if spec == "<seed pool>" else split_run(spec, db)
        con = store.connect(where, read_only=True)
        try:
            sources[run or "seed pool"] = (overlap.run_questions(con, run) if run else
                                           overlap.split_questions(con, args.dataset, "seed"))
            if evaluation is None:
                evaluation = overlap.split_questions(con, args.dataset, args.split)
        finally:
            con.close()
    table = overlap.overlap_table(sources, evaluation, jaccard)
    print(table.to_string(index=False, float_format=lambda x: f"{x:.3f}"))
    return 0
