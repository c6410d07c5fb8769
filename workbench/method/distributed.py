"""The loop on several processes (issue 20): torch.distributed data parallelism, one writer.

Launched by ``workbench train --gpus N`` (:func:`launch`: torch's elastic launcher, what
``torchrun --standalone --nproc-per-node N`` does; ``torchrun`` itself cannot launch it, README
"Several GPUs"). The launcher sets ``RANK``/``WORLD_SIZE``/``LOCAL_RANK``/``MASTER_ADDR``/
``MASTER_PORT``, :func:`launch` adds ``WORKBENCH_DIST_LAUNCHED=1``, and the launcher tears the group
down when any rank fails. :func:`from_env` is None without that variable (a plain ``workbench
train``, also inside a SLURM or torchrun job that sets ``WORLD_SIZE``), so one process runs exactly
the one-process code (no hook below is reached).

One round on N ranks, same order as ``loop.Trainer.run_round`` (a ``Dist`` is the trainer's rank
strategy, ``method.ranks``; the trainer never imports this module):

1. rank 0 proposes and gates (Eqs. 2, 6) and broadcasts the round's slots;
2. the solver slots are split in N contiguous blocks; rank r rolls out its block (Eq. 3) with its
   own seed (:meth:`Dist.rollout_seed`, from seed, round and rank) -- or, with
   ``rollout.data_parallel = 'replicate'``, every rank rolls out every slot with the one-process
   seed; the trajectories are gathered on every rank in slot order;
3. rank 0 scores the rewards (Eqs. 7-10, it holds the store's G_t) and broadcasts the scored round,
   so every rank computes the same advantages (Eqs. 11-12);
4. each optimiser step's rows are dealt out by length (rank r takes every N-th row of the
   length-sorted order), each rank back-propagates its rows' share of the global token mean and the
   gradients (and the step's loss/KL sums) are summed over ranks with ``all_reduce``: every rank
   then clips and steps on the gradient of one process at the same global batch.

Only rank 0 opens the store (DuckDB admits one writing process, and then no reader), writes the
rounds, checkpoints, best and ``progress.json``, and serves its retriever (and DynaSearcher's KG
tool) on 127.0.0.1 (``search.server``) to the other ranks; each rank's client keeps its own query
cache, and the round's hit rate sums every rank's hits and lookups. The other ranks read only the run's checkpoint directory at start.

Why an all-reduce of the gradients and not ``DistributedDataParallel``'s wrapper: a rank's share of
a step is a variable number of micro-batches (rows differ in length), and DDP's per-backward
hooks need the same number of backward passes on every rank; one flattened ``all_reduce`` after the
local passes is DDP's collective without that constraint, and the sum (not DDP's mean) keeps the
token mean over the global batch exact.

Example:
    >>> from_env({"WORLD_SIZE": "1"}) is None
    True
    >>> shard_bounds(5, rank=1, world=2)
    (3, 5)
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import os
import threading
from dataclasses import dataclass
from datetime import timedelta

import numpy as np
import torch
import torch.distributed as torch_dist

DATA_PARALLEL = ("shard", "replicate")  # rollout.data_parallel's values (config.RULES, tested equal)


def shard_bounds(n: int, rank: int, world: int) -> tuple[int, int]:
    """[start, stop) of rank ``rank``'s contiguous block of ``n`` items (``np.array_split``'s
    blocks: the first n % world ranks take one more).

    Example:
        >>> [shard_bounds(5, r, 2) for r in range(2)]
        [(0, 3), (3, 5)]
    """
    if not 0 <= rank < world:
        raise ValueError(f"shard_bounds: rank {rank} outside a world of {world}")
    base, extra = divmod(n, world)
    start = rank * base + min(rank, extra)
    return start, start + base + (1 if rank < extra else 0)


def collective(method):
    """A ``Dist`` method whose collective failed because the group broke (another rank stopped:
    the launcher names it, and its error is above) raises one line of the workbench's instead of
    torch.distributed's traceback; other errors (a CUDA failure, running out of memory) pass."""
    @functools.wraps(method)
    def wrapped(self, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        except RuntimeError as err:
            if type(err) is not RuntimeError and not isinstance(err, torch_dist.DistError):
                raise
            raise RuntimeError(f"rank {self.rank}: {method.__name__} failed, the process group broke (another rank "
                               f"stopped?): {str(err).splitlines()[0]}") from err
    return wrapped


@dataclass
class Dist:
    """This process's place in the group: ``rank`` of ``world``, and where rank 0's retriever is
    served (``url``; set by :func:`lead` / :func:`follow`). It is the trainer's rank strategy
    (``method.ranks``: ``Trainer.ranks``) on every rank of a group."""

    rank: int
    world: int
    url: str | None = None
    _server: object = None

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @collective
    def broadcast(self, obj=None):
        """Rank 0's ``obj`` on every rank (pickled; ``torch.distributed.broadcast_object_list``)."""
        box = [obj if self.is_main else None]
        torch_dist.broadcast_object_list(box, src=0)
        return box[0]

    @collective
    def gather(self, obj) -> list:
        """Every rank's ``obj``, in rank order, on every rank."""
        out = [None] * self.world
        torch_dist.all_gather_object(out, obj)
        return out

    def rollout_seed(self, seed: int) -> int:
        """Rank ``rank``'s rollout seed from the round's one-process seed: deterministic by (seed,
        round, rank, world); rank 0 of any world keeps the one-process seed."""
        return seed if self.rank == 0 else (seed * 1_000_003 + 7919 * self.rank + self.world) % (2 ** 63)

    def step_rows(self, order: list[int]) -> list[int]:
        """This rank's rows of a step from the length-sorted ``order``: every ``world``-th, so each
        rank gets short and long rows alike."""
        return order[self.rank::self.world]

    @collective
    def all_reduce_step(self, params: list[torch.Tensor], sums: dict, bucket: int = 1 << 26) -> dict:
        """Sum every trainable gradient over ranks, in place, in flat buffers of at most ``bucket``
        elements (a rank without a gradient adds zeros); a parameter no rank has a gradient for
        gets None back, so AdamW skips it as one process would. Returns ``sums`` (the step's
        loss/KL/... sums, float64 as one process keeps them) summed over ranks."""
        grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
        has = [float(p.grad is not None) for p in params]
        start = 0
        while start < len(grads):
            stop, size = start, 0
            while stop < len(grads) and (stop == start or size + grads[stop].numel() <= bucket):
                size += grads[stop].numel()
                stop += 1
            flat = torch.cat([g.reshape(-1) for g in grads[start:stop]])
            torch_dist.all_reduce(flat, op=torch_dist.ReduceOp.SUM)
            offset = 0
            for p, g in zip(params[start:stop], grads[start:stop]):
                p.grad = flat[offset:offset + g.numel()].view_as(g).clone()
                offset += g.numel()
            start = stop
        keys = sorted(sums)
        # the has-gradient flags ride in the sums' collective: one all_reduce fewer a step
        totals = torch.tensor([sums[k] for k in keys] + has, dtype=torch.float64,
                              device=grads[0].device if grads else "cpu")
        torch_dist.all_reduce(totals, op=torch_dist.ReduceOp.SUM)
        totals = totals.tolist()
        for p, n in zip(params, totals[len(keys):]):
            if n == 0:
                p.grad = None
        return dict(zip(keys, totals[:len(keys)]))

    # -- the rank strategy (method.ranks): how the trainer's round runs on this rank ---------------

    def share(self, obj=None):
        """Rank 0's ``obj`` on every rank (the round's tasks and slots, after steps 1-2 and 4)."""
        return self.broadcast(obj)

    def solve(self, trainer, t: int, slots: list) -> None:
        """Step 3: this rank's block of slots rolled out with its own seed (:meth:`rollout_seed`),
        every rank's gathered into ``slots`` in slot order; replicated rollouts
        (``rollout.data_parallel=replicate``): every slot here, with the one-process seed."""
        from workbench.method.round import Rollout

        if trainer.cfg.rollout.data_parallel == "replicate":
            trainer.solve(t, slots)
            return
        start, stop = shard_bounds(len(slots), self.rank, self.world)
        mine = [dataclasses.replace(s, rollouts=[]) for s in slots[start:stop]]
        if mine:
            trainer.solve(t, mine, seed=self.rollout_seed(trainer.seed_for(t, 4)))
        found = [[r.trajectory for r in s.rollouts] for s in mine]
        offset = 0
        for block in self.gather(found):
            for i, trajectories in enumerate(block):
                for traj in trajectories:
                    traj.question_index = offset + i  # the round's slot index (run_store keys on it)
                    slots[offset + i].rollouts.append(Rollout(traj, None))
            offset += len(block)

    def hit_rate(self, search) -> float:
        """The round's search-cache hit rate over every rank's lookups."""
        stats = self.gather(search.cache_stats())
        hits, lookups = sum(s["hits"] for s in stats), sum(s["hits"] + s["misses"] for s in stats)
        return hits / lookups if lookups else 0.0

    def spread(self, compute, rows: list) -> list:
        """``compute(rows)`` (the trainer's old-policy log-probs) with each rank computing its block,
        gathered in row order."""
        start, stop = shard_bounds(len(rows), self.rank, self.world)
        mine = compute(rows[start:stop]) if stop > start else []
        return [f for block in self.gather([np.asarray(f.cpu() if torch.is_tensor(f) else f) for f in mine])
                for f in block]

    def close(self, ok: bool = True) -> None:
        """Stop rank 0's retrieval server (if it serves one), print this rank's peak GPU memory and
        leave the process group. After an error only a gloo group is destroyed: an NCCL
        teardown can wait on the peers' pending collectives (the launcher stops them instead)."""
        print(peak_line(self.rank), flush=True)
        if self._server is not None:
            server, thread = self._server
            server.shutdown()
            server.server_close()
            thread.join()
            self._server = None
        if torch_dist.is_initialized() and (ok or torch_dist.get_backend() == "gloo"):
            torch_dist.destroy_process_group()


def peak_line(rank: int) -> str:
    """``rank R: peak GPU memory X GiB`` (what the scaling measurement reads per rank), or that the
    rank ran on the CPU.

    Example:
        >>> peak_line(0) if not torch.cuda.is_available() else "rank 0: on the CPU"
        'rank 0: on the CPU'
    """
    if not torch.cuda.is_available():
        return f"rank {rank}: on the CPU"
    return f"rank {rank}: peak GPU memory {torch.cuda.max_memory_allocated() / 2 ** 30:.2f} GiB"


LAUNCHED = "WORKBENCH_DIST_LAUNCHED"  # set by launch() for its ranks: only they join a group


def launched(env=None) -> bool:
    """Whether this process is a rank :func:`launch` started (``WORKBENCH_DIST_LAUNCHED=1``).

    Example:
        >>> launched({"WORLD_SIZE": "4"})
        False
    """
    return (os.environ if env is None else env).get(LAUNCHED) == "1"


def from_env(env=None) -> Dist | None:
    """The process group the launcher describes in ``env`` (default ``os.environ``), joined once;
    None for one process: not a rank of :func:`launch` (a ``WORLD_SIZE`` of a SLURM or torchrun job
    around a plain ``train`` is not ours), or ``WORLD_SIZE`` unset or 1. NCCL on CUDA (each rank on
    GPU ``LOCAL_RANK``, NVLink multicast off: ``NCCL_NVLS_ENABLE=0`` unless set), gloo on the CPU.

    Example:
        >>> from_env({}) is None, from_env({"WORLD_SIZE": "2", "RANK": "1"}) is None
        (True, True)
    """
    env = os.environ if env is None else env
    world = int(env.get("WORLD_SIZE", "1"))
    if world <= 1 or not launched(env):
        return None
    rank = int(env["RANK"])
    if not torch_dist.is_initialized():
        # the other ranks wait in a collective while rank 0 validates, commits and checkpoints
        # (minutes at paper shape): far past the default 10 minutes, ours
        timeout = timedelta(seconds=float(env.get("WORKBENCH_DIST_TIMEOUT", 4 * 3600)))
        if torch.cuda.is_available():
            os.environ.setdefault("NCCL_NVLS_ENABLE", "0")  # the device README: NVLink multicast off
            torch.cuda.set_device(int(env.get("LOCAL_RANK", rank)))
            torch_dist.init_process_group("nccl", timeout=timeout)
        else:
            torch_dist.init_process_group("gloo", timeout=timeout)
    return Dist(rank, world)


def rank_backend(name: str, world: int) -> str:
    """``rollout.backend`` for a rank of ``world``: ``auto`` is Hugging Face under several ranks
    (one vLLM engine per rank needs vLLM's ``external_launcher`` mode, not wired yet), an explicit
    ``vllm`` is refused there; one process keeps ``name``.

    Example:
        >>> rank_backend("auto", 2), rank_backend("auto", 1)
        ('hf', 'auto')
        >>> rank_backend("vllm", 2)
        Traceback (most recent call last):
        ...
        ValueError: rollout.backend='vllm' under --gpus 2: one vLLM engine per rank is not supported yet (vLLM's external_launcher mode is not wired); use rollout.backend=hf or auto (hf under --gpus)
    """
    if world <= 1:
        return name
    if name == "vllm":
        raise ValueError(f"rollout.backend='vllm' under --gpus {world}: one vLLM engine per rank is not supported "
                         "yet (vLLM's external_launcher mode is not wired); use rollout.backend=hf or auto "
                         "(hf under --gpus)")
    return "hf" if name == "auto" else name


def check_config(cfg, spec, world: int) -> None:
    """Refuse what ``world`` > 1 ranks cannot run as one process does: ``rollout.backend=vllm``
    (:func:`rank_backend`), EoG's graph tools (they read the store, which only rank 0 holds) and
    ``method.kg_filter=llm`` with the KG tool on (the other ranks'
    ``/kg_search`` would run rank 0's policy in its server thread, concurrently with rank 0's
    rollouts and their seeded RNG: not deterministic, and vLLM is not thread-safe).

    Example:
        >>> from workbench.config import preset
        >>> from workbench.method.methods import method_spec
        >>> check_config(preset("smoke", **{"method.kg_filter": "llm"}), method_spec("dynasearcher"), 2)
        Traceback (most recent call last):
        ...
        ValueError: method.kg_filter='llm' under --gpus 2: the other ranks' KG searches would be judged by rank 0's policy in its server thread, concurrently with its rollouts (not deterministic); use method.kg_filter=overlap or none, or one process
    """
    from workbench.method.methods import uses_graph_tools, uses_kg_tool

    if world <= 1:
        return
    rank_backend(cfg.rollout.backend, world)
    if cfg.method.async_staleness:  # the overlap is one process's thread; ranks run the synchronous round
        raise ValueError(f"method.async_staleness={cfg.method.async_staleness} under --gpus {world}: the asynchronous "
                         "round runs in one process; use method.async_staleness=0 with several GPUs")
    if uses_graph_tools(spec, cfg.method.graph_tools):  # the other ranks hold no store to explore
        raise ValueError(f"method.graph_tools under --gpus {world}: EoG's graph tools read the store, which only "
                         "rank 0 holds (no server serves them yet); train EoG's rows in one process")
    if cfg.method.kg_filter == "llm" and uses_kg_tool(spec, cfg.method.kg_tool):
        raise ValueError(f"method.kg_filter='llm' under --gpus {world}: the other ranks' KG searches would be "
                         "judged by rank 0's policy in its server thread, concurrently with its rollouts (not "
                         "deterministic); use method.kg_filter=overlap or none, or one process")


def check_resume(state: dict, cfg, world: int) -> None:
    """Refuse resuming at ``world`` ranks a checkpoint (its ``state.json``: ``world``, absent for one
    process) made at another number of ranks with sharded rollouts: each rank's rollout seed
    depends on its rank and the world size, so the continued run would sample another run's
    rollouts. Replicated rollouts (``rollout.data_parallel=replicate``) do not depend on it.

    Example:
        >>> from workbench.config import preset
        >>> check_resume({"completed": 1, "world": 2}, preset("smoke"), 1)
        Traceback (most recent call last):
        ...
        ValueError: --resume: the checkpoint was made on 2 processes with sharded rollouts (each rank its own seed); resume it with --gpus 2 (or start a new --run)
        >>> check_resume({"completed": 1, "world": 2}, preset("smoke", **{"rollout.data_parallel": "replicate"}), 1)
    """
    made = int(state.get("world", 1))
    if made != world and cfg.rollout.data_parallel == "shard":
        raise ValueError(f"--resume: the checkpoint was made on {made} process{'es' * (made > 1)} with sharded "
                         f"rollouts (each rank its own seed); resume it with --gpus {made} (or start a new --run)")


def with_world(state: dict, world: int) -> dict:
    """``state`` recording the world size its next checkpoints are made at (no key for one process:
    one-process checkpoints stay as they were).

    Example:
        >>> with_world({"completed": 1, "world": 2}, 1), with_world({"completed": 0}, 2)
        ({'completed': 1}, {'completed': 0, 'world': 2})
    """
    out = {k: v for k, v in state.items() if k != "world"}
    return {**out, "world": world} if world > 1 else out


def lead(dist: Dist, trainer, base, found, state: dict) -> None:
    """Rank 0, once its trainer is set up: serve its retriever (and KG tool) on 127.0.0.1 and send
    the other ranks what they build theirs from (settings, base, checkpoint, state, URL)."""
    from workbench.search.server import make_server, url_of

    server = make_server(_served(trainer.search), "127.0.0.1", 0, trainer.kg)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    dist._server, dist.url = (server, thread), url_of(server)
    dist.broadcast({"cfg": trainer.cfg, "method": trainer.spec.name, "run": trainer.run, "base": str(base),
                    "found": str(found) if found else None, "state": state, "url": dist.url,
                    "kg": trainer.kg is not None})
    trainer.ranks = dist


def _served(tool):
    """Rank 0's retriever as the other ranks reach it: the same index under the same lock, uncached
    and uncounted here (each rank's client keeps its own cache and counts, summed per round)."""
    from workbench.search.tool import Retriever

    class Served(Retriever):
        def _search(self, queries, k):
            return tool._search(queries, k)

    served = Served(tool.topk, cache=False)
    served._lock = tool._lock  # one search at a time into the index rank 0 also searches
    return served


def follow(dist: Dist, load_policies, log=print) -> list[dict]:
    """A rank other than 0: build the same trainer without the store (rank 0's settings, base and
    checkpoint; its served retriever) and take part in every round; returns [] (the metrics are
    rank 0's store's)."""
    from pathlib import Path

    from workbench.method.loop import Trainer
    from workbench.method.methods import method_spec
    from workbench.search.client import RemoteKGSearch, RemoteRetriever

    setup = dist.broadcast()
    cfg, state = setup["cfg"], setup["state"]
    found = Path(setup["found"]) if setup["found"] else None
    policy, reference = load_policies(cfg, setup["base"], found, dist.world)
    dist.url = setup["url"]
    search = RemoteRetriever(dist.url, topk=cfg.search.topk)
    kg = RemoteKGSearch(dist.url) if setup["kg"] else None
    trainer = Trainer(None, cfg, method_spec(setup["method"]), setup["run"], policy, reference, search, kg=kg)
    if found:
        trainer.load_state_dict({**state, "optimizer": load_optimizer(found, trainer.policy.device)})
    trainer.ranks = dist
    ok = False
    try:
        for t in range(state["completed"], cfg.method.steps):
            trainer.run_round(t)
        ok = True
    finally:
        dist.close(ok)
    log(f"rank {dist.rank}: {cfg.method.steps - state['completed']} rounds done (rank 0 writes the store)")
    return []


def load_optimizer(found, device) -> dict:
    """The optimiser state of checkpoint ``found`` onto ``device`` (the policy's): saved from rank
    0's GPU, it would otherwise load onto cuda:0 on every rank.

    Example:
        >>> # trainer.load_state_dict({**state, "optimizer": load_optimizer(found, policy.device)})
    """
    return torch.load(found / "optimizer.pt", map_location=device)


def launch(n: int, argv: list[str]) -> int:
    """Run ``python -m workbench.cli *argv`` on ``n`` local ranks under torch's elastic launcher
    (what ``torchrun --standalone --nproc-per-node n`` does; ``workbench train --gpus n``). A rank
    that fails stops the others; returns 0, or the first failing rank's exit code after one line
    saying which rank failed (its own error is printed above it).

    Example:
        >>> launch(1, ["train"])
        Traceback (most recent call last):
        ...
        ValueError: --gpus 1: expected a number of processes >= 2 (one process runs without the launcher)
    """
    import sys
    import uuid

    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.launcher.api import LaunchConfig, elastic_launch

    if isinstance(n, bool) or not isinstance(n, int) or n < 2:
        raise ValueError(f"--gpus {n!r}: expected a number of processes >= 2 (one process runs without the launcher)")
    if torch.cuda.is_available() and torch.cuda.device_count() < n:
        raise ValueError(f"--gpus {n}: this machine has {torch.cuda.device_count()} CUDA devices")
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")  # the device README: NVLink multicast off
    os.environ.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // n)))
    os.environ[LAUNCHED] = "1"  # the ranks inherit it: only they join the group (from_env)
    config = LaunchConfig(min_nodes=1, max_nodes=1, nproc_per_node=n, run_id=str(uuid.uuid4()),
                          rdzv_backend="c10d", rdzv_endpoint="localhost:0", max_restarts=0,
                          start_method="spawn")
    # the launcher's own notices of a failure (closing signals, "failed (exitcode ...)") are what
    # the one line below says; its other logs stay
    quiet = logging.getLogger("torch.distributed.elastic.multiprocessing.api")
    level = quiet.level
    quiet.setLevel(logging.CRITICAL)
    try:
        elastic_launch(config, sys.executable)("-m", "workbench.cli", *argv)
    except ChildFailedError as err:
        rank, failure = err.get_first_failure()
        code = failure.exitcode if failure.exitcode > 0 else 128 - failure.exitcode if failure.exitcode < 0 else 1
        print(f"workbench {argv[0]} --gpus {n}: rank {rank} failed (exit code {failure.exitcode}); "
              "its error is above", file=sys.stderr)
        return code
    finally:
        del os.environ[LAUNCHED]
        quiet.setLevel(level)
    return 0
