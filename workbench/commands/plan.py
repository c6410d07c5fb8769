"""``workbench plan``: a dry run -- inputs checked, memory, disk and time estimated, nothing started."""

from __future__ import annotations

import argparse

from workbench.commands import add_db, add_set, db_path, overrides


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("plan", help="dry run: check a run's inputs and estimate GPU memory, disk and time per step",
                       description="Checks that the model, the dense encoder (or the retrieval server), the "
                                   "knowledge source, G_0 and the QA sets are there, and prints estimates of "
                                   "memory per GPU, checkpoint disk and time per round, before anything long "
                                   "starts. Exit status 1 when an input is missing. The update's gradient "
                                   "checkpointing is the run's method.gradient_checkpointing (auto: as the update "
                                   "decides it on a GPU of --gpu-memory-gib), in memory and time. The time's "
                                   "constants are assumptions unless --calibrate fits them from `workbench bench "
                                   "gpu`'s JSON (docs/gpu.md, 'The plan, calibrated').")
    p.add_argument("--preset", default="paper", help="paper | paper-7b | paper-8b (default paper); the tiny tiers need no plan")
    p.add_argument("--model", default=None, help="model folder or hub id (default: the preset's backbone.model)")
    p.add_argument("--gpus", type=int, default=1, help="GPUs to estimate for (data-parallel split; default 1)")
    p.add_argument("--dataset", action="append", default=None,
                   help="test set to require (repeatable; default Table 1's six: nq triviaqa popqa hotpotqa 2wiki bamboogle)")
    p.add_argument("--decode-efficiency", type=float, default=None,
                   help="assumed share of the GPU's memory bandwidth a decode step reaches (default 0.4)")
    p.add_argument("--hbm-tb-s", type=float, default=None,
                   help="the GPU's memory bandwidth in TB/s (default an H200's 4.8)")
    p.add_argument("--mfu", type=float, default=None, help="assumed share of peak bf16 FLOPs the trainer reaches")
    p.add_argument("--mean-tokens", type=int, default=None, help="assumed mean trajectory length in tokens")
    p.add_argument("--gpu-memory-gib", dest="gpu_memory_gib", type=float, default=None,
                   help="one GPU's memory (default: the visible GPU's, else an H200's 139.8)")
    p.add_argument("--calibrate", action="append", default=None, metavar="BENCH.json",
                   help="fit the throughput constants (mfu, decode efficiency, retrieval seconds a turn, the "
                        "stages not modelled, the activations' share) from the JSON `workbench bench gpu --parts "
                        "update round` wrote (repeatable; e.g. data/reference/bench_h200_*.json): prints each "
                        "constant with the measurement it came from and each measured figure beside the "
                        "calibrated plan's; --mfu and the other flags still override")
    p.add_argument("--check", action="append", default=None, metavar="BENCH.json",
                   help="with --calibrate: more `bench gpu` JSON whose figures are printed beside the calibrated "
                        "plan's but not fitted (a held-out check, e.g. another shape's round)")
    p.add_argument("--json", action="store_true", help="print the plan as JSON")
    add_set(p)
    add_db(p, preset_default="paper")
    p.set_defaults(func=_plan)


def _plan(args: argparse.Namespace) -> int:
    import dataclasses
    import json

    from workbench.config import preset
    from workbench.plan import TABLE1_DATASETS, Assumptions, format_plan, model_shape, plan, visible_gpu_memory_gib

    cfg = preset(args.preset, **overrides(args))
    if cfg.backbone.model == "tiny" and not args.model:
        raise ValueError(f"--preset {args.preset}: a tiny backbone trained here needs no plan; plan a paper preset "
                         "(paper, paper-7b, paper-8b) or pass --model")
    given = {"decode_efficiency": args.decode_efficiency, "hbm_tb_s": args.hbm_tb_s, "mfu": args.mfu,
             "mean_tokens": args.mean_tokens, "gpu_memory_gib": visible_gpu_memory_gib() if args.gpu_memory_gib is None else args.gpu_memory_gib}
    for name, value in given.items():
        if value is not None and (value <= 0 or name in ("mfu", "decode_efficiency") and value > 1):
            raise ValueError(f"--{name.replace('_', '-')} {value}: expected "
                             + ("a share in (0, 1]" if name in ("mfu", "decode_efficiency") else "a number > 0"))
    assumptions, calibration = Assumptions(), None
    if args.check and not args.calibrate:
        raise ValueError("--check: compares measurements with a calibrated plan; give --calibrate BENCH.json too")
    if args.calibrate:
        from workbench import plan_calibration as pc

        measured = [m for path in args.calibrate for m in pc.read(path)]
        used, note = pc.at_shape(measured, model_shape(args.model or cfg.backbone.model))
        assumptions, fits = pc.fit(used, assumptions)
        rows = pc.compare(measured, assumptions)
        checked = [m for path in args.check or () for m in pc.read(path)]
        rows += [{**r, "held_out": True} for r in pc.compare(checked, assumptions)]
        calibration = {"fits": [dataclasses.asdict(f) for f in fits], "measured_vs_plan": rows,
                       "text": pc.format_calibration(fits, rows, note)}
    assumptions = dataclasses.replace(assumptions, **{k: v for k, v in given.items() if v is not None})
    p = plan(cfg, db_path(args), model=args.model, gpus=args.gpus, a=assumptions,
             datasets=tuple(args.dataset or TABLE1_DATASETS))
    if calibration:
        p["calibration"] = calibration
    if args.json:
        print(json.dumps(p, indent=1))
    else:
        print((calibration["text"] + "\n\n" if calibration else "") + format_plan(p))
    return 0 if all(c["ok"] for c in p["checks"]) else 1
