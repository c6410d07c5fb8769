"""``workbench warmstart``: train (or reuse) the tiny backbone's warm start (issue 3)."""

from __future__ import annotations

import argparse

from workbench.commands import add_db, add_set, existing_db, overrides


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("warmstart", help="train or reuse the tiny backbone's SFT warm start (the 'base')")
    add_db(p)
    p.add_argument("--preset", default="tiny", help="smoke or tiny (default: tiny)")
    p.add_argument("--out", default=None, help="also copy the model directory here")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--steps", type=int, default=None, help="SFT steps (default: the preset's backbone.sft_steps)")
    p.add_argument("--val-per-family", type=int, default=None,
                   help="val questions per family for the report (default: 40)")
    p.add_argument("--retrain", action="store_true",
                   help="train here even when the cache or the repository (data/pretrained/) holds this warm start")
    p.add_argument("--kg", action="store_true",
                   help="DynaSearcher's warm start: demonstrations that use the KG tool too (its own cache key; "
                        "the KG tool's settings from method.kg_max_triples, method.kg_min_similarity)")
    p.add_argument("--topology", action="store_true",
                   help="EoG's warm start: proposer demonstrations of its query prompt too, every pattern, and solver "
                        "demonstrations that explore with its graph tools and answer sets (its own cache key; the "
                        "prompt from method.topology_prompt; method.graph_tools=off keeps document search; what the "
                        "EoG rows start from)")
    add_set(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import json
    from pathlib import Path

    from workbench.policy.warmstart import warmstart

    db = existing_db(args)
    from workbench.config import preset
    from workbench.policy.warmstart import VAL_PER_FAMILY

    settings = overrides(args)
    if args.steps is not None:
        settings["backbone.sft_steps"] = args.steps
    cfg = preset(args.preset, **settings)
    kg = {"max_triples": cfg.method.kg_max_triples, "min_similarity": cfg.method.kg_min_similarity} if args.kg else None
    extra = None
    if args.topology:
        from workbench.method.eog_warmstart import TopologyDemos

        extra = TopologyDemos.from_config(cfg)
    path = warmstart(db, cfg, out_dir=args.out, seed=args.seed,
                     val_per_family=args.val_per_family or VAL_PER_FAMILY, retrain=args.retrain, kg_tool=kg,
                     extra_demos=extra)
    meta = json.loads((Path(path) / "workbench.json").read_text())
    print(path)
    print(f"train loss {meta['train_loss_first']:.3f} -> {meta['train_loss_last']:.3f} "
          f"({meta['steps']} steps, {meta['demonstrations']} demonstrations from {meta['worlds']} worlds)")
    print(f"wall time {meta['seconds']['total']:.0f} s (sft {meta['seconds']['sft']:.0f} s) when trained")
    if "extra_demos" in meta:
        print("its own demonstrations per family: " + ", ".join(f"{k} {v}" for k, v in meta["extra_demos"].items()))
    print("val EM (greedy) per family:")
    for family, v in meta["val_em"].items():
        print(f"  {family:<12} n={v['n']:<5} EM {100 * v['em']:5.1f}  [{100 * v['low']:5.1f}, {100 * v['high']:5.1f}]")
    if "tool_use" in meta:
        print("searches per val question (greedy), document / KG:")
        for family, v in meta["tool_use"].items():
            print(f"  {family:<12} {v['doc']:.2f} / {v['kg']:.2f}")
    return 0
