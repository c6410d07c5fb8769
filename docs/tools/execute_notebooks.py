"""Execute every notebook at smoke size for the documentation site (`make docs`).

    python docs/tools/execute_notebooks.py [--out build/docs/notebooks] [--only 01_kg_walks ...]

Each notebooks/NAME.ipynb runs with papermill (`preset="smoke"`), in order, into OUT/NAME.ipynb,
sharing one smoke store in OUT/../work/ as `make test` does (figures and tables go there too).
A notebook is executed again only when it or the workbench's code changed since (a key of their
contents is kept beside the executed copy), so a second `make docs` takes seconds. OUT/timings.json
records each notebook's wall seconds and the load average around it. A failing notebook stops
the build with its error: the site never shows a half-run notebook.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def code_key() -> str:
    """A digest of what every notebook's output depends on besides itself: the package and data it reads."""
    h = hashlib.sha256()
    for folder in ("workbench", "data/paper", "data/reference", "data/pretrained", "data/benchmarks",
                   "data/wiki_questions"):
        for path in sorted((ROOT / folder).rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                h.update(str(path.relative_to(ROOT)).encode())
                h.update(path.read_bytes())
    h.update((ROOT / "pyproject.toml").read_bytes())
    return h.hexdigest()


def execute(names: list[str] | None, out: Path) -> dict:
    """Execute the notebooks (all, or those named) into ``out``; return {name: seconds} of those run."""
    import papermill
    from traitlets.config import Config

    out.mkdir(parents=True, exist_ok=True)
    work = out.parent / "work"
    for part in ("data", "runs", "figures"):
        os.environ[f"WORKBENCH_{part.upper()}"] = str(work / part)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    base = code_key()
    timings_path = out / "timings.json"
    timings = json.loads(timings_path.read_text()) if timings_path.exists() else {}
    ran = {}
    for src in sorted((ROOT / "notebooks").glob("*.ipynb")):
        if names and src.stem not in names:
            continue
        key = hashlib.sha256(base.encode() + src.read_bytes()).hexdigest()
        dest, stamp = out / src.name, out / f"{src.stem}.key"
        if dest.exists() and stamp.exists() and stamp.read_text() == key:
            continue
        stamp.unlink(missing_ok=True)
        load0, start = os.getloadavg()[0], time.perf_counter()
        print(f"executing {src.name} at smoke size ...", flush=True)
        papermill.execute_notebook(str(src), str(dest), parameters={"preset": "smoke"}, cwd=str(src.parent),
                                   progress_bar=False, log_output=False,
                                   config=Config(KernelManager={"transport_encryption": "auto"}))
        seconds = time.perf_counter() - start
        stamp.write_text(key)
        ran[src.stem] = seconds
        timings[src.stem] = {"seconds": round(seconds, 1), "load_before": round(load0, 2),
                             "load_after": round(os.getloadavg()[0], 2), "cpus": os.cpu_count()}
        timings_path.write_text(json.dumps(timings, indent=1, sort_keys=True) + "\n")
        print(f"  {src.name}: {seconds:.0f} s (load {load0:.1f} -> {os.getloadavg()[0]:.1f})", flush=True)
    return ran


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ROOT / "build" / "docs" / "notebooks")
    ap.add_argument("--only", nargs="*", help="notebook names (e.g. 01_kg_walks); default: all")
    args = ap.parse_args(argv)
    ran = execute(args.only, args.out)
    print(f"{len(ran)} notebook(s) executed, {sum(ran.values()):.0f} s; the others were up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
