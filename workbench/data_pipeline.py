"""The paper setting's data, as one resumable pipeline (``workbench data paper``; issue 16).

Steps, in order, each one the existing importer or builder (nothing here parses a file):

* ``kilt``: the KILT knowledge source (``kg.sources.import_kilt``);
* ``wiki18``: the wiki-18 passages (``kg.sources.import_wiki18``);
* ``e5-index``: the dense E5 index over the store's passages (``search.index.build_dense``: streamed
  in chunks, constant memory, a killed build resumed), the encoder loaded from a local folder,
  persisted beside the store where ``search.index.open_index`` finds it;
* ``qa:NAME:SPLIT``: each QA file found in the QA folder (``qa_import.import_qa``; :func:`qa_files`),
  the NQ + HotpotQA training sets and Table 1's test sets;
* ``seed-pool``: the seed pool and validation split (``qa_import.build_seed_pool``, section 4.1);
* ``pool``: the chain pool G_0 (``kg.pool.build_pool``) with the preset's walk settings.

Every step runs with DuckDB capped at ``memory_limit`` (``kg.sources.IMPORT_MEMORY_LIMIT``, ours),
its commit included (:func:`run_steps`).

Each step is recorded in ``pipeline_steps`` with the checksum of its input: the fingerprint of
its file(s) (``kg.sources.fingerprint``: size and first/last MiB, as ``imports`` records), its
settings and the checksums of the steps it reads. A rerun skips a step done with the same checksum;
a changed checksum is refused (ValueError naming the step and its input) before anything runs,
unless ``force``: then a changed QA file replaces its questions, the seed pool and G_0 are rebuilt,
the index is rebuilt, and a changed knowledge source rebuilds the store's world from scratch
(every step again). A QA split already in the store from another import is refused the same way
before anything runs (``force`` replaces it). Every redo that replaces rows is refused, even with
``force``, while runs or evaluations use the store (they would lose or silently re-join their rows). A step's writes and
its record are one transaction, so a killed step leaves the store as before it (the index folder is
written through a rename; a rerun finds a whole one and only records it).

Example:
    >>> checksum({"file": "ab12", "walks": 10}) == checksum({"walks": 10, "file": "ab12"})
    True
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from workbench import paths, qa_import, store
from workbench.kg import pool as kg_pool
from workbench.kg import sources
from workbench.plan import TABLE1_DATASETS
from workbench.search import index as search_index
from workbench.search.encoder import is_e5

PIPELINE = "paper"
SOURCE_STEPS = ("kilt", "wiki18")  # a change of either is a new world
QA_EXTS = ("parquet", "jsonl", "json", "tsv", "csv")  # tsv / csv: PopQA's and Bamboogle's own files
# Folder and file names a benchmark goes by (FlashRAG calls 2Wiki '2wikimultihopqa').
QA_NAMES = {"2wiki": ("2wiki", "2wikimultihopqa"), "hotpotqa": ("hotpotqa", "hotpot")}
COMBINED_TRAIN = "nq_hotpotqa_train"  # Search-R1's combined training set (data_source per row)
TIMING_KEYS = ("seconds", "lines_per_s")  # kept in the log, not in the record (it would differ per run)


def checksum(inputs: dict) -> str:
    """sha256 of a step's inputs (fingerprints, settings, upstream checksums), key order ignored."""
    return hashlib.sha256(json.dumps(inputs, sort_keys=True, default=str).encode()).hexdigest()


def log(message: str) -> None:
    """One progress line on stderr, with the time."""
    print(f"[data {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


@dataclass
class Step:
    """One step: its name, what its input is (for messages), what identifies it, and its work.

    ``run(con, redo)`` does the step's writes (``redo``: replace what an earlier run of it wrote)
    and returns its report; ``adopt(con)`` returns the report of an equal earlier import found in
    the store (the same file imported by ``workbench import``, or for a knowledge source the same
    content from another file: .gz, other line ends), else None.
    """

    name: str
    what: str
    inputs: dict
    run: Callable
    adopt: Callable | None = None

    @property
    def checksum(self) -> str:
        return checksum(self.inputs)


# ---------------------------------------------------------------- finding the QA files

def _find(folder: Path, names: tuple[str, ...], splits: tuple[str, ...]) -> Path | None:
    for split in splits:
        for name in names:
            for ext in QA_EXTS:
                for candidate in (folder / f"{name}_{split}.{ext}", folder / name / f"{split}.{ext}"):
                    if candidate.is_file():
                        return candidate
    return None


def qa_files(folder: str | Path, datasets=TABLE1_DATASETS) -> list[tuple[str, str, Path]]:
    """(dataset, split, file) of every QA file the paper setting needs, found in ``folder``.

    Training: Search-R1's combined ``nq_hotpotqa_train.parquet`` (or ``nq_hotpotqa_train/train.parquet``),
    else NQ's (``nq_train.*`` or ``nq/train.*``) and HotpotQA's (``hotpotqa_train.*``,
    ``hotpotqa/train.*`` or ``hotpot_train_v1.1.json``). Each test set: ``NAME_test.*`` or
    ``NAME/test.*``, else ``dev`` in the same places (FlashRAG has only dev for HotpotQA and 2Wiki;
    Search-R1 evaluates on it), imported as split 'test'; extensions parquet, jsonl, json, tsv, csv.
    A missing one is a FileNotFoundError listing the names tried.

    Example:
        >>> qa_files("/nonexistent")
        Traceback (most recent call last):
        ...
        FileNotFoundError: --qa /nonexistent: not a folder of QA files
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"--qa {folder}: not a folder of QA files")
    out: list[tuple[str, str, Path]] = []
    combined = _find(folder, (COMBINED_TRAIN,), ("train",)) or \
        next((p for p in [folder / f"{COMBINED_TRAIN}.parquet"] if p.is_file()), None)
    if combined:
        out.append((COMBINED_TRAIN, "train", combined))
    else:
        hotpot = _find(folder, QA_NAMES["hotpotqa"], ("train",))
        if hotpot is None and (folder / "hotpot_train_v1.1.json").is_file():
            hotpot = folder / "hotpot_train_v1.1.json"
        for name, found in (("nq", _find(folder, ("nq",), ("train",))), ("hotpotqa", hotpot)):
            if found is None:
                raise FileNotFoundError(
                    f"--qa {folder}: no {name} training set (tried {name}_train.{{{','.join(QA_EXTS)}}}, "
                    f"{name}/train.*{', hotpot_train_v1.1.json' if name == 'hotpotqa' else ''}; or Search-R1's "
                    f"{COMBINED_TRAIN}.parquet)")
            out.append((name, "train", found))
    for name in datasets:
        names = QA_NAMES.get(name, (name,))
        found = _find(folder, names, ("test", "dev"))
        if found is None:
            raise FileNotFoundError(f"--qa {folder}: no {name} test set (tried {names[0]}_test.*, {names[0]}/test.*, "
                                    f"and dev in their place; extensions {', '.join(QA_EXTS)})")
        out.append((name, "test", found))
    return out


# ---------------------------------------------------------------- the steps

def _adopt_import(kind_like: str, digest: str, dataset: tuple[str, str] | None = None,
                  path: Path | None = None) -> Callable:
    """An ``imports`` row of this kind and fingerprint (and, for QA, questions of that dataset split);
    with ``path``, else one of its content (``kg.sources.same_content``: the same source as .gz or with
    other line ends; looked up once per pipeline)."""
    found: dict = {}

    def adopt(con):
        rows = con.execute("SELECT import_id, file, inserted FROM imports WHERE kind LIKE ? AND fingerprint = ? "
                           "ORDER BY import_id LIMIT 1", [kind_like, digest]).fetchall()
        if not rows and path is not None:
            if "content" not in found:
                found["content"] = sources.same_content(con, kind_like, (path,))
            if found["content"]:
                rows = con.execute("SELECT import_id, file, inserted FROM imports WHERE import_id = ?",
                                   [found["content"][0]]).fetchall()
        if not rows:
            return None
        if dataset and not con.execute("SELECT count(*) FROM questions WHERE dataset = ? AND split = ?",
                                       list(dataset)).fetchone()[0]:
            return None
        import_id, file, inserted = rows[0]
        return {"adopted_import": import_id, "file": file, **json.loads(inserted or "{}")}
    return adopt


def source_steps(kilt: Path, passages: Path, progress: bool) -> list[Step]:
    """The knowledge-source steps: KILT pages, then wiki-18 passages (under ``run_steps``'s memory
    cap: the importers leave the limit as they find it)."""
    kilt = sources.check_input(kilt, "KILT file")
    passages = sources.check_input(passages, "wiki-18 file")
    kf, pf = sources.fingerprint(kilt), sources.fingerprint(passages)
    common = dict(progress=progress, memory_limit=None)
    return [
        Step("kilt", str(kilt), {"fingerprint": kf},
             lambda con, redo: sources.import_kilt(con, kilt, **common), _adopt_import("kilt", kf, path=kilt)),
        Step("wiki18", str(passages), {"fingerprint": pf},
             lambda con, redo: sources.import_wiki18(con, passages, **common),
             _adopt_import("wiki18", pf, path=passages)),
    ]


def _model_fingerprint(folder: Path) -> str:
    """Every file of a model folder, by relative path and :func:`kg.sources.fingerprint`."""
    files = sorted(p for p in folder.rglob("*") if p.is_file())
    return checksum({str(p.relative_to(folder)): sources.fingerprint(p) for p in files})


def e5_model(folder: str | Path, dense_model: str) -> str:
    """The model string to build the index with: the run's own (``paths.local_model`` of the preset's
    ``search.dense_model``) when it is this folder, so a run finds the index, else the folder.

    Example:
        >>> e5_model("/nonexistent/e5-base-v2", "intfloat/e5-base-v2")
        Traceback (most recent call last):
        ...
        FileNotFoundError: --e5 /nonexistent/e5-base-v2: no model folder (download intfloat/e5-base-v2 there)
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"--e5 {folder}: no model folder (download intfloat/e5-base-v2 there)")
    if not is_e5(folder.name):
        raise ValueError(f"--e5 {folder}: the folder's name does not name an E5 model (e.g. e5-base-v2), so the "
                         "index and the runs would not add E5's 'query: '/'passage: ' prefixes; rename the folder")
    run_model = Path(paths.local_model(dense_model))
    if run_model.is_dir() and run_model.samefile(folder):
        return paths.local_model(dense_model)
    return str(folder)


def e5_hint(folder: str | Path, dense_model: str) -> str | None:
    """What train and eval need to find the index built with ``folder``, when the preset's
    ``search.dense_model`` resolves elsewhere (``paths.local_model``): the ``--set`` line, else None.

    Example:
        >>> import tempfile
        >>> folder = Path(tempfile.mkdtemp()) / "e5-base-v2"
        >>> folder.mkdir()
        >>> e5_hint(folder, "intfloat/e5-base-v2") == f"--set search.dense_model={folder}"
        True
        >>> e5_hint(folder, str(folder)) is None
        True
    """
    model = e5_model(folder, dense_model)
    return None if model == paths.local_model(dense_model) else f"--set search.dense_model={model}"


def e5_step(folder: Path, model: str, upstream: list[Step], chunk: int = search_index.DENSE_CHUNK) -> Step:
    """The dense index over the store's passages, built in chunks (or found) beside the store (under
    ``run_steps``'s memory cap: DuckDB's sort of the corpus spills past it)."""
    def run(con, redo):
        db = search_index.db_file(con)
        if db is None:
            raise ValueError("e5-index: the dense index is persisted beside the store: use a store file (--db)")
        from workbench.search.on_disk import corpus_record

        encoder = search_index.Encoder(model)
        # the corpus's digest, streamed once, also recorded for search.mmap (the fingerprint -> digest
        # record and the row -> passage_id map), so the paper tier's first mapped search opens at once
        record = corpus_record(con, search_index.index_root(db), chunk)
        digest = (record["digest"], record["passages"])
        log(f"e5-index: encoding {digest[1]:,} passages with {model}, {chunk:,} a chunk")
        meta = search_index.build_dense(con, encoder, search_index.index_root(db), digest, chunk,
                                        progress=lambda line: log(f"e5-index: {line}"))
        return {"passages": meta["passages"], "dim": meta["dim"], "model": model, "e5": encoder.e5,
                "key": meta["key"]}
    inputs = {"model": _model_fingerprint(Path(folder)), "as": model, **{s.name: s.checksum for s in upstream}}
    return Step("e5-index", str(folder), inputs, run)


def qa_steps(files: list[tuple[str, str, Path]]) -> list[Step]:
    """One import per QA file, as dataset NAME, split SPLIT."""
    steps = []
    for name, split, path in files:
        digest = sources.fingerprint(path)

        def run(con, redo, name=name, split=split, path=path):
            return qa_import.import_qa(con, path, name, split=split, replace=redo)
        steps.append(Step(f"qa:{name}:{split}", str(path), {"fingerprint": digest, "dataset": name, "split": split},
                          run, _adopt_import("qa:%", digest, (name, split))))
    return steps


def seed_pool_step(qa: list[Step], name: str, val: int, seed: int) -> Step:
    """The seed pool and validation split from the training sets' steps."""
    train = [s for s in qa if s.name.endswith(":train")]
    names = [s.name.split(":")[1] for s in train]
    inputs = {"from": names, "name": name, "val": val, "seed": seed, **{s.name: s.checksum for s in train}}
    return Step("seed-pool", f"{'+'.join(names)} training sets", inputs,
                lambda con, redo: qa_import.build_seed_pool(con, names, name=name, val=val, seed=seed, replace=redo))


def pool_step(pool_cfg, walks: int, upstream: list[Step]) -> Step:
    """G_0 by the preset's random walks over the imported graph."""
    settings = dict(walks=walks, min_hops=pool_cfg.min_hops, max_hops=pool_cfg.max_hops, seed=pool_cfg.seed,
                    functional_only=pool_cfg.functional_only, unique_grounding=pool_cfg.unique_grounding,
                    retrieval_verify=pool_cfg.retrieval_verify, hop_ratio=pool_cfg.hop_ratio)

    def run(con, redo):
        result = kg_pool.build_pool(con, force=redo, **settings)
        return {k: result[k] for k in ("build_id", "walks", "chains", "rejected", "evidence", "rejections")}
    return Step("pool", f"G_0 ({walks:,} walks)", {**settings, **{s.name: s.checksum for s in upstream}}, run)


def paper_steps(kilt, passages, qa_dir, e5, cfg, datasets=TABLE1_DATASETS, walks: int | None = None,
                val: int = qa_import.SEED_POOL_VAL, seed: int = 0, progress: bool = True) -> list[Step]:
    """Every step of the paper setting's data, inputs checked (files exist, QA files found) first;
    ``run_steps`` runs them under its memory cap."""
    src = source_steps(kilt, passages, progress)
    files = qa_files(qa_dir, datasets)
    model = e5_model(e5, cfg.search.dense_model)
    qa = qa_steps(files)
    return [*src, e5_step(Path(e5), model, src), *qa,
            seed_pool_step(qa, cfg.method.seed_dataset, val, seed),
            pool_step(cfg.pool, cfg.pool.walks if walks is None else walks, src)]


# ---------------------------------------------------------------- running them

def recorded(con, pipeline: str = PIPELINE) -> dict[str, tuple[str, str]]:
    """step -> (checksum, input) of every step done in this store."""
    return {step: (digest, what) for step, digest, what in con.execute(
        "SELECT step, checksum, input FROM pipeline_steps WHERE pipeline = ?", [pipeline]).fetchall()}


def _foreign_world(con, done: dict) -> str | None:
    """What of the store's world no recorded source step wrote (another KILT/wiki-18 file, a TinyWorld)."""
    if "kilt" in done:
        return None
    (n, kinds), = con.execute("SELECT count(*), list(DISTINCT source ORDER BY source) FROM entities").fetchall()
    return f"{n:,} entities from {', '.join(map(str, kinds))}" if n else None


def changes(con, steps: list[Step], pipeline: str = PIPELINE) -> list[str]:
    """Why each step whose input changed since it was done cannot be skipped, as sentences."""
    done = recorded(con, pipeline)
    out = [f"step {s.name!r}: its input {s.what} changed since the step was done "
           f"(from {done[s.name][1]}; checksum {done[s.name][0][:12]} then, {s.checksum[:12]} now)"
           for s in steps if s.name in done and done[s.name][0] != s.checksum]
    out += [c for c in (_clash(con, s, done) for s in steps) if c]
    foreign = _foreign_world(con, done)
    if foreign and steps and steps[0].name == "kilt" and not steps[0].adopt(con):
        out.insert(0, f"step 'kilt': the store already holds a world this pipeline did not import ({foreign})")
    return out


def _clash(con, step: Step, done: dict) -> str | None:
    """A QA step's dataset split already in the store from an import this pipeline did not record
    (``workbench import qa`` of another file), as a sentence; else None."""
    if not step.name.startswith("qa:") or step.name in done or (step.adopt and step.adopt(con)):
        return None
    _, name, split = step.name.split(":", 2)
    (n,), = con.execute("SELECT count(*) FROM questions WHERE dataset = ? AND split = ?", [name, split]).fetchall()
    return (f"step {step.name!r}: the store already holds {n:,} {name}/{split} questions from another import "
            f"(not {step.what})") if n else None


def _in_use(con) -> list[str]:
    """The runs and evaluations that use the store's questions and G_0 (a redo would replace their rows)."""
    return [u for u in store.world_users(con) if not u.startswith("import")]


def _reset(con) -> None:
    """A new world: every knowledge-source, question, pool and import row, and the step records
    (``run_steps`` has refused it already when runs or evaluations use the old one)."""
    store.clear_world(con)
    con.execute("DELETE FROM pipeline_steps")


def _record(con, pipeline: str, step: Step, report: dict, seconds: float) -> None:
    kept = {k: v for k, v in report.items() if k not in TIMING_KEYS}
    con.execute("DELETE FROM pipeline_steps WHERE pipeline = ? AND step = ?", [pipeline, step.name])
    con.execute("INSERT INTO pipeline_steps (pipeline, step, checksum, input, inputs, report, seconds) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)", [pipeline, step.name, step.checksum, step.what,
                                                 json.dumps(step.inputs, sort_keys=True), json.dumps(kept), seconds])


def run_steps(con, steps: list[Step], force: bool = False, pipeline: str = PIPELINE,
              memory_limit: str | None = None) -> list[dict]:
    """Run every step not done with its current checksum, each with its record in one transaction
    (DuckDB capped at ``memory_limit`` until that transaction has committed).

    Changed inputs -- and QA splits another import put in the store -- are refused before anything
    runs unless ``force`` (module docstring); with it, still refused while runs or evaluations use
    the store's questions or G_0 (a redo would replace their rows). Returns one dict per step:
    name, status ('done', 'adopted', 'skipped'), seconds, report.
    """
    changed = changes(con, steps, pipeline)
    if changed and not force:
        raise ValueError("; ".join(changed) + ": pass --force to redo "
                         + ("them" if len(changed) > 1 else "it") + " (a changed knowledge source rebuilds the "
                         "store's world: every step runs again)")
    replacing = [c for c in changed if not c.startswith("step 'e5-index'")]  # an index holds no rows
    users = _in_use(con) if replacing else []
    if users:  # a new world included: a changed knowledge source replaces every row
        raise ValueError("; ".join(replacing) + f": and this store's {'; '.join(users)} use the rows a "
                         "redo would replace: use a new --db")
    reset = force and any(c.startswith(("step 'kilt'", "step 'wiki18'")) for c in changed)
    done = {} if reset else recorded(con, pipeline)
    clashes = {s.name for s in steps if _clash(con, s, done)}
    out = []
    for i, step in enumerate(steps):
        if step.name in done and done[step.name][0] == step.checksum:
            log(f"{step.name}: skipped (done with the same input checksum {step.checksum[:12]})")
            out.append({"step": step.name, "status": "skipped"})
            continue
        log(f"{step.name}: {'redoing' if step.name in done else 'running'} ({step.what})")
        started = time.perf_counter()
        with sources.memory_limited(con, memory_limit), store.transaction(con):
            if reset and i == 0:
                _reset(con)
            report = step.adopt(con) if step.adopt and not reset and step.name not in done else None
            status = "adopted" if report else "done"
            if report is None:  # redo: replace only what this pipeline recorded, or a clash --force allowed
                report = step.run(con, step.name in done or step.name in clashes)
            seconds = time.perf_counter() - started
            _record(con, pipeline, step, report, seconds)
        log(f"{step.name}: {status} in {seconds:.1f} s: "
            + json.dumps({k: v for k, v in report.items() if not isinstance(v, dict)}))
        out.append({"step": step.name, "status": status, "seconds": round(seconds, 3), "report": report})
    return out
