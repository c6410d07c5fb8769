"""Import KILT replicas of growing size and record wall time and peak RSS of each import (issue 16).

Usage: PYTHONPATH=. python dev/kilt_scale.py OUT_DIR [--pages 30000 60000 120000] [--memory-limit 1GB]

Each import runs as its own ``workbench import kilt`` process (so its peak RSS, from
``getrusage(RUSAGE_CHILDREN)`` after it exits, is that import's alone) into a fresh store. The
report (JSON lines, also OUT_DIR/kilt_scale.jsonl) gives pages, file MB, seconds, peak RSS MB, and
the extrapolation to the real dump's 5,903,530 pages by the least-squares line through the points.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from workbench.kg.kilt_replica import REAL_KILT_BYTES, REAL_KILT_PAGES


def _run(cmd: list[str]) -> tuple[float, float, str]:
    """Wall seconds, peak RSS (MiB) and stdout of one child process (its own rusage, from wait4)."""
    t = time.perf_counter()
    child = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=dict(os.environ))
    out = child.stdout.read()
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode:
        raise RuntimeError(f"{' '.join(cmd)} exited with {child.returncode}")
    return time.perf_counter() - t, usage.ru_maxrss / 1024, out  # ru_maxrss: KiB on Linux


def _line(xs: list[float], ys: list[float]) -> tuple[float, float]:
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / max(sum((x - mx) ** 2 for x in xs), 1e-12)
    return slope, my - slope * mx


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--pages", type=int, nargs="+", default=[30_000, 60_000, 120_000])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--memory-limit", default=None, help="passed to workbench import kilt --memory-limit")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    for pages in sorted(args.pages):
        data, db = args.out / f"kilt_replica_{pages}.jsonl", args.out / f"kilt_{pages}.duckdb"
        gen_s, gen_rss, _ = _run([sys.executable, "-m", "workbench.cli", "kilt-replica", str(data), "--pages",
                                  str(pages), "--seed", str(args.seed), "--no-progress"])
        db.unlink(missing_ok=True)
        cmd = [sys.executable, "-m", "workbench.cli", "import", "kilt", str(data), "--db", str(db), "--no-progress"]
        if args.memory_limit:
            cmd += ["--memory-limit", args.memory_limit]
        seconds, rss, out = _run(cmd)
        report = json.loads(out)
        rows.append({"pages": pages, "file_mb": round(data.stat().st_size / 2**20, 1), "generate_s": round(gen_s, 1),
                     "generate_peak_rss_mb": round(gen_rss), "import_s": round(seconds, 1),
                     "import_peak_rss_mb": round(rss), "store_mb": round(db.stat().st_size / 2**20, 1),
                     **{k: report[k] for k in ("passages", "anchors", "resolved_anchors", "edges")},
                     "memory_limit": args.memory_limit})
        print(json.dumps(rows[-1]), flush=True)
        data.unlink()
        db.unlink()
    measured = list(rows)
    xs = [r["pages"] for r in measured]
    for key in ("import_s", "import_peak_rss_mb"):
        slope, icpt = _line(xs, [r[key] for r in measured])
        rows.append({"extrapolated": key, "per_1k_pages": round(1000 * slope, 2), "intercept": round(icpt, 1),
                     "at_real_kilt_pages": round(icpt + slope * REAL_KILT_PAGES, 1),
                     "real_kilt_pages": REAL_KILT_PAGES, "real_kilt_gib": round(REAL_KILT_BYTES / 2**30, 2)})
        print(json.dumps(rows[-1]), flush=True)
    with open(args.out / "kilt_scale.jsonl", "a") as f:
        f.writelines(json.dumps(r) + "\n" for r in rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
