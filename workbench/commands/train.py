"""``workbench train`` and ``workbench runs show|list``: the CoEvoKG loop and its per-round metrics."""

from __future__ import annotations

import argparse
import json
import sys

from workbench.commands import add_db, add_set, add_store, db_path, existing_db, overrides


def register(sub: argparse._SubParsersAction) -> None:
    from workbench.method.methods import method_arg, methods_help

    p = sub.add_parser("train", help="run the self-evolution loop (CoEvoKG, baselines, ablation rows)")
    p.add_argument("--preset", default="tiny", help="smoke | tiny | paper | paper-7b | paper-8b (default tiny)")
    p.add_argument("--method", default="coevokg", type=method_arg, metavar="METHOD",
                   help=f"the row to train (default coevokg): {methods_help()}")
    p.add_argument("--steps", type=int, default=None, help="rounds in the run's total (default: the preset's)")
    p.add_argument("--run", required=True, help="run name (its rows and runs/<name>/ checkpoints)")
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--resume", action="store_true", help="continue a stopped run up to --steps")
    p.add_argument("--overwrite", action="store_true",
                   help="replace an existing run of this name in this store (its rows and runs/<name>/)")
    p.add_argument("--model", default=None,
                   help="base model: a Hugging Face directory or hub id (default: the preset's backbone.model; the tiny warm start for tiny and smoke)")
    p.add_argument("--gpus", type=int, default=1,
                   help="data-parallel processes, one GPU each (NCCL; gloo CPU processes without CUDA); "
                        "rank 0 writes the store (README, 'Several GPUs')")
    add_set(p)
    add_db(p)
    p.set_defaults(func=_train, train_parser=p)

    runs = sub.add_parser("runs", help="inspect training runs")
    rsub = runs.add_subparsers(dest="runs_command", metavar="ACTION", required=True)
    show = rsub.add_parser("show", help="per-round metrics of a run")
    show.add_argument("name")
    show.add_argument("--json", action="store_true", help="print a JSON list, one object per round")
    add_store(show)
    show.set_defaults(func=_show)
    lst = rsub.add_parser("list", help="all runs in the store")
    add_store(lst)
    lst.set_defaults(func=_list)


def _train(args: argparse.Namespace) -> int:
    from workbench.method import distributed
    from workbench.method.train import preflight, train

    if args.gpus < 1:
        raise ValueError(f"--gpus {args.gpus}: expected a number of processes >= 1")
    if args.gpus > 1 and not distributed.launched():  # this process launches the ranks
        # train's own checks first, here: a bad input is one line and exit code 2, not a failed rank
        preflight(db_path(args), run=args.run, method=args.method, preset=args.preset, steps=args.steps,
                  resume=args.resume, seed=args.seed, overrides=overrides(args), overwrite=args.overwrite,
                  world=args.gpus)
        return distributed.launch(args.gpus, _rank_argv(args, args.train_parser))

    metrics = train(db_path(args), run=args.run, method=args.method, preset=args.preset, steps=args.steps,
                    resume=args.resume, seed=args.seed, overrides=overrides(args),
                    model=args.model, overwrite=args.overwrite)
    if metrics:
        last = metrics[-1]
        mean = f" (the weights' mean {last['val_em_average']:.3f})" if last.get("val_em_average") is not None else ""
        print(f"{args.run}: {len(metrics)} rounds; last val EM {last['val_em']:.3f}{mean}, "
              f"solver reward {last['solver_reward']:.3f}, pool {last['pool_chains']} chains")
    return 0


def _rank_argv(args: argparse.Namespace, parser: argparse.ArgumentParser) -> list[str]:
    """The ``workbench train`` arguments each rank runs: every option of ``parser`` as parsed into
    ``args`` (``--gpus`` left out; the store as resolved here), so a flag added to ``train`` reaches
    the ranks. Each value is ``--flag=value``: a value that starts with '-' stays a value."""
    argv = ["train"]
    for action in parser._actions:
        if not action.option_strings or action.dest in ("help", "gpus"):
            continue
        flag, value = max(action.option_strings, key=len), getattr(args, action.dest)
        if action.dest == "db":
            value = db_path(args)
        if isinstance(action, argparse._StoreTrueAction):
            argv += [flag] * bool(value)
        elif isinstance(action, argparse._AppendAction):
            argv += [f"{flag}={v}" for v in value or []]
        elif isinstance(action, argparse._StoreAction):
            argv += [f"{flag}={value}"] * (value is not None)
        else:
            raise TypeError(f"train's option {flag}: {type(action).__name__} is not forwarded to the ranks")
    return argv


def _show(args: argparse.Namespace) -> int:
    """Per-round metrics from the store, or from ``runs/NAME/progress.json`` while a training
    process holds the store's write lock (DuckDB then refuses every other process)."""
    import duckdb

    from workbench import store
    from workbench.method.run_store import METRIC_KEYS, run_metrics

    db = existing_db(args)
    try:
        con = store.connect(db, read_only=True)
    except duckdb.IOException:
        rows = _locked_rows(args.name, db)
    else:
        try:
            rows = run_metrics(con, args.name)
        finally:
            con.close()
    if not rows:
        raise ValueError(f"no metrics for run {args.name!r} in {db}")
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    print("  ".join(f"{k:>10}" for k in METRIC_KEYS))
    for r in rows:
        print("  ".join(f"{r[k]:>10.4g}" if isinstance(r[k], float) else f"{r[k]!s:>10}" for k in METRIC_KEYS))
    return 0


def _progress(name: str, db: str) -> dict | None:
    """``runs/NAME/progress.json`` when that folder is this store's run (its ``run.json`` says so)."""
    from pathlib import Path

    from workbench import paths
    from workbench.method.progress import read_progress

    folder = paths.runs_dir() / Path(name).name  # a plain name: one folder below runs/
    marker = folder / "run.json"
    try:
        owner = json.loads(marker.read_text()).get("store") if marker.exists() else None
    except (OSError, ValueError, AttributeError) as err:
        raise ValueError(f"{marker}: unreadable ({err})") from None
    return read_progress(folder) if owner == str(Path(db).resolve()) else None


def _locked_rows(name: str, db: str) -> list[dict]:
    """The rounds ``progress.json`` holds, after a line on stderr saying where they come from."""
    progress = _progress(name, db)
    if progress is None:
        raise ValueError(f"{db} is locked by another process (a run training?) and runs/{name}/progress.json "
                         "of this store is not there; try again when the writer has finished")
    print(f"{db} is locked by a writing process; from runs/{name}/progress.json ({progress['status']}, "
          f"{progress['completed']}/{progress['steps']} rounds, updated {progress['updated_at']})", file=sys.stderr)
    if not progress["rounds"]:
        raise ValueError(f"run {name!r} has no finished round yet ({progress['status']})")
    return progress["rounds"]


def _list(args: argparse.Namespace) -> int:
    import duckdb

    from workbench import store

    db = existing_db(args)
    try:
        con = store.connect(db, read_only=True)
    except duckdb.IOException:
        return _list_locked(db)
    try:
        for run, method, preset, seed, steps, status, h in con.execute(
                "SELECT run, method, preset, seed, steps, status, config_hash FROM runs ORDER BY created_at").fetchall():
            done = con.execute("SELECT count(*) FROM run_metrics WHERE run = ?", [run]).fetchone()[0]
            print(f"{run:<24} {method:<10} {preset:<6} seed={seed} rounds={done}/{steps} {status} config={h}")
    finally:
        con.close()
    return 0


def _list_locked(db: str) -> int:
    """``runs list`` while the store is locked: the runs whose progress file names this store."""
    from workbench import paths

    found = []
    for folder in sorted(paths.runs_dir().glob("*/")):
        try:
            found += [p for p in [_progress(folder.name, db)] if p]
        except ValueError as err:  # one damaged file must not hide the other runs
            print(f"skipped: {err}", file=sys.stderr)
    print(f"{db} is locked by a writing process; the runs of this store with a progress.json:", file=sys.stderr)
    for p in found:
        print(f"{p['run']:<24} {p['method']:<10} {p['preset']:<6} rounds={p['completed']}/{p['steps']} "
              f"{p['status']} updated {p['updated_at']}")
    return 0
