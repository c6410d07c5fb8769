"""Peak RSS of one dense-index build over a store, streamed (today's) or all at once (before issue 16).

usage: python dev/dense_build_rss.py DB {stream,memory} [--chunk N] [--model DIR] [--out ROOT]

Runs the build in this process and prints one JSON line: passages, peak RSS of the process
(``ru_maxrss``), the RSS once the encoder is loaded (before any passage is read), their difference
(what the build itself held), seconds and passages/s. ``memory`` is what ``open_index`` did before
issue 16: every passage read into Python (``load_corpus``), encoded at once, handed to FAISS's
``IndexFlatIP`` in memory and written. ``stream`` is ``search.index.build_dense``. The index is
written under ``--out`` (default: a fresh temporary folder, removed after), never beside the store.
Run each build in its own process: ``ru_maxrss`` is a high-water mark.

  e.g. workbench kilt-replica /tmp/k10k.jsonl --pages 10000 && workbench import kilt /tmp/k10k.jsonl \
         --db /tmp/k10k.duckdb && python dev/dense_build_rss.py /tmp/k10k.duckdb stream
"""

import argparse
import json
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path


def rss_mib() -> float:
    """Current resident set size of this process, MiB."""
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("db")
    parser.add_argument("mode", choices=["stream", "memory"])
    parser.add_argument("--chunk", type=int, default=None, help="passages a chunk (stream; default DENSE_CHUNK)")
    parser.add_argument("--model", default=None, help="encoder folder (default: the packaged MiniLM)")
    parser.add_argument("--out", default=None, help="index root (default: a temporary folder, removed after)")
    args = parser.parse_args(argv)

    import faiss

    from workbench import store
    from workbench.search.index import DENSE_CHUNK, DenseIndex, Encoder, build_dense, load_corpus

    encoder = Encoder(args.model)
    encoder.passages(["warm up"])  # the model's own buffers are part of the baseline, not the build
    baseline = rss_mib()
    root = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="dense-rss-"))
    con = store.connect(args.db, read_only=True)
    started = time.perf_counter()
    try:
        if args.mode == "stream":
            chunk = args.chunk or DENSE_CHUNK
            passages = build_dense(con, encoder, root, chunk=chunk,
                                   progress=lambda line: print(line, file=sys.stderr, flush=True))["passages"]
        else:
            chunk = None
            corpus = load_corpus(con)
            index = DenseIndex.build(corpus, encoder)
            (root / "memory").mkdir(parents=True, exist_ok=True)
            faiss.write_index(index.index, str(root / "memory" / "index.faiss"))
            passages = len(corpus)
    finally:
        con.close()
        if not args.out:
            shutil.rmtree(root, ignore_errors=True)
    seconds = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"db": args.db, "mode": args.mode, "chunk": chunk, "passages": passages,
                      "peak_rss_mib": round(peak, 1), "baseline_rss_mib": round(baseline, 1),
                      "build_mib": round(peak - baseline, 1), "seconds": round(seconds, 1),
                      "passages_per_s": round(passages / seconds, 1)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
