"""Run a notebook over a grid of parameter sets with papermill: bounded parallelism, resumable.

A grid point is one dict of parameters. Its id is a short hash of them and its label spells them
out (``method=c2,seed=1-<id>``, sorted names, safe characters), so the same point always lands at
the same place in the batch's folder (``--out``, default ``runs/batch/<name>/``)::

    batch.duckdb                          the batch's record: batch_results, one row per point
    base/<preset>.duckdb                  the store every point starts from (see below)
    method=c2,seed=1-48011967e0.ipynb     the executed notebook
    method=c2,seed=1-48011967e0.outputs.json   what it recorded with ``record(...)``
    method=c2,seed=1-48011967e0/          its own workbench area: data/, runs/, figures/
    summary.md, .csv, .html, .png         the recorded outputs per method (and other varying
                                          parameter), mean over seeds with a 95% t interval
    points.md, points.csv                 every point's recorded outputs side by side

Points run side by side by default: each kernel gets its own ``WORKBENCH_DATA``, ``_RUNS`` and
``_FIGURES`` inside its folder, so points never share a store (DuckDB allows one writer), a run
folder or a figure file. What can always be rebuilt is shared rather than redone: ``data/cache``
(warm starts) is a link to the caller's cache and the store's search indexes to the base's. A
point's store is a fresh copy of the base, made before it starts: the caller's
``data/<preset>.duckdb`` as it was when the batch began (copied once, never written), and, when
the notebook trains or loads a warm start, with the preset's world and warm start prepared once
before any point starts, so the points reuse one warm start instead of each training it. A point
that sets ``db`` uses that store as given (points that share one are refused with ``--jobs`` > 1).
Inside a point ``run_name(...)`` makes the notebook's run names unique to the point.

A point is skipped when its executed notebook already finished without error (the notebook is
the evidence: a record row alone does not skip it); ``force`` runs it again, after deleting what
the batch made for it (``forget_point``: its executed notebook, outputs file and folder). Every point's row says its parameters, status,
duration, the outputs it recorded, the error (cell and message) and the executed notebook's path.

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
    >>> point_label(grid[1])
    'preset=smoke,seed=1-cc63a733e0'
"""

from __future__ import annotations

import ast
import dataclasses
import hashlib
import itertools
import json
import os
import re
import shutil
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Any

import yaml

from workbench import paths

ENV_NOTEBOOK = "WORKBENCH_BATCH_NOTEBOOK"
ENV_POINT = "WORKBENCH_BATCH_POINT"  # the point's id, for run_name
RECORD = "batch.duckdb"  # the batch's record, in its folder
LABEL_CHARS = 80  # a label longer than this is cut; the id after it keeps it unique
_UNSAFE = re.compile(r"[^A-Za-z0-9._+=,-]")
# A notebook whose code calls one of these needs the preset's world and warm start: prepared once.
_TRAINS = re.compile(r"\b(train|warmstart)\(")
_WRITES = ("summary.md", "summary.csv", "summary.html", "summary.png", "points.md", "points.csv", "base")  # besides points' own files
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


def point_label(params: dict) -> str:
    """A point's file name: its parameters, sorted, in safe characters, then its id (unique).

    A list value joins with ``+``; any character outside ``A-Za-z0-9._+=,-`` becomes ``_``.

    Example:
        >>> point_label({"seed": 1, "method": "c2"})
        'method=c2,seed=1-dde870c085'
        >>> point_label({"db": "data/a b.duckdb", "methods": ["ssp", "c1"], "fast": True})[:-11]
        'db=data_a_b.duckdb,fast=true,methods=ssp+c1'
        >>> point_label({})[:-11]
        'defaults'
    """
    def text(value: Any) -> str:
        if isinstance(value, list):
            return "+".join(text(v) for v in value)
        return value if isinstance(value, str) else json.dumps(value, default=str)

    spelled = ",".join(f"{k}={text(v)}" for k, v in sorted(params.items())) or "defaults"
    return f"{_UNSAFE.sub('_', spelled)[:LABEL_CHARS]}-{point_id(params)}"


def run_name(name: str) -> str:
    """A run name unique to the batch point this kernel runs: ``name-<point id>``; ``name`` outside a batch.

    Notebooks pass their run names through it, so points that differ only in, say, ``steps``
    never overwrite each other's runs, even in one shared store.

    Example:
        >>> run_name("coevokg")  # outside a batch
        'coevokg'
    """
    point = os.environ.get(ENV_POINT)
    return f"{name}-{point}" if point else name


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


# ------------------------------------------------------------------------- each point's own store

def _declared_default(declared: dict, name: str) -> Any:
    """A parameter's default as the notebook declares it (None when undeclared or not a literal)."""
    try:
        return ast.literal_eval(declared[name]["default"]) if name in declared else None
    except (ValueError, SyntaxError):
        return None


def point_preset(declared: dict, params: dict) -> str | None:
    """The preset a point runs at (``WORKBENCH_SMOKE`` included); None for a notebook without one."""
    from workbench.notebook import effective_preset

    preset = params.get("preset", _declared_default(declared, "preset"))
    return effective_preset(preset) if preset else None


def point_db(notebook: Path, declared: dict, params: dict) -> Path | None:
    """The store a point names itself (its ``db``, read from the notebook's folder as its kernel does), else None."""
    db = params.get("db", _declared_default(declared, "db"))
    return (notebook.parent / db).resolve() if db else None


def check_shared_stores(notebook: Path, declared: dict, grid: list[dict], jobs: int) -> None:
    """Refuse, before anything runs, points that name one store while running side by side.

    Example:
        >>> check_shared_stores(Path("nb.ipynb"), {"db": {"default": '""'}}, [{"db": "a"}, {"db": "a"}], 1)
    """
    if jobs < 2:
        return
    seen: dict[Path, dict] = {}
    for params in grid:
        db = point_db(notebook, declared, params)
        if db is None:
            continue
        if db in seen:
            raise ValueError(f"-p db: points {point_label(seen[db])} and {point_label(params)} both use the store "
                             f"{db}, and with --jobs {jobs} one would fail on its lock; give each point its own "
                             f"db, leave db unset (each point then gets its own copy), or use --jobs 1")
        seen[db] = params


def _copy_store(src: Path, dst: Path) -> None:
    """Copy a DuckDB store (and its write-ahead log) while a read-only connection keeps writers out."""
    import duckdb

    try:
        con = duckdb.connect(str(src), read_only=True)
    except duckdb.IOException as err:
        raise ValueError(f"{src}: cannot copy the store for the batch's points, another process is writing to "
                         f"it ({err}); wait for it, or give each point its own -p db") from err
    try:
        dst.parent.mkdir(parents=True, exist_ok=True)
        for suffix in ("", ".wal"):
            if Path(f"{src}{suffix}").exists():
                shutil.copy2(f"{src}{suffix}", f"{dst}{suffix}")
    finally:
        con.close()


def _link_or_copy(src: str, dst: str) -> None:
    try:
        os.link(src, dst)  # index files are written once and renamed into place: a hard link is safe
    except OSError:
        shutil.copy2(src, dst)


def base_store(out: Path, preset: str, trains: bool, log=print) -> Path | None:
    """The store every point at ``preset`` starts from, made once per batch under ``out/base/``.

    A copy of the caller's ``data/<preset>.duckdb`` (and its search indexes, hard-linked) when it
    exists; when the notebook ``trains``, the preset's world and warm start are added here, once,
    so that points reuse them (warm starts live in the shared ``data/cache``). None when there is
    nothing to start from. An existing base is kept: every run of a batch starts from one snapshot.
    """
    from workbench import config, store

    cfg = config.preset(preset)
    base = out / "base" / f"{preset}.duckdb"
    mine = paths.default_db(preset)
    if not base.exists() and mine.exists():
        log(f"batch: copying {mine} for the points (read-only; each point gets its own copy)")
        _copy_store(mine, base)
        if mine.with_suffix(".index").is_dir():
            shutil.copytree(mine.with_suffix(".index"), base.with_suffix(".index"), dirs_exist_ok=True,
                            copy_function=_link_or_copy, ignore=shutil.ignore_patterns("*.tmp-*"))
    if trains and cfg.backbone.model == "tiny":
        from workbench.method.train import ensure_world
        from workbench.policy.warmstart import warmstart

        log(f"batch: preparing {base}: the {preset} world and warm start, once for every point")
        con = store.connect(base)
        try:
            ensure_world(con, cfg)
            warmstart(con, preset=cfg, seed=cfg.backbone.seed, log=log)
        finally:
            con.close()
    elif base.exists():
        store.connect(base).close()  # folds a copied write-ahead log into the file
    if not base.exists():
        return None
    base.with_suffix(".index").mkdir(exist_ok=True)
    return base


def _link(link: Path, target: Path) -> None:
    """``link`` -> ``target``; an old link is replaced, a real folder of the point's own is kept."""
    if link.is_symlink():
        if link.resolve() == target.resolve():
            return
        link.unlink()
    elif link.exists():
        return
    link.symlink_to(target.resolve(), target_is_directory=True)


def point_workspace(folder: Path, base: Path | None) -> dict[str, str]:
    """Set up a point's own data/, runs/ and figures/ under ``folder``; return the kernel's environment for them.

    ``data/cache`` links to the caller's cache. With a ``base``, the point's store is a fresh copy
    of it (a re-run starts from the base again) and its indexes link to the base's.
    """
    data = folder / "data"
    for sub in ("data", "runs", "figures"):
        (folder / sub).mkdir(parents=True, exist_ok=True)
    _link(data / "cache", paths.cache_dir())
    if base is not None:
        mine = data / base.name
        for suffix in ("", ".wal"):  # an old log replayed onto a fresh copy would corrupt it
            Path(f"{mine}{suffix}").unlink(missing_ok=True)
        shutil.copy2(base, mine)
        _link(mine.with_suffix(".index"), base.with_suffix(".index"))
    return {"WORKBENCH_DATA": str(data.resolve()), "WORKBENCH_RUNS": str((folder / "runs").resolve()),
            "WORKBENCH_FIGURES": str((folder / "figures").resolve())}


def trains(notebook: Path) -> bool:
    """Whether the notebook's code trains or loads a warm start (so its points need one prepared)."""
    import nbformat

    nb = nbformat.read(notebook, as_version=4)
    return any(_TRAINS.search(c.source) for c in nb.cells if c.cell_type == "code")


# ---------------------------------------------------------------------------------- running

def _finished(notebook: Path) -> float | None:
    """The seconds an executed notebook took when it finished without error, else None."""
    if not notebook.exists():
        return None
    import nbformat

    nb = nbformat.read(notebook, as_version=4)
    meta = nb.metadata.get("papermill", {})
    if not meta.get("end_time") or meta.get("exception"):
        return None
    # A kernel that never started leaves the notebook "complete" too: every code cell must have run.
    code = [c for c in nb.cells if c.cell_type == "code"]
    ran = all(c.metadata.get("papermill", {}).get("end_time") for c in code) and not any(
        o.get("output_type") == "error" for c in code for o in c.get("outputs", []))
    return float(meta.get("duration") or 0.0) if ran else None


def _describe_error(err: Exception) -> str:
    from papermill.exceptions import PapermillExecutionError

    if isinstance(err, PapermillExecutionError):
        head = (err.source or "").strip().splitlines()[:1]
        return (f"cell {err.cell_index} (In [{err.exec_count}]: {head[0][:80] if head else ''!s}): "
                f"{err.ename}: {err.evalue}")
    return f"{type(err).__name__}: {err}"


def _outputs(executed: Path) -> dict:
    path = outputs_path(executed)
    return json.loads(path.read_text()) if path.exists() else {}


def run_point(notebook: Path, params: dict, out: Path, kernel_name: str | None = None,
              base: Path | None = None) -> PointResult:
    """Execute one grid point with papermill into ``out/<label>.ipynb``, in its own workspace
    ``out/<label>/`` (see ``point_workspace``); never raises for a notebook error."""
    import papermill
    from jupyter_client.manager import KernelManager

    point, label = point_id(params), point_label(params)
    executed = out / f"{label}.ipynb"
    outputs_path(executed).unlink(missing_ok=True)
    nb_kernel = kernel_name or _kernel_of(notebook)
    start = time.perf_counter()
    error = None
    km = KernelManager(kernel_name=nb_kernel)
    try:
        # The kernel gets its own environment (threads share os.environ): its record() file, its
        # point id for run_name, and its own data/runs/figures folders.
        env = {**os.environ, **point_workspace(out / label, base), ENV_NOTEBOOK: str(executed), ENV_POINT: point}
        km.start_kernel(env=env, cwd=str(notebook.parent))
        papermill.execute_notebook(str(notebook), str(executed), parameters=params, kernel_name=nb_kernel,
                                   progress_bar=False, km=km)
    except Exception as err:  # a failing point is reported, the others go on
        error = _describe_error(err)
    finally:
        if km.has_kernel:
            km.shutdown_kernel(now=True)
    return PointResult(point, params, "failed" if error else "done", time.perf_counter() - start,
                       _outputs(executed), error, str(executed))


def _kernel_of(notebook: Path) -> str:
    import nbformat

    return nbformat.read(notebook, as_version=4).metadata.get("kernelspec", {}).get("name", "python3")


def forget_point(out: Path, params: dict) -> list[Path]:
    """Delete what the batch made for the point ``params`` in its folder ``out`` so it can run again:
    ``<label>.ipynb``, ``<label>.outputs.json`` and the folder ``<label>/`` (its store copy, runs,
    figures; the links in it to the shared cache and indexes are removed, never followed). Refused,
    deleting nothing, unless the executed notebook is papermill's run of exactly these parameters
    and the folder is a real folder directly in ``out``. Returns what was deleted.

    Example:
        >>> forget_point(Path("/nonexistent"), {"x": 1})
        []
    """
    import nbformat

    label = point_label(params)
    executed, outputs, folder = out / f"{label}.ipynb", outputs_path(out / f"{label}.ipynb"), out / label
    present = [p for p in (executed, outputs, folder) if p.exists() or p.is_symlink()]
    if not present:
        return []
    ran = nbformat.read(executed, as_version=4).metadata.get("papermill", {}) if executed.is_file() else {}
    if ran.get("parameters") != params:
        raise ValueError(f"--force: {executed} is not this batch's run of point {label} (its papermill parameters "
                         f"are {ran.get('parameters')!r}, expected {params!r}); nothing deleted: move it away by hand")
    if folder.is_symlink() or (folder.exists() and (not folder.is_dir() or folder.resolve().parent != out.resolve())):
        raise ValueError(f"--force: {folder} is not a folder of this batch's own (a link or a file); nothing deleted")
    for path in present:
        if path.is_dir():
            shutil.rmtree(path)  # links inside (data/cache, the index) are unlinked, their targets kept
        else:
            path.unlink()
    return present


def record_path(out: str | Path) -> Path:
    """Where a batch kept in folder ``out`` records its points (``batch_results``)."""
    return Path(out) / RECORD


def _connect(db: Path, read_only: bool = False):
    """A short connection to a batch record; waits while another process (a --list) holds it."""
    import duckdb

    from workbench import store

    for attempt in range(60):
        try:
            return store.connect(db, read_only=read_only)
        except duckdb.IOException:
            if attempt == 59:
                raise
            time.sleep(1.0)


def _done_points(db: Path, batch: str) -> set[str]:
    if not db.exists():
        return set()
    con = _connect(db, read_only=True)
    try:
        return {p for (p,) in con.execute("SELECT point FROM batch_results WHERE batch = ? AND status = 'done'",
                                          [batch]).fetchall()}
    finally:
        con.close()


def _save(db: Path, batch: str, results: list[PointResult]) -> None:
    """Write points' rows in one short connection."""
    if not results:
        return
    from workbench import store

    con = _connect(db)
    try:
        with store.transaction(con):
            for r in results:
                con.execute("DELETE FROM batch_results WHERE batch = ? AND point = ?", [batch, r.point])
                con.execute("INSERT INTO batch_results VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                            [batch, r.point, json.dumps(r.params, sort_keys=True), r.status, r.duration_s,
                             json.dumps(r.outputs, sort_keys=True), r.error, r.notebook])
    finally:
        con.close()


def check_out(out: Path) -> None:
    """Refuse an ``--out`` that is not a batch's folder yet holds a file the batch would write over.

    Example:
        >>> check_out(Path("/nonexistent"))
    """
    if not out.is_dir() or record_path(out).exists() or any(out.glob("*-" + "[0-9a-f]" * 10 + ".ipynb")):
        return
    clash = [name for name in _WRITES if (out / name).exists()]
    if clash:
        raise ValueError(f"--out {out}: holds {clash[0]!r} and is not a batch's folder (no {RECORD}); "
                         f"pick a new or empty folder so nothing there is overwritten")


def default_out(name: str) -> Path:
    """A batch's folder unless ``--out`` says otherwise: ``runs/batch/<name>/`` (``name`` a plain name)."""
    return paths.runs_dir() / "batch" / paths.plain_name(name, "--name")


def run_batch(notebook: str | Path, grid: list[dict], name: str | None = None, out_dir: str | Path | None = None,
              jobs: int = 2, db: str | Path | None = None, kernel_name: str | None = None,
              progress: bool = True, summary: bool = True, log=print, force: bool = False) -> list[PointResult]:
    """Run ``notebook`` once per grid point, ``jobs`` at a time; return every point's result.

    Undeclared parameters are rejected before anything runs. Finished points are skipped, unless
    ``force``: then every point runs again from scratch (``forget_point``).
    ``name`` defaults to the notebook's stem; everything goes to ``out_dir`` (default
    ``runs/batch/<name>/``); rows go to ``batch_results`` in ``db`` (default ``out_dir/batch.duckdb``).
    With ``summary``, the points' recorded outputs are written side by side (``save_summary``).

    Example:
        >>> results = run_batch("tests/fixtures/batch_probe.ipynb", [{"x": 1}, {"x": 2}])  # doctest: +SKIP
        >>> [r.status for r in results]  # doctest: +SKIP
        ['done', 'done']
    """
    from tqdm.auto import tqdm

    from workbench import config

    notebook = Path(notebook).resolve()
    if not notebook.exists():
        raise FileNotFoundError(f"{notebook}: no such notebook")
    if jobs < 1:
        raise ValueError(f"--jobs must be at least 1, got {jobs}")
    declared = check_params(notebook, grid)
    name = paths.plain_name(name or notebook.stem, "--name")
    out = Path(out_dir) if out_dir else default_out(name)
    db = Path(db) if db else record_path(out)
    points = list({point_id(p): p for p in grid}.values())  # the same parameter set twice runs once
    results: dict[str, PointResult] = {}
    todo = []
    for params in points:
        executed = out / f"{point_label(params)}.ipynb"
        seconds = None if force else _finished(executed)  # the executed notebook, not a record row, says so
        if seconds is None:
            todo.append(params)
        else:
            results[point_id(params)] = PointResult(point_id(params), params, "skipped", seconds, _outputs(executed),
                                                    None, str(executed))
    check_shared_stores(notebook, declared, todo, jobs)
    check_out(out)
    # A point that names no store starts from its preset's base, prepared before any point starts,
    # so points never prepare (or train) the same thing side by side.
    presets = {point_id(p): None if point_db(notebook, declared, p) else point_preset(declared, p) for p in todo}
    for preset in set(presets.values()) - {None}:
        config.preset(preset)  # an unknown preset fails here, before anything is written
    if force:
        for params in todo:
            for path in forget_point(out, params):
                log(f"batch: --force: deleted {path}")
    out.mkdir(parents=True, exist_ok=True)
    done_rows = _done_points(db, name)
    _save(db, name, [dataclasses.replace(r, status="done") for r in results.values() if r.point not in done_rows]
          + [PointResult(point_id(p), p, "pending", notebook=str(out / f"{point_label(p)}.ipynb")) for p in todo])
    bases = {preset: base_store(out, preset, trains(notebook), log=log)
             for preset in sorted(set(presets.values()) - {None})}
    with ThreadPoolExecutor(max_workers=jobs) as pool, \
            tqdm(total=len(todo), desc=f"batch {name}", disable=not progress or not todo) as bar:
        futures = [pool.submit(run_point, notebook, params, out, kernel_name, bases.get(presets[point_id(params)]))
                   for params in todo]
        failed = 0
        for future in as_completed(futures):
            result = future.result()
            results[result.point] = result
            _save(db, name, [result])
            failed += result.status == "failed"
            bar.update(1)
            bar.set_postfix(failed=failed)
    ordered = [results[point_id(p)] for p in points]
    if summary:
        save_summary(ordered, out, name)
    return ordered


def failure_report(results: list[PointResult]) -> str:
    """One paragraph per failed point: its parameters, the failing cell, the error and the notebook.

    Example:
        >>> failure_report([PointResult("ab", {"x": 1}, "failed", 1.0, {}, "cell 2 (...): ValueError: no", "x=1-ab.ipynb")])
        'FAILED point x=1-ab {"x": 1}\\n  cell 2 (...): ValueError: no\\n  notebook: x=1-ab.ipynb'
    """
    return "\n".join(f"FAILED point {Path(r.notebook).stem or r.point} {json.dumps(r.params, sort_keys=True)}\n"
                     f"  {r.error}\n  notebook: {r.notebook}" for r in results if r.status == "failed")


# ---------------------------------------------------------------------------- summary and listing

def _cell(value: Any) -> Any:
    return json.dumps(value, sort_keys=True) if isinstance(value, (list, dict)) else value


def summary_table(results: list[PointResult]):
    """One row per point: its label, status, seconds, the parameters that vary, then every recorded output.

    ``attrs["outputs"]`` names the output columns.

    Example:
        >>> rs = [PointResult("a", {"x": 1, "p": "s"}, "done", 2.0, {"sq": 1}, None, "out/p=s,x=1-a.ipynb"),
        ...       PointResult("b", {"x": 2, "p": "s"}, "failed", 3.0, {}, "boom", "out/p=s,x=2-b.ipynb")]
        >>> summary_table(rs).to_dict("records")
        [{'point': 'p=s,x=1-a', 'status': 'done', 'seconds': 2.0, 'x': 1, 'sq': 1.0}, {'point': 'p=s,x=2-b', 'status': 'failed', 'seconds': 3.0, 'x': 2, 'sq': nan}]
    """
    import pandas as pd

    names = list(dict.fromkeys(k for r in results for k in r.params))
    varying = [k for k in names if len(results) == 1 or
               len({json.dumps(r.params.get(k), sort_keys=True, default=str) for r in results}) > 1]
    rows, outputs = [], []
    for r in results:
        row = {"point": Path(r.notebook).stem if r.notebook else point_label(r.params), "status": r.status,
               "seconds": round(r.duration_s, 1), **{k: _cell(r.params.get(k)) for k in varying}}
        for key, value in r.outputs.items():
            column = key if key not in row or key in outputs else f"{key} (output)"
            if column not in outputs:
                outputs.append(column)
            row[column] = _cell(value)
        rows.append(row)
    table = pd.DataFrame(rows, columns=["point", "status", "seconds", *varying, *outputs])
    table.attrs["outputs"] = outputs
    return table


def summary_figure(table, title: str):
    """Bars of each numeric recorded output per point, one panel per output (seconds when none).

    Example:
        >>> rs = [PointResult("a", {"x": 1}, "done", 2.0, {"sq": 1}), PointResult("b", {"x": 2}, "done", 3.0, {"sq": 4})]
        >>> [t.name for t in summary_figure(summary_table(rs), "demo").data]
        ['sq']
    """
    import math

    import pandas as pd
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    numeric = [c for c in table.attrs.get("outputs", []) if pd.api.types.is_numeric_dtype(table[c])
               and not pd.api.types.is_bool_dtype(table[c])]
    panels = numeric or ["seconds"]
    short = table.point.str.replace(r"-[0-9a-f]{10}$", "", regex=True)
    x = short if short.is_unique else table.point  # the id stays where the names alone collide
    cols = min(3, len(panels))
    rows = math.ceil(len(panels) / cols)
    fig = make_subplots(rows=rows, cols=cols, subplot_titles=panels, vertical_spacing=0.25 / rows + 0.05)
    colours = {"done": "#4c78a8", "skipped": "#72b7b2", "failed": "#e45756", "pending": "#bab0ac"}
    for i, column in enumerate(panels):
        fig.add_trace(go.Bar(x=x, y=table[column], name=column, showlegend=False, hovertext=table.status,
                             marker_color=[colours.get(s, "#4c78a8") for s in table.status]),
                      row=i // cols + 1, col=i % cols + 1)
    fig.update_xaxes(tickangle=-30, automargin=True)
    fig.update_layout(title=title, height=max(420, 340 * rows), margin=dict(t=90))
    return fig


def save_summary(results: list[PointResult], out: str | Path, name: str) -> list[Path]:
    """Write the batch summary into ``out``: ``summary.md`` / ``.csv`` (``compare.over_seeds``: each
    recorded output per method and other varying parameter, mean over seeds with a 95% t interval),
    ``summary.html`` / ``.png`` (its figure) and ``points.md`` / ``.csv`` (every point side by side)."""
    from workbench import compare, figures

    table = summary_table(results)
    done = sum(r.status in ("done", "skipped") for r in results)
    caption = (f"Batch {name}: {len(results)} points; each point's recorded outputs side by side "
               f"(executed notebooks and point folders beside this file)")
    written = figures.save_table(table, "points", caption, out_dir=out)
    long = compare.points_long(results)
    grouped = compare.over_seeds(long)
    caption = (f"Batch {name}: {done} of {len(results)} points finished; each recorded output per group, the mean "
               f"over seeds with its 95% t interval (blank for one seed); points.md has every point")
    written += figures.save_table(grouped, "summary", caption, out_dir=out)
    title = f"Batch {name}: recorded outputs, mean over seeds ({done} of {len(results)} points finished)"
    fig = (compare.over_seeds_figure(grouped, long, title) if not long.empty
           else summary_figure(table, f"Batch {name}: seconds per point ({done} of {len(results)} finished)"))
    return written + figures.save_fig(fig, "summary", out_dir=out)


def list_batches(root: str | Path | None = None):
    """Every batch recorded under ``root`` (default ``runs/batch/``): its points by status and its folder.

    Example:
        >>> list_batches("/nonexistent").empty
        True
    """
    import pandas as pd

    root = Path(root) if root else paths.runs_dir() / "batch"
    rows = []
    for rec in sorted(root.glob(f"*/{RECORD}")) if root.is_dir() else []:
        con = _connect(rec, read_only=True)
        try:
            counts = con.execute("SELECT batch, status, count(*) FROM batch_results GROUP BY ALL").fetchall()
        finally:
            con.close()
        for batch in sorted({b for b, _, _ in counts}):
            by = {s: n for b, s, n in counts if b == batch}
            rows.append({"batch": batch, "points": sum(by.values()), **{s: by.get(s, 0) for s in
                         ("done", "failed", "pending")}, "folder": str(rec.parent)})
    return pd.DataFrame(rows, columns=["batch", "points", "done", "failed", "pending", "folder"])


def _short(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else json.dumps(value) if not isinstance(value, str) else value


def list_points(db: str | Path, name: str | None = None):
    """A batch's points from its record ``db``: status, point, seconds, recorded outputs, notebook.

    ``name`` picks one batch when several share the record.
    """
    import pandas as pd

    db = Path(db)
    if not db.exists():
        raise FileNotFoundError(f"{db}: no batch record here (run the batch first, or pass its --out / --db)")
    con = _connect(db, read_only=True)
    try:
        rows = con.execute("SELECT batch, status, point, duration_s, outputs, notebook FROM batch_results "
                           "WHERE ? IS NULL OR batch = ? ORDER BY batch, notebook", [name, name]).fetchall()
    finally:
        con.close()
    return pd.DataFrame([{"batch": b, "status": s, "point": Path(nb).stem if nb else p,
                          "seconds": round(d or 0.0, 1),
                          "outputs": " ".join(f"{k}={_short(v)}" for k, v in json.loads(o or "{}").items()),
                          "notebook": nb} for b, s, p, d, o, nb in rows],
                        columns=["batch", "status", "point", "seconds", "outputs", "notebook"])
