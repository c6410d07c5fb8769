"""``workbench bench walks|retrieval|rollout|loop|server|gpu|topology|drfree|kgsearch``: speed figures as JSON, ratios measured in one run."""

from __future__ import annotations

import argparse
import contextlib
import importlib
import inspect
import json
import sys

from workbench.commands import add_set, db_path, log_to_stderr, overrides

# name -> (module, function, help); each function takes keyword arguments named like the bench's
# options (``--batch-sizes`` -> ``batch_sizes``) and returns a dict.
BENCHES = {
    "walks": ("workbench.bench.walks", "bench_walks", "CSR walker vs per-hop DuckDB loop vs set-based SQL"),
    "retrieval": ("workbench.bench.retrieval", "bench_retrieval", "batched vs single queries, recall@3"),
    "rollout": ("workbench.bench.rollout", "bench_rollout", "tokens/s and questions/s by batch size"),
    "loop": ("workbench.bench.loop", "bench_loop", "CoEvoKG round overhead, path support, write-back rates"),
    "server": ("workbench.bench.server", "bench_server",
               "retrieval server under load on loopback: keep-alive vs new connections, 50/200 clients"),
    "topology": ("workbench.bench.topology", "bench_topology",
                 "EoG's query patterns 1p..pi: in-memory index vs DuckDB SQL per query, synthetic graph"),
    "drfree": ("workbench.bench.drfree", "bench_drfree",
               "Dr. Free's information-gain scoring vs the difficulty reward's G solver rollouts per candidate"),
    "gpu": ("workbench.bench.gpu", "bench_gpu",
            "the GPU engine (CUDA): vLLM vs HF tokens/s against the HBM roofline, LoRA update step, a round's stages"),
    "kgsearch": ("workbench.bench.kgsearch", "bench_kgsearch",
                 "DynaSearcher's KG search vs document search, in-process and through the server"),
}


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("bench", help="speed benchmarks (prints JSON)")
    benches = parser.add_subparsers(dest="bench", metavar="BENCH", required=True)
    for name, (module, func, help_) in BENCHES.items():
        p = benches.add_parser(name, help=help_)
        p.set_defaults(func=_runner(module, func))
        if name == "server":
            _server_args(p)
        elif name == "gpu":
            _gpu_args(p)
        elif name == "topology":
            p.add_argument("--edges", type=int, default=1_000_000, help="edges of the synthetic graph")
            p.add_argument("--queries", dest="n_queries", type=int, default=50, help="queries per pattern (default 50)")
            p.add_argument("--seed", type=int, default=0)
        elif name == "walks":
            p.add_argument("--edges", type=int, default=1_000_000, help="edges of the synthetic graph")
            p.add_argument("--walks", type=int, default=None, help="CSR walks to time (default: scaled)")
            p.add_argument("--seed", type=int, default=0)
        else:
            p.add_argument("--preset", default="tiny")
            p.add_argument("--db", default=None, help="measure this store, read-only (default: the preset's "
                                                      "TinyWorld built in memory; nothing is written)")
        if name in ("rollout", "retrieval"):
            p.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
        if name == "drfree":
            p.add_argument("--candidates", type=int, default=16, help="candidates to score (default 16)")
            p.add_argument("--model", default=None, help="score with this model (default: the preset's warm start)")
            p.add_argument("--seed", type=int, default=0)
        if name == "rollout":
            p.add_argument("--model", default=None, help="time this model (default: a random tiny model)")
            p.add_argument("--batch-sizes", dest="batch_sizes", type=int, nargs="+", default=None)
        if name in ("retrieval", "kgsearch"):
            p.add_argument("--batch", type=int, default=256, help="queries per batched call (default 256)")


def _server_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--db", default=None, help="serve this store (default: a temporary synthetic store)")
    p.add_argument("--passages", type=int, default=2000, help="passages of the synthetic store (default 2000)")
    p.add_argument("--index", choices=["bm25", "dense"], default="bm25")
    p.add_argument("--url", default=None,
                   help="measure a server already running on loopback (http://127.0.0.1:PORT) instead")
    p.add_argument("--requests", type=int, default=300, help="requests per sequential phase (default 300)")
    p.add_argument("--clients", type=int, nargs="+", default=[50, 200], help="concurrent clients (default 50 200)")
    p.add_argument("--per-client", dest="per_client", type=int, default=2,
                   help="requests per concurrent client (default 2)")
    p.add_argument("--seconds", type=float, default=60.0, help="time limit for all phases (default 60)")
    p.add_argument("--client-timeout", dest="client_timeout", type=float, default=10.0,
                   help="seconds a client waits for one answer (default 10)")
    p.add_argument("--hostile", action="store_true", default=False,
                   help="also: real clients among 600 slow ones, and one 2,048 x topk-1000 request with the "
                        "server's peak memory")


def _gpu_args(p: argparse.ArgumentParser) -> None:
    # shapes are checked by bench_gpu: importing it here would load torch for every command
    p.add_argument("--shape", default="qwen2.5-3b",
                   help="model shape, random weights: qwen2.5-3b (default), qwen2.5-7b, llama-3.1-8b, tiny-test")
    p.add_argument("--device", default="cuda",
                   help="cuda or cuda:N (cpu only with --shape tiny-test: a plumbing check)")
    p.add_argument("--engines", nargs="+", choices=["vllm", "hf"], default=["vllm", "hf"])
    p.add_argument("--batch", type=int, default=256, help="generation: prompts at once (default 256)")
    p.add_argument("--prompt-tokens", dest="prompt_tokens", type=int, default=512)
    p.add_argument("--new-tokens", dest="new_tokens", type=int, default=256, help="every row generates this many")
    p.add_argument("--lora-rank", dest="lora_rank", type=int, default=16, help="update: LoRA rank (0 = full fine-tune)")
    p.add_argument("--update-batch", dest="update_batch", type=int, default=8)
    p.add_argument("--update-tokens", dest="update_tokens", type=int, default=1024)
    p.add_argument("--update-steps", dest="update_steps", type=int, default=3, help="timed steps after one warm-up")
    p.add_argument("--update-variants", dest="update_variants", nargs="+", default=None,
                   help="update: one step timing per variant, MODE or MODE+packed (MODE: method.gradient_checkpointing's "
                        "auto, off, standard, offload; +packed: method.pack_sequences); default: auto")
    p.add_argument("--unsloth-standalone", dest="unsloth_standalone", action="store_true", default=None,
                   help="update: also Unsloth's own LoRA step at the shape (the goal's baseline; CUDA with unsloth)")
    p.add_argument("--update-lengths", dest="update_lengths", choices=["equal", "varied"], default=None,
                   help="update: every row --update-tokens long (default), or lengths from a quarter of it to all")
    p.add_argument("--parts", nargs="+", default=["generation", "update"],
                   choices=["generation", "update", "logprobs", "loop", "round", "retrieval"],
                   help="what to measure (default: generation update); logprobs, loop and round need --model and --db")
    p.add_argument("--model", default=None,
                   help="a model directory with its tokenizer (the warm start): logprobs samples from it; loop and "
                        "round run a random --shape model with its tokenizer padded to the shape's vocabulary")
    p.add_argument("--retrieval-sizes", dest="retrieval_sizes", type=int, nargs="+", default=None,
                   help="retrieval: vectors per index (default 1000000 10000000; 768 dimensions)")
    p.add_argument("--round-model", dest="round_model", default=None,
                   help="loop and round: this model directory instead of the random --shape one")
    p.add_argument("--preset", default="tiny", help="the round's preset")
    p.add_argument("--db", default=None, help="the round's store (default: the preset's)")
    p.add_argument("--profile", action="store_true", default=None,
                   help="loop: vLLM runs the loop's way once more under cProfile (the top functions in the JSON)")
    add_set(p)


def _runner(module: str, func: str):
    def run(args: argparse.Namespace) -> int:
        log_to_stderr()  # a long benchmark logs each measurement as it is made; the JSON comes at the end
        bench = getattr(importlib.import_module(module), func)
        with contextlib.redirect_stdout(sys.stderr):  # what libraries print (Unsloth's banner): stdout is the JSON
            result = bench(**_keywords(bench, args))
        print(json.dumps(result, indent=2))
        return 0
    return run


def _keywords(bench, args: argparse.Namespace) -> dict:
    """The options ``bench`` takes, by name. Options left unset (None) are left out, so the
    library's defaults apply: a benchmark without ``--db`` builds the preset's world in memory
    (``bench.store``), except ``bench gpu``, whose round parts read the preset's store.

    Example:
        >>> def bench_x(db=None, seed=0): ...
        >>> _keywords(bench_x, argparse.Namespace(bench="x", db=None, preset="smoke", seed=None, func=print))
        {}
        >>> _keywords(bench_x, argparse.Namespace(bench="gpu", db=None, preset="smoke", func=print))["db"][-12:]
        'smoke.duckdb'
    """
    given = {k: v for k, v in vars(args).items() if v is not None}
    if getattr(args, "bench", None) == "gpu":
        given["db"] = db_path(args)
    if "overrides" in vars(args):
        given["overrides"] = overrides(args)
    accepted = inspect.signature(bench).parameters
    return {k: v for k, v in given.items() if k in accepted}
