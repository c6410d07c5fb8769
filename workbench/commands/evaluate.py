"""``workbench eval | compare | report``: greedy evaluation, paired sign test, Table 1 (issue 3)."""

from __future__ import annotations

import argparse

from workbench.commands import add_db, add_set, add_store, existing_db, overrides


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("eval", help="greedy rollouts on a dataset split; store and print EM with 95%% CIs")
    add_db(p)
    p.add_argument("--model", required=True, help="model directory or hub id")
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--dataset", help="dataset name in the store (e.g. tinyworld)")
    what.add_argument("--suite", choices=["table1"],
                      help="table1: the six TinyWorld benchmarks (tw-nq ... tw-bamboogle, built in the store on first "
                           "use), printed in the paper's Table 1 layout with intervals, gains over the store's base "
                           "evaluation and the pooled sign test")
    p.add_argument("--split", default="test")
    p.add_argument("--limit", type=int, default=None, help="at most N questions per family")
    p.add_argument("--index", default=None, help="bm25 or dense (default: the preset's)")
    p.add_argument("--preset", default=None,
                   help="whose budgets (turns, tokens, top-k) to evaluate with: smoke | tiny | paper | paper-7b | paper-8b (default: the model's "
                        "own preset, from its workbench.json; tiny for a model that names none). A preset that "
                        "contradicts the model's is refused. The eval id's backbone ends in -PRESET")
    p.add_argument("--backbone", default=None, help="Table 1 row label (default: from workbench.json)")
    p.add_argument("--method", default=None, help="Table 1 row label (default: from workbench.json)")
    p.add_argument("--backend", choices=["auto", "hf", "vllm"], default=None,
                   help="generation engine (default: the preset's rollout.backend, auto = vLLM on CUDA when installed)")
    p.add_argument("--json", default=None, metavar="FILE",
                   help="with --suite: also write the scores and every question's EM as JSON (scripts/reference_file.py reads it)")
    p.add_argument("--reference", default=None, metavar="FILE",
                   help="with --suite: the Table 1 reference file shown beside (a name in data/reference/ or a path; "
                        "default: the shipped <preset>_table1_* file with the most rounds, if any; 'none' hides it)")
    p.add_argument("--batch-size", type=int, default=64, help="questions per generation batch (default 64)")
    add_set(p)
    p.set_defaults(func=run_eval)

    p = sub.add_parser("compare", help="exact two-sided paired sign test between two evaluations",
                       description="Pairs the two evaluations on the questions both answered (and says how many "
                                   "those are); refuses evaluations made at different presets.")
    add_store(p)
    p.add_argument("eval_a")
    p.add_argument("eval_b")
    p.set_defaults(func=run_compare)

    p = sub.add_parser("report", help="a Table-1-shaped report (rows backbone x method)")
    add_store(p)
    p.add_argument("--dataset", action="append", default=None,
                   help="dataset(s) to include (default: tinyworld, columns = question families)")
    p.add_argument("--split", default="test")
    p.set_defaults(func=run_report)


def run_eval(args: argparse.Namespace) -> int:
    from workbench.evaluate import evaluate, model_preset

    if args.batch_size < 1:
        raise ValueError(f"--batch-size {args.batch_size}: expected a positive number of questions")
    # without --db, the store of the model's preset (data/smoke.duckdb for a smoke model)
    db = existing_db(argparse.Namespace(db=args.db, preset=args.preset or model_preset(args.model)))
    if args.suite:
        return _run_suite(args, db)
    if args.json or args.reference:
        raise ValueError("--json and --reference go with --suite (a single --dataset prints its own summary)")
    eval_id = evaluate(db, args.model, args.dataset, split=args.split, limit=args.limit,
                       index=args.index, preset=args.preset, backbone=args.backbone, method=args.method,
                       backend=args.backend, overrides=overrides(args), batch_size=args.batch_size)
    print(eval_id)
    return 0


def _run_suite(args: argparse.Namespace, db: str) -> int:
    from workbench import store, table1_suite
    from workbench.evaluate import resolve_preset

    if args.split != "test":
        raise ValueError(f"--split {args.split!r}: the suite's benchmarks have a test split only")
    con = store.connect(db)
    try:
        preset = resolve_preset(args.model, args.preset, con)
        ref = table1_suite.reference_for(args.reference, preset)  # a bad name fails before the slow part
        ids = table1_suite.evaluate_suite(con, args.model, args.suite, limit=args.limit, preset=preset,
                                          index=args.index, backbone=args.backbone, method=args.method,
                                          backend=args.backend, overrides=overrides(args), batch_size=args.batch_size)
        backbone, method = table1_suite.model_labels_for(args.model, preset, args.backbone, args.method)
        res, text, _ = table1_suite.report(con, ids, args.model, backbone, method)
    finally:
        con.close()
    print(text)
    if ref is not None:
        print(table1_suite.format_reference(ref))
    if args.json:
        table1_suite.write_json(args.json, res)
        print(f"wrote {args.json}")
    return 0


def run_compare(args: argparse.Namespace) -> int:
    from workbench import store
    from workbench.evaluate import compare

    con = store.connect(existing_db(args), read_only=True)
    try:
        c = compare(con, args.eval_a, args.eval_b)
    finally:
        con.close()
    t = c.test
    print(f"A = {args.eval_a}\nB = {args.eval_b}")
    if c.n_a != c.n_b or c.shared != c.n_a:
        print(f"paired on the {c.shared} questions both answered (A answered {c.n_a}, B {c.n_b})")
    print(f"A right, B wrong: {t.a_only}\nB right, A wrong: {t.b_only}\nboth right: {t.both}\n"
          f"both wrong: {t.neither}\nexact two-sided sign test p = {t.p:.4g}\n"
          f"B - A macro EM: {100 * c.gain:+.1f} points, 95% paired bootstrap [{100 * c.low:+.1f}, {100 * c.high:+.1f}]")
    return 0


def run_report(args: argparse.Namespace) -> int:
    from workbench import store
    from workbench.evaluate import table1

    con = store.connect(existing_db(args), read_only=True)
    try:
        _, markdown = table1(con, datasets=args.dataset or ["tinyworld"], split=args.split)
    finally:
        con.close()
    print(markdown)
    return 0
