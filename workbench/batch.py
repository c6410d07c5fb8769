"""Run a notebook over a grid of parameter sets with papermill: bounded parallelism, resumable.

A grid point is one dict of parameters; its id is a short hash of those parameters, so the same
point always lands at ``runs/batch/<batch>/<point>.ipynb``. A point is skipped when its executed
notebook already finished without error, or when ``batch_results`` holds a ``done`` row for it.
Every point's row in the store's ``batch_results`` says its parameters, status, duration, the
outputs the notebook recorded, the error (cell and message) and the executed notebook's path.

Recording outputs (the convention a batch notebook follows): call ``record(name=value, ...)``
with JSON-able values. Under a batch, ``WORKBENCH_BATCH_NOTEBOOK`` (set in the kernel's
environment only) names the executed notebook and ``record`` merges the values into
``<point>.outputs.json`` beside it; outside a batch it returns them and writes nothing.

Example:
    >>> grid = parse_grid({"preset": ["smoke"], "seed": [0, 1]})
    >>> grid
    [{'preset': 'smoke', 'seed': 0}, {'preset': 'smoke', 'seed': 1}]
    >>> point_id(grid[0]) == point_id({"seed": 0, "preset": "smoke"})
    True
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import os
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Any

import yaml

from workbench import paths

ENV_NOTEBOOK = "WORKBENCH_BATCH_NOTEBOOK"
_TYPES = {"int": (int,), "float": (int, float), "bool": (bool,), "str": (str,)}


@dataclasses.dataclass
class PointResult:
    """One grid point's outcome; ``status`` is 'done', 'failed' or 'skipped'."""

    point: str
    params: dict
    status: str
    duration_s: float = 0.0
    outputs: dict = dataclasses.field(default_factory=dict)
    error: str | None = None
    notebook: str = ""


# ------------------------------------------------------------------------------------ the grid

def parse_grid(spec: Any, source: str = "grid") -> list[dict]:
    """Grid points from a mapping name -> list of values (cartesian product; a scalar is one value)
    or from a list of mappings (the points themselves).

    Example:
        >>> parse_grid([{"a": 1}, {"a": 2, "b": "x"}])
        [{'a': 1}, {'a': 2, 'b': 'x'}]
        >>> len(parse_grid({"a": [1, 2], "b": [True, False], "c": 0.5}))
        4
    """
    if spec is None:
        return [{}]
    if isinstance(spec, dict):
        axes = {str(k): (v if isinstance(v, list) else [v]) for k, v in spec.items()}
        empty = [k for k, v in axes.items() if not v]
        if empty:
            raise ValueError(f"{source}: parameter {empty[0]!r} has an empty list of values")
        return [dict(zip(axes, combo)) for combo in itertools.product(*axes.values())]
    if isinstance(spec, list) and all(isinstance(p, dict) for p in spec):
        return [{str(k): v for k, v in p.items()} for p in spec] or [{}]
    raise ValueError(f"{source}: expected a mapping name -> list of values, or a list of mappings; "
                     f"got {type(spec).__name__}")


def load_grid(path: str | Path) -> list[dict]:
    """Read a YAML grid file (see ``parse_grid``); a YAML error names the file and line."""
    path = Path(path)
    try:
        spec = yaml.safe_load(path.read_text())
    except yaml.YAMLError as err:
        raise ValueError(f"{path}: not valid YAML: {err}") from err
    return parse_grid(spec, source=str(path))


def cli_axes(pairs: list[tuple[str, str]]) -> dict[str, list]:
    """``-p name value`` pairs to axes; a repeated name makes an axis; values parsed as YAML scalars.

    Example:
        >>> cli_axes([("seed", "0"), ("seed", "1"), ("preset", "smoke"), ("lr", "1e-3")])
        {'seed': [0, 1], 'preset': ['smoke'], 'lr': [0.001]}
    """
    axes: dict[str, list] = {}
    for name, raw in pairs:
        value = yaml.safe_load(raw) if raw.strip() else raw
        if isinstance(value, str) and _looks_float(raw):  # YAML 1.1 reads "1e-3" as a string
            value = float(raw)
        if isinstance(value, (dict, list)):
            raise ValueError(f"-p {name} {raw!r}: expected a scalar value")
        axes.setdefault(name, []).append(value)
    return axes


def _looks_float(raw: str) -> bool:
    try:
        float(raw)
        return True
    except ValueError:
        return False


def combine(grid: list[dict], axes: dict[str, list]) -> list[dict]:
    """Every grid point crossed with the ``-p`` axes (a ``-p`` name overrides the grid's value)."""
    extra = parse_grid(axes) if axes else [{}]
    return [{**point, **more} for point in grid for more in extra]


def point_id(params: dict) -> str:
    """A deterministic short id for a parameter set (order of keys does not matter)."""
    blob = json.dumps(params, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:10]


def check_params(notebook: str | Path, grid: list[dict]) -> dict:
    """Reject, before anything runs, a parameter the notebook does not declare or a value of the wrong type.

    Returns papermill's description of the declared parameters.
    """
    import papermill

    declared = papermill.inspect_notebook(str(notebook))
    for params in grid:
        unknown = sorted(set(params) - set(declared))
        if unknown:
            raise ValueError(f"{notebook}: parameter {unknown[0]!r} is not declared in its `parameters` cell; "
                             f"declared: {', '.join(sorted(declared)) or '(none)'}")
        for name, value in params.items():
            kinds = _TYPES.get(declared[name].get("inferred_type_name", ""))
            wrong = kinds and (not isinstance(value, kinds) or (bool not in kinds and isinstance(value, bool)))
            if wrong:
                raise ValueError(f"{notebook}: parameter {name!r} is declared "
                                 f"{declared[name]['inferred_type_name']}, got {value!r}")
    return declared


# -------------------------------------------------------------------------------- recording

def record(**values: Any) -> dict:
    """Record a batch notebook's key outputs (merged into ``<point>.outputs.json`` beside it).

    Outside a batch (no ``WORKBENCH_BATCH_NOTEBOOK`` in the environment) nothing is written.

    Example:
        >>> record(val_em=0.42, steps=3)
        {'val_em': 0.42, 'steps': 3}
    """
    clean = {}
    for key, value in values.items():
        value = value.item() if hasattr(value, "item") else value  # numpy / torch scalars
        try:
            json.dumps(value)
        except TypeError as err:
            raise TypeError(f"record({key}=...): {type(value).__name__} is not JSON-serialisable") from err
        clean[key] = value
    target = os.environ.get(ENV_NOTEBOOK)
    if target:
        path = outputs_path(target)
        merged = {**(json.loads(path.read_text()) if path.exists() else {}), **clean}
        path.write_text(json.dumps(merged, indent=1, sort_keys=True))
    return clean


def outputs_path(notebook: str | Path) -> Path:
    """Where ``record`` writes for an executed notebook: ``<point>.outputs.json`` beside it."""
    notebook = Path(notebook)
    return notebook.with_name(notebook.stem + ".outputs.json")


# ---------------------------------------------------------------------------------- running

def _succeeded(notebook: Path) -> bool:
    if not notebook.exists():
        return False
    import nbformat

    nb = nbformat.read(notebook, as_version=4)
    if not nb.metadata.get("papermill", {}).get("end_time") or nb.metadata.papermill.get("exception"):
        return False
    # A kernel that never started leaves the notebook "complete" too: every code cell must have run.
    code = [c for c in nb.cells if c.cell_type == "code"]
    return all(c.metadata.get("papermill", {}).get("end_time") for c in code) and not any(
        o.get("output_type") == "error" for c in code for o in c.get("outputs", []))


def _describe_error(err: Exception) -> str:
    from papermill.exceptions import PapermillExecutionError

    if isinstance(err, PapermillExecutionError):
        head = (err.source or "").strip().splitlines()[:1]
        return (f"cell {err.cell_index} (In [{err.exec_count}]: {head[0][:80] if head else ''!s}): "
                f"{err.ename}: {err.evalue}")
    return f"{type(err).__name__}: {err}"


def run_point(notebook: Path, params: dict, out: Path, kernel_name: str | None = None) -> PointResult:
    """Execute one grid point with papermill into ``out``; never raises for a notebook error."""
    import papermill
    from jupyter_client.manager import KernelManager

    point = point_id(params)
    executed = out / f"{point}.ipynb"
    outputs_path(executed).unlink(missing_ok=True)
    nb_kernel = kernel_name or _kernel_of(notebook)
    # The kernel gets its own environment (threads share os.environ), so record() finds its file.
    km = KernelManager(kernel_name=nb_kernel)
    start = time.perf_counter()
    error = None
    try:
        km.start_kernel(env={**os.environ, ENV_NOTEBOOK: str(executed)}, cwd=str(notebook.parent))
        papermill.execute_notebook(str(notebook), str(executed), parameters=params, kernel_name=nb_kernel,
                                   progress_bar=False, km=km)
    except Exception as err:  # a failing point is reported, the others go on
        error = _describe_error(err)
    finally:
        if km.has_kernel:
            km.shutdown_kernel(now=True)
    outs = json.loads(outputs_path(executed).read_text()) if outputs_path(executed).exists() else {}
    return PointResult(point, params, "failed" if error else "done", time.perf_counter() - start, outs, error,
                       str(executed))


def _kernel_of(notebook: Path) -> str:
    import nbformat

    return nbformat.read(notebook, as_version=4).metadata.get("kernelspec", {}).get("name", "python3")


def _done_points(db: str | Path | None, batch: str) -> set[str]:
    if db is None or not Path(db).exists():
        return set()
    from workbench import store

    con = store.connect(db)
    try:
        return {p for (p,) in con.execute("SELECT point FROM batch_results WHERE batch = ? AND status = 'done'",
                                          [batch]).fetchall()}
    finally:
        con.close()


def _save(db: str | Path | None, batch: str, result: PointResult) -> None:
    """Write one point's row; a short connection each time, so the notebooks can use the store too."""
    if db is None:
        return
    import duckdb

    from workbench import store

    for attempt in range(60):  # a notebook may hold the store's write lock for a while
        try:
            con = store.connect(db)
            break
        except duckdb.IOException:
            if attempt == 59:
                raise
            time.sleep(1.0)
    try:
        with store.transaction(con):
            con.execute("DELETE FROM batch_results WHERE batch = ? AND point = ?", [batch, result.point])
            con.execute("INSERT INTO batch_results VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                        [batch, result.point, json.dumps(result.params, sort_keys=True), result.status,
                         result.duration_s, json.dumps(result.outputs, sort_keys=True), result.error,
                         result.notebook])
    finally:
        con.close()


def run_batch(notebook: str | Path, grid: list[dict], name: str | None = None, out_dir: str | Path | None = None,
              jobs: int = 2, db: str | Path | None = None, kernel_name: str | None = None,
              progress: bool = True) -> list[PointResult]:
    """Run ``notebook`` once per grid point, ``jobs`` at a time; return every point's result.

    Undeclared parameters are rejected before anything runs. Finished points are skipped.
    ``name`` defaults to the notebook's stem; executed notebooks go to ``out_dir`` (default
    ``runs/batch/<name>/``); rows go to ``batch_results`` in ``db`` (None: no store).

    Example:
        >>> results = run_batch("tests/fixtures/batch_probe.ipynb", [{"x": 1}, {"x": 2}], db=db)  # doctest: +SKIP
        >>> [r.status for r in results]  # doctest: +SKIP
        ['done', 'done']
    """
    from tqdm.auto import tqdm

    notebook = Path(notebook).resolve()
    if not notebook.exists():
        raise FileNotFoundError(f"{notebook}: no such notebook")
    if jobs < 1:
        raise ValueError(f"--jobs must be at least 1, got {jobs}")
    check_params(notebook, grid)
    name = name or notebook.stem
    out = Path(out_dir) if out_dir else paths.runs_dir() / "batch" / name
    out.mkdir(parents=True, exist_ok=True)
    done_rows = _done_points(db, name)
    results: dict[str, PointResult] = {}
    todo = []
    for params in grid:
        point = point_id(params)
        executed = out / f"{point}.ipynb"
        if point in results:
            continue  # the same parameter set twice in one grid runs once
        if point in done_rows or _succeeded(executed):
            outs = json.loads(outputs_path(executed).read_text()) if outputs_path(executed).exists() else {}
            results[point] = PointResult(point, params, "skipped", 0.0, outs, None, str(executed))
            if point not in done_rows:  # finished on disk but unknown to this store: record it
                _save(db, name, dataclasses.replace(results[point], status="done"))
        else:
            results[point] = None
            todo.append(params)
    with ThreadPoolExecutor(max_workers=jobs) as pool, \
            tqdm(total=len(todo), desc=f"batch {name}", disable=not progress or not todo) as bar:
        futures = [pool.submit(run_point, notebook, params, out, kernel_name) for params in todo]
        failed = 0
        for future in as_completed(futures):
            result = future.result()
            results[result.point] = result
            _save(db, name, result)
            failed += result.status == "failed"
            bar.update(1)
            bar.set_postfix(failed=failed)
    return [results[point_id(p)] for p in dict((point_id(p), p) for p in grid).values()]


def failure_report(results: list[PointResult]) -> str:
    """One paragraph per failed point: its parameters, the failing cell, the error and the notebook.

    Example:
        >>> failure_report([PointResult("ab", {"x": 1}, "failed", 1.0, {}, "cell 2 (...): ValueError: no", "n.ipynb")])
        'FAILED point ab {"x": 1}\\n  cell 2 (...): ValueError: no\\n  notebook: n.ipynb'
    """
    return "\n".join(f"FAILED point {r.point} {json.dumps(r.params, sort_keys=True)}\n  {r.error}\n"
                     f"  notebook: {r.notebook}" for r in results if r.status == "failed")
