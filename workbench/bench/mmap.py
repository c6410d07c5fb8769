"""Memory and speed of search with the corpus and index in RAM vs memory-mapped (``search.mmap``).

usage: python -m workbench.bench.mmap DB [--index dense|bm25] [--batch 256] [--batches 4]
       [--index-dir DIR] [--synthetic-vectors]

Each mode runs in its own process (peak RSS is a high-water mark): ``memory`` (today's default:
``load_corpus`` + the whole index read), ``mmap``, and a second ``mmap`` process opened while the
first still holds the index (what one more rank or process on the machine adds). Each child opens
``SearchTool`` over the store (read-only), runs ``batches`` batches of ``batch`` distinct queries
(cache off; "who is <title>?" over every n-th entity), and reports: seconds to open, queries/s,
peak RSS (``ru_maxrss``), and at the end RssAnon (private), RssFile (file pages mapped: shared via
the page cache) and Pss (the process's proportional share); plus a digest of every hit (passage ids
and float32 scores) so the modes' results are checked identical in the same run. The parent prints
one JSON object with the three children and the ratios mmap / memory.

``--synthetic-vectors`` (dense only; needs ``--index-dir``, never beside the store): the store's
corpus gets random unit vectors of the encoder's dimension instead of encodings, written in the
folder its real index would have, with ``"synthetic": true`` in its meta.json. The memory and speed
of a flat inner-product search do not depend on the vectors' values, and encoding a large replica
takes hours on a CPU; hits over such an index are meaningless, the in-memory == mmap check is not.
The file pages are wherever the OS has them (usually cached after the write or the first child):
the figures are warm-cache figures.

Example (CLI):
    python -m workbench.bench.mmap /tmp/k120k.duckdb --index-dir /tmp/k120k.synthetic --synthetic-vectors
"""

from __future__ import annotations

import argparse
import hashlib
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

MODES = ("memory", "mmap")


def proc_memory() -> dict:
    """This process's RSS split (MiB): RssAnon, RssFile, RssShmem from /proc/self/status, Pss from
    /proc/self/smaps_rollup (0 where the kernel lacks it).

    Example:
        >>> sorted(proc_memory())
        ['pss_mib', 'rss_anon_mib', 'rss_file_mib', 'rss_mib']
    """
    fields = {"VmRSS": "rss_mib", "RssAnon": "rss_anon_mib", "RssFile": "rss_file_mib"}
    out = {v: 0.0 for v in fields.values()} | {"pss_mib": 0.0}
    for line in open("/proc/self/status"):
        key = line.split(":")[0]
        if key in fields:
            out[fields[key]] = round(int(line.split()[1]) / 1024, 1)
    try:
        for line in open("/proc/self/smaps_rollup"):
            if line.startswith("Pss:"):
                out["pss_mib"] = round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return out


def bench_queries(con, n: int) -> list[str]:
    """``n`` distinct queries, "who is <title>?" over evenly spaced entities (numbered when cycled)."""
    total = con.execute("SELECT count(*) FROM entities").fetchall()[0][0]
    if not total:
        raise ValueError("the store has no entities to make benchmark queries from")
    step = max(1, total // n)
    titles = [t for (t,) in con.execute("SELECT title FROM entities ORDER BY entity_id").fetchall()[::step][:n]]
    return [f"who is {titles[i % len(titles)]}?" + (f" ({i // len(titles)})" if i >= len(titles) else "")
            for i in range(n)]


def write_synthetic_vectors(db: str, index_dir: Path, seed: int = 0) -> dict:
    """Random unit vectors for the store's corpus in ``index_dir``'s dense folder (see module doc)."""
    from workbench import store
    from workbench.search.dense_stream import FlatIPFile, _write_json, complete
    from workbench.search.index import DenseIndex, Encoder
    from workbench.search.on_disk import corpus_record

    encoder = Encoder()
    dim = encoder.queries(["x"]).shape[1]
    con = store.connect(db, read_only=True)
    try:
        record = corpus_record(con, index_dir)
    finally:
        con.close()
    folder = Path(index_dir) / DenseIndex.key(record["digest"], encoder)
    if complete(folder, record["passages"]):
        return json.loads((folder / "meta.json").read_text())
    folder.mkdir(parents=True, exist_ok=True)
    out, rng, left = FlatIPFile(folder / "index.faiss", dim), np.random.default_rng(seed), record["passages"]
    while left:
        block = rng.standard_normal((min(left, 1 << 16), dim)).astype(np.float32)
        out.append(block / np.linalg.norm(block, axis=1, keepdims=True))
        left -= len(block)
    out.close()
    meta = {"kind": "dense", "key": folder.name, "passages": record["passages"], "encoder": encoder.name,
            "e5": encoder.e5, "dim": dim, "synthetic": True}
    _write_json(folder / "meta.json", meta)
    return meta


def child(db: str, mode: str, index: str, batch: int, batches: int, index_dir: str | None) -> tuple[dict, object]:
    """One mode's figures (module doc), measured in this process, and the tool (whose mapping a
    holding child keeps alive)."""
    import torch

    from workbench import store
    from workbench.search.tool import SearchTool

    torch.set_num_threads(torch.get_num_threads())
    con = store.connect(db, read_only=True)
    queries = bench_queries(con, batch * batches)
    before = proc_memory()
    t0 = time.perf_counter()
    tool = SearchTool(con, index=index, topk=3, cache=False, index_dir=index_dir, mmap=mode == "mmap")
    opened = time.perf_counter() - t0
    after_open = proc_memory()
    tool.search(queries[:8])  # warm-up: thread pools, the encoder's first call
    digest = hashlib.sha256()
    t0 = time.perf_counter()
    for i in range(batches):
        for hits in tool.search(queries[i * batch:(i + 1) * batch]):
            digest.update(json.dumps([(h.passage_id, h.title, h.text, h.score) for h in hits]).encode())
    seconds = time.perf_counter() - t0
    return {"mode": mode, "index": index, "passages": tool.n_passages, "open_seconds": round(opened, 2),
            "queries": batch * batches, "queries_per_s": round(batch * batches / seconds, 1),
            "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
            "before_open": before, "after_open": after_open, "end": proc_memory(),
            "hits_sha256": digest.hexdigest()}, tool


def _spawn(args, mode: str, hold: bool = False) -> tuple[subprocess.Popen, dict]:
    cmd = [sys.executable, "-m", "workbench.bench.mmap", args.db, "--child", mode, "--index", args.index,
           "--batch", str(args.batch), "--batches", str(args.batches)]
    cmd += ["--index-dir", args.index_dir] if args.index_dir else []
    cmd += ["--hold"] if hold else []
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stdin=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    if not line:
        proc.wait()
        raise RuntimeError(f"{' '.join(cmd)} exited with {proc.returncode} before reporting")
    return proc, json.loads(line)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("db")
    parser.add_argument("--index", choices=["dense", "bm25"], default="dense")
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--batches", type=int, default=4)
    parser.add_argument("--index-dir", default=None, help="index root (default: beside the store)")
    parser.add_argument("--synthetic-vectors", action="store_true", help="random vectors (module doc)")
    parser.add_argument("--child", choices=MODES, help=argparse.SUPPRESS)
    parser.add_argument("--hold", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        result, tool = child(args.db, args.child, args.index, args.batch, args.batches, args.index_dir)
        print(json.dumps(result), flush=True)
        if args.hold:  # the tool, and so its mapping, stays alive until the parent closes our stdin
            sys.stdin.read()
        del tool
        return 0
    if args.synthetic_vectors:
        if not args.index_dir or args.index != "dense":
            parser.error("--synthetic-vectors needs --index-dir DIR (never beside the store) and --index dense")
        from workbench.search.index import index_root

        if Path(args.index_dir).resolve() == index_root(Path(args.db)).resolve():
            parser.error(f"--index-dir {args.index_dir} is the store's own index folder: random vectors there "
                         "would be served as its real dense index; give another folder")
        write_synthetic_vectors(args.db, Path(args.index_dir))
    _, memory = _spawn(args, "memory")
    first, mapped = _spawn(args, "mmap", hold=True)
    try:
        _, second = _spawn(args, "mmap")
    finally:
        first.stdin.close()
        first.wait()
    ratio = lambda key, a, b: round(a[key] / b[key], 3) if b[key] else None  # noqa: E731
    out = {"memory": memory, "mmap": mapped, "mmap_second_process": second,
           "identical_hits": memory["hits_sha256"] == mapped["hits_sha256"] == second["hits_sha256"],
           "mmap_vs_memory": {"peak_rss": ratio("peak_rss_mib", mapped, memory),
                              "rss_anon_end": ratio("rss_anon_mib", mapped["end"], memory["end"]),
                              "queries_per_s": ratio("queries_per_s", mapped, memory),
                              "open_seconds": ratio("open_seconds", mapped, memory)}}
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
