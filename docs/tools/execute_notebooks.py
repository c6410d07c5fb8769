"""Execute every notebook at smoke size for the documentation site (`make docs`).

    python docs/tools/execute_notebooks.py [--out build/docs/notebooks] [--only 01_kg_walks ...]

Each notebooks/NAME.ipynb runs with papermill (`preset="smoke"`), in order, into OUT/NAME.ipynb,
sharing one smoke store in the folder `work` beside OUT, as `make test` does (figures and tables go there too).
A notebook is executed again only when its code cells or the workbench's code changed since (a key
of their contents is kept beside the executed copy), so a second `make docs` takes seconds; an edit
of its Markdown cells alone is copied into the executed copy without running it again. OUT/timings.json
records each notebook's wall seconds and the load average around it. A failing notebook stops
the build with its error: the site never shows a half-run notebook. In the executed copies, the
build's own folders in printed paths (that `work` folder and the checkout) are written relative, as a
reader's run prints them from the top of the checkout (`figures/01_hops.html`, not this machine's
absolute path); nothing else in the outputs is changed.
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


def relative_paths(path: Path, work: Path) -> bool:
    """Write the build's absolute folders in ``path``'s outputs relative (see the module doc); True if changed.

    Example:
        >>> relative_paths(Path("build/docs/notebooks/01_kg_walks.ipynb"), Path("build/docs/work"))  # doctest: +SKIP
        False
    """
    import nbformat

    nb = nbformat.read(path, as_version=4)
    prefixes = [str(work.resolve()) + "/", str(ROOT) + "/"]  # the deeper one first

    def fix(value):
        if isinstance(value, str):
            for prefix in prefixes:
                value = value.replace(prefix, "")
            return value
        if isinstance(value, list):
            return [fix(v) for v in value]
        return value

    changed = False
    papermill = nb.metadata.get("papermill", {})
    for key in ("input_path", "output_path"):
        if isinstance(papermill.get(key), str):
            new = fix(papermill[key])
            changed |= new != papermill[key]
            papermill[key] = new
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            fields = [("text", output)] if "text" in output else []
            fields += [(mime, output["data"]) for mime in output.get("data", {}) if mime.startswith("text/")]
            for key, holder in fields:
                new = fix(holder[key])
                changed |= new != holder[key]
                holder[key] = new
    if changed:
        nbformat.write(nb, path)
    return changed


def notebook_key(base: str, src: Path) -> str:
    """What an executed copy of ``src`` depends on: ``base`` (code_key) and its code cells, in order."""
    import nbformat

    cells = [c.source for c in nbformat.read(src, as_version=4).cells if c.cell_type == "code"]
    return hashlib.sha256(json.dumps([base, cells]).encode()).hexdigest()


def sync_markdown(src: Path, dest: Path) -> bool:
    """Copy ``src``'s Markdown cells into the executed ``dest`` (same cells in the same order); True if changed."""
    import nbformat

    source, executed = nbformat.read(src, as_version=4), nbformat.read(dest, as_version=4)
    ran = [c for c in executed.cells if "injected-parameters" not in c.metadata.get("tags", [])]  # papermill's
    assert [c.cell_type for c in source.cells] == [c.cell_type for c in ran], dest
    changed = False
    for new, old in zip(source.cells, ran):
        if new.cell_type == "markdown" and new.source != old.source:
            old.source, changed = new.source, True
    if changed:
        nbformat.write(executed, dest)
    return changed


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
        key = notebook_key(base, src)
        dest, stamp = out / src.name, out / f"{src.stem}.key"
        if dest.exists() and stamp.exists() and stamp.read_text() == key:
            sync_markdown(src, dest)
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
    for done in sorted(out.glob("*.ipynb")):
        relative_paths(done, work)
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
