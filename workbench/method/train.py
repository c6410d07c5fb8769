"""A training run's lifecycle around the round: set-up, checkpoints, best, resume, metrics.

``train`` is what ``workbench train`` and the notebooks call. Each round is
``loop.Trainer.run_round`` (what the paper's round computes) then ``RunStore.commit_round`` (every
row it writes, in one transaction) and one metrics row (``runs show``). The best-validation policy
is kept under ``runs/<run>/best`` (the paper selects the checkpoint with the highest validation
accuracy, section 4.1) and the latest complete checkpoint under ``runs/<run>/checkpoints/``.

What is safe (README, "What is safe"):

* A run name is a plain name (letters, digits, '.', '_', '-', starting with a letter or digit) and
  never one of the workbench's own folders under ``runs/`` (``RESERVED_RUN_NAMES``).
* An existing run (in this store, or a folder under ``runs/``) is continued with ``resume=True``
  or replaced with ``overwrite=True``; otherwise it is refused. A run's folder records its store
  (``run.json``); another store's run of the same name is refused, even with ``overwrite``.
* Checkpoints are written whole under a temporary name, renamed into place, and only then are
  older ones deleted: a kill at any point leaves the last complete checkpoint.
* Each round draws its randomness from (seed, round) alone, so a run stopped after round r and
  resumed from its checkpoint gives the same metrics as one that never stopped.

Example:
    >>> check_run_name("coevokg-s1")
    'coevokg-s1'
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import json
import logging
import pickle
import re
import shutil
import tempfile
from pathlib import Path

import torch
from safetensors import SafetensorError

from workbench import paths, store
from workbench.limits import default_device
from workbench.config import CHANGED_DEFAULTS, Config, preset as get_preset
from workbench.method import distributed
from workbench.method.asynchronous import check_config as check_async, load_pending, save_pending
from workbench.method.averaging import WeightAverage, first_averaged
from workbench.method.iterations import save_iteration
from workbench.method.loop import Laps, Trainer
from workbench.method.methods import method_spec, uses_kg_tool, warmstart_demos
from workbench.method.progress import (WarmStartProgress, round_bar, round_postfix,
                                       write_progress)
from workbench.method.run_store import METRIC_KEYS, RunStore, run_metrics
from workbench.method.tasks import TASK_SOURCES
from workbench.policy import lora
from workbench.search.kg_search import tool_settings

RESERVED_RUN_NAMES = frozenset({"batch", "quickstart", "checkpoints"})  # folders under runs/ the workbench owns
_RUN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
_CHECKPOINT = re.compile(r"round-(\d{6})")


def ensure_world(con, cfg: Config, reads_pool: bool = True) -> None:
    """Build the preset's TinyWorld and G_0 in the store when they are missing. For a run that
    ``reads_pool`` (its tasks are G_0's chains), a G_0 already there must have been built with
    ``cfg.pool``'s chain filters (``pool_filters``): settings that ask for other chains than the store
    holds are refused, not run on the wrong pool."""
    from workbench.kg.pool import build_pool, pool_filters
    from workbench.kg.tinyworld import build_world
    from workbench.search.retriever import pool_retriever

    if con.execute("SELECT count(*) FROM entities").fetchone()[0] == 0:
        build_world(con, preset=cfg.name, seed=cfg.world.seed)
    p = cfg.pool
    if con.execute("SELECT count(*) FROM chains WHERE run IS NULL").fetchone()[0] == 0:
        build_pool(con, p.walks, p.min_hops, p.max_hops, seed=p.seed, functional_only=p.functional_only,
                   unique_grounding=p.unique_grounding, retrieval_verify=p.retrieval_verify, hop_ratio=p.hop_ratio,
                   search=pool_retriever(con) if p.retrieval_verify else None)
        return
    if not reads_pool:  # its tasks are not G_0's chains: the store's filters are no concern of its settings
        return
    last = con.execute("SELECT params FROM pool_builds ORDER BY build_id DESC LIMIT 1").fetchone()
    if last is None:  # a G_0 written without build_pool: no filters recorded to compare
        return
    built = pool_filters(json.loads(last[0]) if last[0] else {})
    wanted = pool_filters(dataclasses.asdict(p))
    if built != wanted:
        flags = " ".join(f"--{k.replace('_', '-')}" + ("" if v is True else f" {v}") for k, v in wanted.items() if v)
        differ = ", ".join(f"pool.{k}={wanted[k]!r} (the store's G_0: {built[k]!r})" for k in wanted if built[k] != wanted[k])
        raise ValueError(f"{store.file_of(con)}: {differ}: build G_0 with those filters first (workbench pool "
                         f"build --db {store.file_of(con)} {flags}, --force where runs used the old one) or use a "
                         "store built with them")


def check_run_name(run) -> str:
    """``run`` when it is a plain run name, else ValueError naming ``--run`` and what is expected.

    Example:
        >>> check_run_name("..")
        Traceback (most recent call last):
        ...
        ValueError: --run '..': expected a plain name (letters, digits, '.', '_', '-', starting with a letter or digit)
    """
    if not isinstance(run, str) or not _RUN_NAME.fullmatch(run):
        raise ValueError(f"--run {run!r}: expected a plain name (letters, digits, '.', '_', '-', "
                         "starting with a letter or digit)")
    if run in RESERVED_RUN_NAMES:
        raise ValueError(f"--run {run!r}: that folder under runs/ belongs to the workbench "
                         f"({', '.join(sorted(RESERVED_RUN_NAMES))}); pick another name")
    return run


def run_dir(run: str) -> Path:
    """The folder of run ``run``: ``runs/<run>`` (exactly one level below ``paths.runs_dir()``)."""
    return paths.runs_dir() / check_run_name(run)


def validation_em(trainer: Trainer, limit: int) -> float:
    """Greedy EM on the held-out validation split (the first ``limit`` per family)."""
    from workbench.policy.rollout import load_questions, score_questions

    cfg = trainer.cfg
    questions = load_questions(trainer.con, cfg.method.val_dataset, "val", limit)
    scored = score_questions(trainer.policy, trainer.search, questions, cfg.rollout, cfg.search.topk,
                             kg=trainer.kg, graph=trainer.graph)
    return float(scored["em"].mean())


def train(db, run: str, method: str = "coevokg", preset: str = "tiny", steps: int | None = None,
          resume: bool = False, seed: int | None = None, overrides: dict | None = None,
          model: str | Path | None = None, progress: bool = True, log=print, overwrite: bool = False) -> list[dict]:
    """Run (or resume) ``steps`` rounds of ``method`` and return the per-round metrics.

    The base (and the frozen KL reference) is ``model`` -- any Hugging Face causal LM directory or
    hub id -- or, by default, the preset's ``backbone.model`` (``paths.local_model``), or for
    ``'tiny'`` the preset's tiny warm start (trained or reused from the cache). The solver searches
    ``search.url`` when set, else the store (``search.retriever.make_retriever``). An
    existing run is refused unless ``resume`` (continue it) or ``overwrite`` (replace it) is given.

    Example:
        >>> # metrics = train("data/smoke.duckdb", run="smoke-coevokg", preset="smoke", steps=2)
    """
    from workbench.search.retriever import make_retriever

    dist = distributed.from_env()  # None in one process: the code below, unchanged
    if dist is not None and not dist.is_main:  # rank 0's settings, checkpoint and retriever; no store
        return distributed.follow(dist, load_policies, log=log or (lambda *_: None))
    world = dist.world if dist is not None else 1
    folder, spec, cfg = _run_settings(run, method, preset, steps, seed, overrides, resume, overwrite, world)
    lora.import_unsloth_first(default_device(), cfg.method.lora_rank)  # before the warm start, retriever, ...
    log = log or (lambda *_: None)
    own = not hasattr(db, "execute")
    con = store.connect(db) if own else db
    ok = False
    try:
        runs = RunStore(con, run)
        # every check before any work: a resume that cannot continue is refused before a warm start trains
        _check_folder(folder, store.file_of(con), runs, resume, overwrite)
        found, state, cfg = resume_point(con, runs, folder, spec, cfg, resume, world)
        # before the folder is claimed: a store whose G_0 the settings refuse gets no run
        source = TASK_SOURCES[spec.task_source]
        ensure_world(con, cfg, reads_pool=source.reads_pool)
        _claim_folder(folder, store.file_of(con), runs, resume, overwrite)
        source.prepare(con)  # what the store must hold before any draw (EoG's held-out queries)
        base = model or base_model(con, cfg, spec, WarmStartProgress(cfg.backbone.sft_steps, log, enabled=progress))
        if resume and found is None:
            log(f"run {run!r} has no checkpoint yet; starting it")
        state = distributed.with_world({**state, "world_fingerprint": store.world_fingerprint(con)}, world)
        with damaged_checkpoint(found):
            policy, reference = load_policies(cfg, base, found, world)
        search = make_retriever(con, cfg.search)
        trainer = Trainer(con, cfg, spec, run, policy, reference, search)
        if found:
            with damaged_checkpoint(found):
                trainer.load_state_dict({**state, "optimizer": distributed.load_optimizer(found, policy.device)})
                trainer.pending = load_pending(found, state["completed"])  # method.async_staleness's next round
        for extension in trainer.extensions:  # a peer's state across rounds (Dr. Free's anchor)
            extension.resumed(folder, state["completed"])
        if cfg.method.weight_average:
            with damaged_checkpoint(found):
                trainer.average = WeightAverage.resume(found)
        if dist is not None:
            distributed.lead(dist, trainer, base, found, state)
        runs.forget_from(state["completed"])
        runs.start(spec.name, cfg, cfg.method.steps)
        try:
            _rounds(trainer, runs, folder, base, state, progress, log)
        except BaseException:
            runs.finish("failed")
            with contextlib.suppress(Exception):  # the run's own error is the one to report
                _write_progress(trainer, folder, state, "failed")
            raise
        runs.finish("done")
        _write_progress(trainer, folder, state, "done")
        ok = True
        return run_metrics(con, run)
    finally:
        if dist is not None:
            dist.close(ok)
        if own:
            con.close()


def _run_settings(run, method, preset, steps, seed, overrides, resume, overwrite, world: int):
    """(folder, spec, cfg) of a run from ``train``'s arguments, each checked (the run name, the
    method, ``steps``, --resume with --overwrite, every --set value; what ``world`` > 1 ranks cannot
    run: ``distributed.check_config``)."""
    folder = run_dir(run)
    spec = method_spec(method)
    overrides = dict(overrides or {})
    if steps is not None:
        if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
            raise ValueError(f"--steps {steps!r}: expected a number of rounds >= 1")
        overrides["method.steps"] = steps
    if seed is not None:
        overrides["method.seed"] = seed
    if resume and overwrite:
        raise ValueError("--resume and --overwrite: choose one (continue the run, or replace it)")
    cfg = get_preset(preset, **overrides)
    distributed.check_config(cfg, spec, world)
    check_async(cfg, spec)
    if cfg.method.weight_average and cfg.method.lora_rank:
        raise ValueError(f"method.weight_average with method.lora_rank={cfg.method.lora_rank}: the average is of a full "
                         "fine-tune's weights; use method.lora_rank=0, or method.weight_average=0")
    return folder, spec, cfg


def preflight(db, run: str, method: str = "coevokg", preset: str = "tiny", steps: int | None = None,
              resume: bool = False, seed: int | None = None, overrides: dict | None = None,
              overwrite: bool = False, world: int = 1) -> None:
    """What :func:`train` would refuse before any work, checked without writing anything: ``train
    --gpus N`` runs it before it starts N ranks, so a bad input is one line and exit code 2, not a
    failed rank. The same checks as ``train``'s (its settings, the run folder and store row, a
    resume's settings and world size); a store not there yet is one ``train`` creates.

    Example:
        >>> preflight("data/none.duckdb", run="..")
        Traceback (most recent call last):
        ...
        ValueError: --run '..': expected a plain name (letters, digits, '.', '_', '-', starting with a letter or digit)
    """
    folder, spec, cfg = _run_settings(run, method, preset, steps, seed, overrides, resume, overwrite, world)
    if not Path(db).exists():
        _check_folder(folder, str(Path(db).resolve()), None, resume, overwrite)
        return
    con = store.connect(db, read_only=True)
    try:
        runs = RunStore(con, run)
        _check_folder(folder, store.file_of(con), runs, resume, overwrite)
        resume_point(con, runs, folder, spec, cfg, resume, world)
    finally:
        con.close()


def resume_point(con, runs: RunStore, folder: Path, spec, cfg: Config, resume: bool, world: int = 1):
    """(checkpoint or None, its state, cfg) where a run starts, writing nothing. Without ``resume``,
    or for a run with no checkpoint and no stored round, round 0. A resume continues only what
    belongs together, else ValueError with the reason: the checkpoint's ``state.json`` readable and
    naming its own round, the store holding exactly its rounds (one more: a kill after a commit,
    redone), the same world (``store.world_fingerprint``), the same settings (``_same_settings``)
    and ``method.steps`` not below the rounds done.
    """
    fresh = {"completed": 0, "best_val": -1.0}
    if not resume:
        return None, fresh, cfg
    found, done, db = latest_checkpoint(folder), runs.committed_rounds(), store.file_of(con)
    if found is None:
        if done not in ([], [0]):  # round 0 committed, then a kill or a full disk before its checkpoint: redone
            raise ValueError(f"--resume: run {runs.run!r} has {len(done)} round(s) in {db} but no checkpoint under "
                             f"{folder / 'checkpoints'}; restore its checkpoints, or start it anew with --overwrite")
        return None, fresh, cfg
    state = read_state(found)
    cfg = _same_settings(runs, spec.name, cfg)
    distributed.check_resume(state, cfg, world)
    completed = state["completed"]
    if found.name != f"round-{completed:06d}":
        raise ValueError(f"--resume: {found / 'state.json'} says {completed} rounds completed but its folder is "
                         f"{found.name}; the checkpoint was edited or damaged: start the run anew with --overwrite")
    if done not in (list(range(completed)), list(range(completed + 1))):
        held = f"rounds {done[0]}-{done[-1]}" if done else "no round"
        raise ValueError(f"--resume: the checkpoint {found} has {completed} round(s) but {db} holds {held} of run "
                         f"{runs.run!r}: they do not belong together (a store rebuilt, e.g. by `workbench world "
                         "--force`, or restored from another copy); start the run anew with --overwrite")
    made_on = state.get("world_fingerprint")
    if made_on is not None and made_on != store.world_fingerprint(con):
        raise ValueError(f"--resume: {db} holds another world than the one run {runs.run!r} was trained on (its "
                         "entities or passages changed since its checkpoint); start the run anew with --overwrite")
    if cfg.method.steps < completed:
        raise ValueError(f"--steps {cfg.method.steps}: run {runs.run!r} has completed {completed} rounds; give "
                         f"--steps {completed} or more (the round count to continue up to)")
    return found, state, cfg


@contextlib.contextmanager
def damaged_checkpoint(found: Path | None):
    """Reading checkpoint ``found``'s weights or optimiser state: what fails there (a file cut short
    by a full disk, say) is one ValueError naming the checkpoint and what to do."""
    try:
        yield
    except (ValueError, RuntimeError, OSError, EOFError, pickle.UnpicklingError) as err:
        if found is None:
            raise
        reason = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise ValueError(f"--resume: the checkpoint {found} is damaged ({reason}); start the run anew with "
                         "--overwrite") from err


def read_state(checkpoint: Path) -> dict:
    """A checkpoint's ``state.json``, or ValueError naming the file when it is not one we wrote.

    Example:
        >>> read_state(Path("no-such-checkpoint"))
        Traceback (most recent call last):
        ...
        ValueError: no-such-checkpoint/state.json: unreadable ([Errno 2] No such file or directory); start the run anew with --overwrite
    """
    path = checkpoint / "state.json"
    try:
        state = json.loads(path.read_text())
        if not isinstance(state, dict):
            raise ValueError("not a JSON object")
        missing = [k for k in ("completed", "best_val", "non_finite", "kl_coef") if k not in state]
        if missing:
            raise ValueError(f"missing {', '.join(missing)}")
        if isinstance(state["completed"], bool) or not isinstance(state["completed"], int) or state["completed"] < 0:
            raise ValueError(f"completed {state['completed']!r} is not a round count")
    except (OSError, ValueError) as err:
        reason = f"[Errno {err.errno}] {err.strerror}" if isinstance(err, OSError) else err
        raise ValueError(f"{path}: unreadable ({reason}); start the run anew with --overwrite") from None
    return state


def load_policies(cfg: Config, base, found: Path | None, world: int = 1):
    """(policy, reference) of a run from ``base`` and the checkpoint ``found`` (None: a new run), by
    :func:`make_policies`: a full fine-tune's policy from the checkpoint's ``model``, its reference
    a second copy of the base; LoRA's adapters from the checkpoint's ``adapter``, over the base in
    bfloat16 on CUDA (float32 on the CPU). The policy generates with ``rollout.backend`` (on a rank
    of ``world`` > 1, ``distributed.rank_backend``'s: 'auto' is Hugging Face); the reference never
    generates.
    """
    from workbench.policy.generation import backend_settings
    from workbench.policy.model import Policy

    m, settings = cfg.method, backend_settings(cfg.rollout)
    lora.import_unsloth_first(default_device(), m.lora_rank)  # a follower rank's first chance (train's, on rank 0)
    settings["backend"] = distributed.rank_backend(settings["backend"], world)

    def load(dtype, role: str):
        if role == "reference":
            return Policy.load(base, dtype=dtype)
        if m.lora_rank == 0:
            return Policy.load(found / "model" if found else base, dtype=dtype, **settings)
        return Policy.load(base, dtype=dtype, lora_rank=m.lora_rank, **settings)
    dtype = torch.bfloat16 if torch.cuda.is_available() else torch.float32
    return make_policies(load, m.lora_rank, m.lora_alpha, m.seed, dtype, found / "adapter" if found else None,
                         m.gradient_checkpointing, m.micro_batch * cfg.rollout.max_total_tokens)


def make_policies(load, lora_rank: int, lora_alpha: float, seed: int, dtype, adapter: Path | None = None,
                  checkpointing: str = "auto", micro_batch_tokens: int = 0):
    """(policy, reference or None) by the run's recipe, each model from ``load(dtype, role)`` (role
    'policy' or 'reference'; a run loads its base, ``bench gpu`` builds a random model in memory).
    The policy's gradient checkpointing is ``checkpointing`` (``method.gradient_checkpointing``)
    as ``policy.checkpointing.choose`` resolves it for a micro-batch of ``micro_batch_tokens``.

    Full fine-tune (``lora_rank`` = 0): two float32 models (bf16 weights, Policy.load's CUDA
    default, round away most Adam steps and would put a rounding gap between policy and reference;
    LOG.md, session 3). LoRA: one ``dtype`` model with adapters of ``lora_rank``, ``lora_alpha``,
    ``seed`` (set from ``adapter`` when given); its reference is that model with the adapters off
    (None here).

    Example:
        >>> from workbench.policy.model import Policy, tiny_model
        >>> from workbench.config import preset
        >>> from workbench.policy.tokenizer import train_tokenizer
        >>> tok = train_tokenizer(["a b c"] * 5, vocab_size=300)
        >>> load = lambda dtype, role: Policy(tiny_model(preset("smoke").backbone, tok, seed=0).to(dtype), tok, device="cpu")
        >>> policy, reference = make_policies(load, 0, 0, 0, torch.bfloat16)
        >>> next(policy.model.parameters()).dtype, reference is not policy
        (torch.float32, True)
        >>> make_policies(load, 2, 4, 0, torch.float32)[1] is None
        True
    """
    from workbench.policy.checkpointing import choose

    full = lora_rank == 0
    policy = load(torch.float32 if full else dtype, "policy")
    mode = choose(checkpointing, policy.device, policy.model.config, micro_batch_tokens)
    logging.getLogger(__name__).info("update: gradient checkpointing %s (method.gradient_checkpointing=%s, "
                                     "%d tokens a micro-batch)", mode, checkpointing, micro_batch_tokens)
    if full:
        policy.checkpoint_activations(mode)
        return policy, load(torch.float32, "reference")
    policy.add_lora(lora_rank, lora_alpha, seed=seed, adapter=adapter, gradient_checkpointing=mode)
    return policy, None


def _rounds(trainer: Trainer, runs: RunStore, folder: Path, base, state: dict, progress: bool, log) -> None:
    """The rounds of a run: each round, its validation, its commit, best and checkpoint; after each,
    the text bar moves and ``runs/<run>/progress.json`` is rewritten."""
    from workbench.kg.pool import evidence_counts

    def pool_size(con, run, round):
        ids, counts = evidence_counts(con, run, round)
        return int(len(ids)), int(counts.sum())

    cfg, steps = trainer.cfg, trainer.cfg.method.steps
    averaged_from = first_averaged(cfg.method.weight_average, steps) if trainer.average is not None else steps
    _write_progress(trainer, folder, state, "running")
    with round_bar(trainer.run, trainer.spec.name, state["completed"], steps, enabled=progress) as bar:
        for t in range(state["completed"], steps):
            result = trainer.run_round(t)
            lap = Laps("after round")  # logged as each ends; not among the round's stored time_* metrics
            val = None  # a round left unvalidated (method.val_every) records val_em null and is no `best`
            validated = validates(t, steps, cfg.method.val_every, trainer.iteration_ends)
            if validated:
                val = validation_em(trainer, cfg.method.val_questions)
                lap("validation")
            # a run that averages validates the mean too: the model its test evaluates (null where it is not)
            averaged = {} if trainer.average is None else {"val_em_average": None}
            if t >= averaged_from:  # method.weight_average's tail
                trainer.average.add(trainer.policy.model)
                if validated:
                    with trainer.average.swapped_into(trainer.policy.model):
                        averaged["val_em_average"] = validation_em(trainer, cfg.method.val_questions)
                    lap("validation of the mean")
            metrics = runs.commit_round(result, val, cfg.method.tau_path, trainer.pool_run, pool_size, averaged)
            lap("commit")
            if val is not None and val > state["best_val"]:
                state["best_val"] = metrics["val_em"]
                _save_policy(trainer, folder, base, "best", t, metrics["val_em"])
                lap("best")
            if t >= averaged_from:
                with trainer.average.swapped_into(trainer.policy.model):
                    _save_policy(trainer, folder, base, "average", t, None, {"rounds_averaged": trainer.average.count})
                lap("average")
            state["completed"] = t + 1
            if len(trainer.iteration_ends) > 1 and state["completed"] in trainer.iteration_ends:
                _end_iteration(trainer, folder, trainer.iteration_ends.index(state["completed"]) + 1)
                lap("iteration")
            save_checkpoint(folder, trainer, state)
            lap("checkpoint")
            _write_progress(trainer, folder, state, "running")
            bar.set_postfix(round_postfix(metrics, state["best_val"]), refresh=False)
            bar.update(1)  # one redraw a round: one line in papermill's log


def validates(t: int, steps: int, every: int, iteration_ends=()) -> bool:
    """Whether round ``t`` (0-based) of a ``steps``-round run is validated: every ``every``-th round
    (``method.val_every``, ours), the last, and the last of each iteration (its best is kept), so the
    ``best`` checkpoint is the best of those rounds (of every round with the default 1).

    Example:
        >>> [t for t in range(10) if validates(t, 10, 4)]
        [3, 7, 9]
    """
    done = t + 1
    return done % every == 0 or done == steps or done in iteration_ends


def _end_iteration(trainer: Trainer, folder: Path, k: int) -> None:
    """Iteration ``k`` ended (seed 002, Table 9; ``method.iterations``): the run's best so far is kept
    as ``iterations/iter-K`` (before the round's checkpoint, so a resume never misses it), and each
    run extension is told (Dr. Free's ``updated`` anchor scores its likelihoods from the next round on)."""
    kept = save_iteration(folder, k)
    for extension in trainer.extensions:
        extension.iteration_ended(k, kept, last=k == len(trainer.iteration_ends))


def _write_progress(trainer: Trainer, folder: Path, state: dict, status: str) -> None:
    """``runs/<run>/progress.json``: what ``runs show`` prints while the training holds the store."""
    rounds = [{k: m.get(k) for k in METRIC_KEYS} for m in run_metrics(trainer.con, trainer.run)]
    write_progress(folder, {"run": trainer.run, "method": trainer.spec.name, "preset": trainer.cfg.name,
                            "status": status, "completed": state["completed"], "steps": trainer.cfg.method.steps,
                            "best_val_em": max(state["best_val"], 0.0) if rounds else None, "rounds": rounds})


def _claim_folder(folder: Path, db: str, runs: RunStore, resume: bool, overwrite: bool) -> None:
    """Make ``folder`` this store's run folder, refusing what would lose a user's run
    (:func:`_check_folder`)."""
    marker = folder / "run.json"
    owner, exists = _check_folder(folder, db, runs, resume, overwrite)
    if overwrite and exists:
        runs.forget_from(0)
        if owner is not None:
            shutil.rmtree(folder)  # exactly this run's folder: run.json names this store
    folder.mkdir(parents=True, exist_ok=True)
    marker.write_text(json.dumps({"run": folder.name, "store": db}))
    _recover_swaps(folder)


def _check_folder(folder: Path, db: str, runs: RunStore | None, resume: bool, overwrite: bool):
    """(the store ``folder``'s ``run.json`` names or None, whether the run exists), writing
    nothing; ValueError for a folder another store owns, one the workbench did not make (no
    ``run.json``: never touched), or an existing run of this store (``runs``; None: a store not
    there yet) without ``resume`` or ``overwrite``."""
    marker = folder / "run.json"
    try:
        owner = json.loads(marker.read_text())["store"] if marker.exists() else None
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise ValueError(f"--run {folder.name!r}: {marker} is unreadable ({err!r}); move the folder away "
                         "or pick another name") from None
    if folder.exists() and owner is None and any(folder.iterdir()):
        raise ValueError(f"--run {folder.name!r}: {folder} exists without a run.json (made by hand, or by a "
                         "workbench older than 2026-12 that did not record its store); move it away or pick another name")
    if owner is not None and owner != db:
        raise ValueError(f"--run {folder.name!r}: {folder} belongs to the store {owner}, not {db}; "
                         "pick another name (or WORKBENCH_RUNS) for this store's run")
    exists = (runs is not None and runs.exists()) or (folder / "best").exists() or latest_checkpoint(folder) is not None
    if exists and not (resume or overwrite):
        raise ValueError(f"--run {folder.name!r} exists in this store ({db}): continue it with --resume, "
                         "replace it with --overwrite, or pick another name")
    return owner, exists


def _recover_swaps(folder: Path) -> None:
    """Undo a swap of ``best`` or ``average`` that a kill interrupted: the previous one comes back
    (the interrupted round is recomputed on resume, and saves both again)."""
    for name in ("best", "average"):
        old = folder / f".{name}-old"
        if old.exists() and not (folder / name).exists():
            old.rename(folder / name)
        for tmp in folder.glob(f".{name}-*"):
            if tmp != old and tmp.is_dir():
                shutil.rmtree(tmp)


def base_model(con, cfg: Config, spec, log=None):
    """The base a run of ``spec`` starts from: ``backbone.model``, or for the tiny backbone its warm
    start (the shipped copy at preset tiny; trained and cached on first use elsewhere), with the
    method's KG-tool option and extra demonstrations. ``log`` gets the warm start's progress."""
    from workbench.policy.warmstart import warmstart

    if cfg.backbone.model != "tiny":
        return paths.local_model(cfg.backbone.model)
    return warmstart(con, preset=cfg, seed=cfg.backbone.seed, log=log, kg_tool=kg_warmstart(spec, cfg),
                     extra_demos=warmstart_demos(spec, cfg))


def kg_warmstart(spec, cfg: Config) -> dict | None:
    """The warm start's KG-tool option for a method offered the KG tool (DynaSearcher), else None
    (the default warm start)."""
    if not uses_kg_tool(spec, cfg.method.kg_tool):
        return None
    return {k: v for k, v in tool_settings(cfg.method).items() if k != "filter"}


def _save_policy(trainer: Trainer, folder: Path, base, name: str, t: int, val_em: float | None,
                 extra: dict | None = None) -> None:
    """The policy as ``folder/name`` (``best``: the best-validation policy; ``average``: the weight
    average, swapped in by the caller), with a ``workbench.json`` holding its Table 1 labels (the
    base's backbone, this method) and where it came from, so ``workbench eval`` names its row without
    flags (and, for a solver offered the KG tool or EoG's graph tools, their settings: eval offers them
    too). Written beside the old one, then swapped in."""
    from workbench.policy.model import model_labels

    tmp = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=folder))
    kg_tool = tool_settings(trainer.cfg.method) if trainer.kg is not None else None
    graph_tools = trainer.graph.settings if trainer.graph is not None else None
    with written_whole(tmp, f"the {name} policy"):
        trainer.policy.save(tmp)
        (tmp / "workbench.json").write_text(json.dumps(
            {"backbone": model_labels(base)["backbone"], "method": trainer.spec.name, "run": trainer.run, "round": t,
             "val_em": val_em, "base": str(base), **(extra or {}), **({"kg_tool": kg_tool} if kg_tool else {}),
             **({"graph_tools": graph_tools} if graph_tools else {})}, indent=2))
    final, old = folder / name, folder / f".{name}-old"
    if old.exists():
        shutil.rmtree(old)
    if final.exists():
        final.rename(old)
    tmp.rename(final)
    shutil.rmtree(old, ignore_errors=True)


@contextlib.contextmanager
def written_whole(tmp: Path, what: str):
    """Writing ``what`` into the temporary folder ``tmp``: on failure ``tmp`` is removed, and a full
    disk (torch reports it as "unexpected pos", safetensors as its own error of "os error 28") is one OSError that says
    so and names the folder; the last complete copy stays in place."""
    try:
        yield
    except (RuntimeError, OSError, SafetensorError) as err:
        shutil.rmtree(tmp, ignore_errors=True)
        full = getattr(err, "errno", None) in (errno.ENOSPC, errno.EFBIG, errno.EDQUOT) or any(
            s in str(err) for s in ("unexpected pos", "write failed", "No space left", "os error 28")) or \
            shutil.disk_usage(tmp.parent).free < 2**20
        if not full:
            raise
        raise OSError(errno.ENOSPC, f"no space left to write {what} (the last complete one is kept; free space, "
                                    "then continue with --resume)", str(tmp.parent)) from err


def save_checkpoint(folder: Path, trainer: Trainer, state: dict) -> Path:
    """Write ``checkpoints/round-NNNNNN`` whole (the policy's ``model``, or a LoRA policy's
    ``adapter`` only; ``Trainer.state_dict``; the weight average, if any; ``state.json`` last) under a
    temporary name, rename it into place, then delete older checkpoints: a kill at any point leaves the
    last complete one for :func:`latest_checkpoint`."""
    root = folder / "checkpoints"
    root.mkdir(parents=True, exist_ok=True)
    final = root / f"round-{state['completed']:06d}"
    tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=root))
    with written_whole(tmp, "the checkpoint"):
        if trainer.policy.is_lora:  # the adapter alone: a 3B model with its optimiser state would not fit the disk
            trainer.policy.save_adapter(tmp / "adapter")
        else:
            trainer.policy.save(tmp / "model")
        trainer_state = trainer.state_dict()
        torch.save(trainer_state.pop("optimizer"), tmp / "optimizer.pt")
        save_pending(tmp, trainer.pending)  # the next round's rollouts under method.async_staleness, if any
        if trainer.average is not None:  # method.weight_average: the mean so far, with its count
            trainer.average.save(tmp)
        (tmp / "state.json").write_text(json.dumps({**state, **trainer_state}))
    if final.exists():  # a stale copy of this round (an earlier, interrupted attempt)
        shutil.rmtree(final)
    tmp.rename(final)
    for other in root.iterdir():
        if other != final and (other.name.startswith(".tmp-") or _CHECKPOINT.fullmatch(other.name)):
            shutil.rmtree(other)
    return final


def latest_checkpoint(folder: Path) -> Path | None:
    """The complete checkpoint of the most rounds under ``folder/checkpoints`` (one with its
    ``state.json``), or None."""
    root = folder / "checkpoints"
    found = [p for p in root.iterdir() if _CHECKPOINT.fullmatch(p.name) and (p / "state.json").exists()] \
        if root.exists() else []
    return max(found, key=lambda p: p.name, default=None)


def _same_settings(runs: RunStore, method: str, cfg: Config) -> Config:
    """--resume continues the same run: the method and every setting but the total steps must
    match. Returns ``cfg`` with the run's first annealing horizon (Eq. 10's T), so resuming to more
    steps does not re-stretch p*(t) mid-run."""
    found = runs.settings()
    if found is None:
        return cfg
    stored_method, stored = found
    mine = cfg.to_dict()
    changed_defaults = {tuple(key.split(".")): old for key, old in CHANGED_DEFAULTS.items()}  # -> (value, date)
    for section, fields in Config().to_dict().items():  # a field added since the run began has its default
        if isinstance(fields, dict) and isinstance(stored.get(section), dict):  # of then, if it changed since
            then = {f: was for (s, f), (was, _) in changed_defaults.items() if s == section}
            stored[section] = {**fields, **then, **stored[section]}
    horizon = stored["method"].get("anneal_steps") or stored["method"]["steps"]
    for d in (stored, mine):
        d["method"].pop("steps", None)
        d["method"].pop("anneal_steps", None)
    if stored_method != method or stored != mine:
        changed = [f"{s}.{k}: {stored.get(s, {}).get(k)!r} -> {v!r}" for s, fields in mine.items() if isinstance(fields, dict)
                   for k, v in fields.items() if stored.get(s, {}).get(k) != v]
        old = [f"--set {section}.{field}={was} (its default before {date})"  # the --set that gives it back
               for (section, field), (was, date) in changed_defaults.items()
               if stored[section].get(field) == was != mine[section][field]]
        raise ValueError(f"--resume: run {runs.run!r} was started with other settings (method {stored_method!r}"
                         f"{'; ' + ', '.join(changed) if changed else ''}); resume with the same --method, --preset, "
                         f"--seed and --set values{' (here ' + ', '.join(old) + ')' if old else ''}, or use a new --run")
    return dataclasses.replace(cfg, method=dataclasses.replace(cfg.method, anneal_steps=horizon))
