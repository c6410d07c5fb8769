"""Runs of the loop: set-up, per-round metrics, checkpoints, resume and model selection.

``train`` is what ``workbench train`` and the notebooks call. Every round writes one JSON object
to ``run_metrics`` (``runs show``); the latest checkpoint (policy, optimiser, round) lives under
``runs/<run>/checkpoint`` and the best-validation policy under ``runs/<run>/best`` (the paper
selects the checkpoint with the highest validation accuracy, section 4.1).

Resume: each round draws its randomness from (seed, round) alone, so a run stopped after round r
and resumed from its checkpoint gives the same metrics as one that never stopped.

Example:
    >>> # train("data/tiny.duckdb", run="demo", method="coevokg", preset="tiny", steps=10)
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import numpy as np
import torch

from workbench import paths, store
from workbench.config import Config, preset as get_preset
from workbench.evaluate import model_labels
from workbench.method.gate import store_verdicts
from workbench.method.loop import RoundBatch, Trainer
from workbench.method.methods import method_spec
from workbench.method.rollout import store_trajectories

METRIC_KEYS = ("round", "val_em", "solver_reward", "proposer_reward", "admitted_rate", "seed_fallback_rate",
               "pool_chains", "pool_evidence", "kl", "entropy")


def ensure_world(con, cfg: Config) -> None:
    """Build the preset's TinyWorld and G_0 in the store when they are missing."""
    from workbench.kg.pool import build_pool
    from workbench.kg.tinyworld import build_world

    if con.execute("SELECT count(*) FROM entities").fetchone()[0] == 0:
        build_world(con, preset=cfg.name, seed=cfg.world.seed)
    if con.execute("SELECT count(*) FROM chains WHERE run IS NULL").fetchone()[0] == 0:
        p = cfg.pool
        build_pool(con, p.walks, p.min_hops, p.max_hops, seed=p.seed, functional_only=p.functional_only,
                   unique_grounding=p.unique_grounding)


def run_dir(run: str) -> Path:
    return paths.runs_dir() / run


def _forget_from(con, run: str, first_round: int) -> None:
    """Delete a run's rows from ``first_round`` on (write-back rows of round t carry t + 1)."""
    with store.transaction(con):
        for table in ("run_metrics", "trajectories", "candidates"):
            con.execute(f"DELETE FROM {table} WHERE run = ? AND round >= ?", [run, first_round])
        con.execute("DELETE FROM evidence WHERE run = ? AND round > ?", [run, first_round])
        con.execute("DELETE FROM chain_nodes WHERE chain_id IN (SELECT chain_id FROM chains WHERE run = ? "
                    "AND created_round > ?)", [run, first_round])
        con.execute("DELETE FROM chains WHERE run = ? AND created_round > ?", [run, first_round])
        con.execute("DELETE FROM questions WHERE dataset = ? AND split LIKE 'round-%' "
                    "AND CAST(substr(split, 7) AS INTEGER) >= ?", [f"generated/{run}", first_round])


def validation_em(trainer: Trainer, limit: int) -> float:
    """Greedy EM on the held-out validation split (the first ``limit`` per family)."""
    from workbench.evaluate import load_questions, score_questions

    cfg = trainer.cfg
    questions = load_questions(trainer.con, cfg.method.val_dataset, "val", limit)
    scored = score_questions(trainer.policy, trainer.search, questions, cfg.rollout, cfg.search.topk)
    return float(scored["em"].mean())


def train(db, run: str, method: str = "coevokg", preset: str = "tiny", steps: int | None = None,
          resume: bool = False, seed: int | None = None, overrides: dict | None = None,
          model: str | Path | None = None, progress: bool = True, log=print) -> list[dict]:
    """Run (or resume) ``steps`` rounds of ``method`` and return the per-round metrics.

    The base (and the frozen KL reference) is ``model`` -- any Hugging Face causal LM directory or
    hub id -- or, by default, the preset's tiny warm start (trained or reused from the cache).

    Example:
        >>> # metrics = train("data/smoke.duckdb", run="smoke-coevokg", preset="smoke", steps=2)
    """
    from tqdm.auto import tqdm

    from workbench.policy.model import Policy
    from workbench.policy.warmstart import warmstart
    from workbench.search.tool import SearchTool

    spec = method_spec(method)
    log = log or (lambda *_: None)
    overrides = dict(overrides or {})
    if steps is not None:
        overrides["method.steps"] = steps
    if seed is not None:
        overrides["method.seed"] = seed
    cfg = get_preset(preset, **overrides)
    steps = cfg.method.steps
    if not run or "/" in run:
        raise ValueError(f"--run: expected a plain name, got {run!r}")
    own = not hasattr(db, "execute")
    con = store.connect(db) if own else db
    try:
        ensure_world(con, cfg)
        base = model or warmstart(con, preset=cfg, seed=cfg.backbone.seed, log=log)
        ckpt = run_dir(run) / "checkpoint"
        state = {"completed": 0, "best_val": -1.0, "non_finite": 0}
        found = _latest_checkpoint(run) if resume else None
        if found:
            _same_settings(con, run, spec.name, cfg)
            state = json.loads((found / "state.json").read_text())
            policy = Policy.load(found / "model", dtype=torch.float32)
        else:
            if resume:
                log(f"run {run!r} has no checkpoint yet; starting it")
            policy = Policy.load(base, dtype=torch.float32)
            shutil.rmtree(run_dir(run), ignore_errors=True)
        _forget_from(con, run, state["completed"])
        con.execute("DELETE FROM runs WHERE run = ?", [run])
        con.execute("INSERT INTO runs (run, method, preset, seed, config, config_hash, steps, status) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, 'running')",
                    [run, spec.name, cfg.name, cfg.method.seed, json.dumps(cfg.to_dict()), cfg.hash(), steps])
        # float32 for both: bf16 weights (Policy.load's CUDA default) round away most Adam steps and
        # would put a rounding gap between policy and reference (LOG.md, session 3)
        reference = Policy.load(base, dtype=torch.float32)
        search = SearchTool(con, index=cfg.search.index, topk=cfg.search.topk, model=cfg.search.dense_model)
        trainer = Trainer(con, cfg, spec, run, policy, reference, search)
        if found:
            trainer.optimizer.load_state_dict(torch.load(found / "optimizer.pt"))
        trainer.guard.consecutive = state["non_finite"]
        trainer.kl.coef = state.get("kl_coef", trainer.kl.coef)
        bar = tqdm(range(state["completed"], steps), desc=f"{run} ({spec.name})", disable=not progress,
                   initial=state["completed"], total=steps)
        for t in bar:
            metrics = run_round(trainer, t)
            if metrics["val_em"] > state["best_val"]:
                state["best_val"] = metrics["val_em"]
                policy.save(run_dir(run) / "best")
                _describe_best(run_dir(run) / "best", base, spec.name, run, t, metrics["val_em"])
            state.update(completed=t + 1, non_finite=trainer.guard.consecutive, kl_coef=trainer.kl.coef)
            _checkpoint(trainer, ckpt, state)
            bar.set_postfix(round=t, reward=f"{metrics['solver_reward']:.2f}", val=f"{metrics['val_em']:.2f}",
                            pool=metrics["pool_chains"])
        con.execute("UPDATE runs SET status = 'done' WHERE run = ?", [run])
        return run_metrics(con, run)
    finally:
        if own:
            con.close()


def run_round(trainer: Trainer, t: int) -> dict:
    """One round in the paper's order; writes its trajectories, verdicts and metrics."""
    con, cfg, spec, run = trainer.con, trainer.cfg, trainer.spec, trainer.run
    torch.manual_seed(trainer._seed(t, 0))
    timings, batch = {}, RoundBatch()
    trainer.search.reset_cache_stats()
    clock = time.perf_counter()

    def lap(name):
        nonlocal clock
        now = time.perf_counter()
        timings[f"time_{name}"] = now - clock
        clock = now

    trainer.propose(t, batch)
    lap("proposer_gate")
    trainer.solve(t, batch)
    lap("rollouts")
    p_s = trainer.reward(t, batch, trainer.evidence_graph(t))
    lap("rewards")
    stats = trainer.update(t, batch)
    lap("update")
    traj_ids = store_trajectories(con, run, t, batch.trajectories, [s.question_id for s in batch.slots],
                                  scores=list(zip(batch.r_ans, batch.s_path, batch.solver_rewards)))
    g = cfg.method.group_size
    p_s_of = {s.candidate: float(np.mean(batch.r_ans[i * g:(i + 1) * g]))
              for i, s in enumerate(batch.slots) if s.candidate is not None}
    for chain_id, lo, verdicts in batch.verdicts:
        store_verdicts(con, run, t, chain_id, verdicts,
                       rewards=[batch.proposer_rewards[lo + v.index] for v in verdicts],
                       p_s=[p_s_of.get(lo + v.index) for v in verdicts])
    wb = trainer.write_back(t, batch, traj_ids)
    lap("write_back")
    val = validation_em(trainer, cfg.method.val_questions)
    lap("validation")
    n_chains, n_evidence = _pool_size(con, trainer.pool_run, t + 1)
    gen = [s for s in batch.slots if s.source == "generated"]
    seed = [s for s in batch.slots if s.source == "seed"]
    proposer = [r for r in batch.proposer_rewards if r is not None]
    s_path = np.asarray(batch.s_path) if batch.s_path else np.zeros(1)
    metrics = {
        "round": t, "val_em": val,
        "solver_reward": float(np.mean(batch.solver_rewards)), "r_ans": float(np.mean(batch.r_ans)),
        "s_path_mean": float(s_path.mean()), "s_path_p50": float(np.median(s_path)),
        "s_path_pass_rate": float((s_path >= cfg.method.tau_path).mean()),
        "s_path_correct_mean": float(np.mean([s for s, a in zip(batch.s_path, batch.r_ans) if a] or [0.0])),
        "proposer_reward": float(np.mean(proposer)) if proposer else 0.0,
        "admitted_rate": batch.n_admitted / batch.n_candidates if batch.n_candidates else 0.0,
        "seed_fallback_rate": len(seed) / len(batch.slots) if batch.slots else 0.0,
        "pool_chains": n_chains, "pool_evidence": n_evidence,
        "writeback_new_chains": wb["new_chains"], "writeback_merged_evidence": wb["merged_evidence"],
        "writeback_not_chains": wb["not_chains"],
        "avg_hops_generated": float(np.mean([s.hops for s in gen])) if gen else None,
        "avg_hops_seed": float(np.mean([s.hops for s in seed])) if seed else None,
        "p_s_generated": float(np.mean(p_s["generated"])) if p_s["generated"] else None,
        "p_s_seed": float(np.mean(p_s["seed"])) if p_s["seed"] else None,
        "kl": stats["kl"], "kl_coef": trainer.kl.coef, "entropy": stats["entropy"], "loss": stats["loss"],
        "clip_fraction": stats.get("clip_fraction", 0.0), "skipped_update": stats["skipped"],
        "response_length": float(np.mean([tr.n_generated for tr in batch.trajectories])),
        "search_cache_hit_rate": trainer.search.cache_stats()["hit_rate"],
        **timings,
    }
    con.execute("INSERT INTO run_metrics VALUES (?, ?, ?)", [run, t, json.dumps(metrics)])
    return metrics


def _pool_size(con, run: str | None, round: int) -> tuple[int, int]:
    from workbench.kg.pool import evidence_counts

    ids, counts = evidence_counts(con, run, round)
    return int(len(ids)), int(counts.sum())


def _describe_best(folder: Path, base, method: str, run: str, t: int, val_em: float) -> None:
    """The best checkpoint's ``workbench.json``: Table 1 labels (the base's backbone, this method)
    and where it came from, so ``workbench eval`` names its row without flags."""
    (folder / "workbench.json").write_text(json.dumps(
        {"backbone": model_labels(base)["backbone"], "method": method, "run": run, "round": t, "val_em": val_em, "base": str(base)},
        indent=2))


def _checkpoint(trainer: Trainer, ckpt: Path, state: dict) -> None:
    """Write the round's checkpoint beside the old one, then swap: a stop at any moment leaves one
    whole checkpoint (``_latest_checkpoint`` finds it)."""
    tmp, old = ckpt.with_name("checkpoint.tmp"), ckpt.with_name("checkpoint.old")
    shutil.rmtree(tmp, ignore_errors=True)
    trainer.policy.save(tmp / "model")
    torch.save(trainer.optimizer.state_dict(), tmp / "optimizer.pt")
    (tmp / "state.json").write_text(json.dumps(state))
    shutil.rmtree(old, ignore_errors=True)
    if ckpt.exists():
        ckpt.rename(old)
    tmp.rename(ckpt)
    shutil.rmtree(old, ignore_errors=True)


def _latest_checkpoint(run: str) -> Path | None:
    """The whole checkpoint of a run: the current one, else the one a stop interrupted mid-swap."""
    for name in ("checkpoint", "checkpoint.old"):
        if (run_dir(run) / name / "state.json").exists():
            return run_dir(run) / name
    return None


def _same_settings(con, run: str, method: str, cfg: Config) -> None:
    """--resume continues the same run: the method and every setting but the total steps must match."""
    row = con.execute("SELECT method, config FROM runs WHERE run = ?", [run]).fetchall()
    if not row:
        return
    stored = json.loads(row[0][1])
    mine = cfg.to_dict()
    for d in (stored, mine):
        d["method"].pop("steps", None)
    if row[0][0] != method or stored != mine:
        raise ValueError(f"--resume: run {run!r} was started with other settings (method {row[0][0]!r}); "
                         "resume with the same --method, --preset, --seed and --set values, or use a new --run")


def run_metrics(con, run: str) -> list[dict]:
    """The per-round metrics of a run, oldest first (what ``workbench runs show --json`` prints).

    Example:
        >>> run_metrics(store.connect(":memory:"), "none")
        []
    """
    rows = con.execute("SELECT metrics FROM run_metrics WHERE run = ? ORDER BY round", [run]).fetchall()
    return [json.loads(m) for (m,) in rows]
