"""``workbench train`` and ``workbench runs show|list``: the CoEvoKG loop and its per-round metrics."""

from __future__ import annotations

import argparse
import json

from workbench.commands import add_db, add_set, db_path, existing_db, overrides


def register(sub: argparse._SubParsersAction) -> None:
    from workbench.method.methods import METHODS, method_name

    p = sub.add_parser("train", help="run the self-evolution loop (CoEvoKG, baselines, ablation rows)")
    p.add_argument("--preset", default="tiny", help="smoke | tiny (default tiny)")
    p.add_argument("--method", default="coevokg", type=method_name, choices=sorted(METHODS),
                   help="coevokg (full), search_r1 (or Search-R1), ssp, c1 (+KG tasks), c2 (+path/difficulty rewards)")
    p.add_argument("--steps", type=int, default=None, help="rounds in the run's total (default: the preset's)")
    p.add_argument("--run", required=True, help="run name (its rows and runs/<name>/ checkpoints)")
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--resume", action="store_true", help="continue a stopped run up to --steps")
    p.add_argument("--overwrite", action="store_true",
                   help="replace an existing run of this name in this store (its rows and runs/<name>/)")
    p.add_argument("--model", default=None,
                   help="base model: a Hugging Face directory or hub id (default: the preset's tiny warm start)")
    add_set(p)
    add_db(p)
    p.set_defaults(func=_train)

    runs = sub.add_parser("runs", help="inspect training runs")
    rsub = runs.add_subparsers(dest="runs_command", metavar="ACTION", required=True)
    show = rsub.add_parser("show", help="per-round metrics of a run")
    show.add_argument("name")
    show.add_argument("--json", action="store_true", help="print a JSON list, one object per round")
    add_db(show)
    show.set_defaults(func=_show)
    lst = rsub.add_parser("list", help="all runs in the store")
    add_db(lst)
    lst.set_defaults(func=_list)


def _train(args: argparse.Namespace) -> int:
    from workbench.method.train import train

    metrics = train(db_path(args), run=args.run, method=args.method, preset=args.preset, steps=args.steps,
                    resume=args.resume, seed=args.seed, overrides=overrides(args),
                    model=args.model, overwrite=args.overwrite)
    if metrics:
        last = metrics[-1]
        print(f"{args.run}: {len(metrics)} rounds; last val EM {last['val_em']:.3f}, "
              f"solver reward {last['solver_reward']:.3f}, pool {last['pool_chains']} chains")
    return 0


def _show(args: argparse.Namespace) -> int:
    from workbench import store
    from workbench.method.run_store import METRIC_KEYS, run_metrics

    con = store.connect(existing_db(args), read_only=True)
    rows = run_metrics(con, args.name)
    if not rows:
        raise ValueError(f"no metrics for run {args.name!r} in {db_path(args)}")
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    print("  ".join(f"{k:>10}" for k in METRIC_KEYS))
    for r in rows:
        print("  ".join(f"{r[k]:>10.4g}" if isinstance(r[k], float) else f"{r[k]!s:>10}" for k in METRIC_KEYS))
    return 0


def _list(args: argparse.Namespace) -> int:
    from workbench import store

    con = store.connect(existing_db(args), read_only=True)
    for run, method, preset, seed, steps, status, h in con.execute(
            "SELECT run, method, preset, seed, steps, status, config_hash FROM runs ORDER BY created_at").fetchall():
        done = con.execute("SELECT count(*) FROM run_metrics WHERE run = ?", [run]).fetchone()[0]
        print(f"{run:<24} {method:<10} {preset:<6} seed={seed} rounds={done}/{steps} {status} config={h}")
    return 0
