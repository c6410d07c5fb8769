"""The DuckDB store: the single source of truth for worlds, chain pools, rollouts and runs.

Schema (every table below; ``connect`` creates what is missing, so old stores upgrade in place):

Knowledge source (TinyWorld or an imported KILT / wiki-18 / Wikidata5M source)
    entities(entity_id, title, type, kind, source)
        ``kind`` is 'entity' for a real article and names the noise the chain filters reject:
        'year', 'list', 'nationality', 'short'. ``type`` is the entity type (person, city, ...).
    passages(passage_id, entity_id, paragraph, text)
        One row per paragraph of an entity's article (KILT ``text[i]``); wiki-18 passages too.
    anchors(src_entity, paragraph, start, stop, text, dst_entity)
        Hyperlinks exactly as KILT records them: character span ``[start, stop)`` of paragraph
        ``paragraph`` of the source article, pointing at ``dst_entity``.
    relations(label, domain, range, functional)
        Typed natural-language relation labels ("directed by") with domain/range entity types.
    edges(src, dst, relation, source)
        The labelled hyperlink graph the walker traverses (one row per (src, dst, relation)).
    triples(head, relation, tail)   Wikidata5M-style id triples, when imported.
    aliases(entity_id, alias)       Alternative names (Wikidata5M alias files, TinyWorld).

Chain pool G_t (seed 000, sections 3.1-3.4)
    chains(chain_id, hash, hops, run, created_round, origin, trajectory_id)
        ``hash`` is the deduplication key over the lowercased entity sequence (section 3.4).
        ``run`` is NULL for G_0 (offline walks, round 0) and a run name for chains its write-back
        created; ``origin`` is 'walk' or 'writeback'.
    chain_nodes(chain_id, position, entity_id, relation)
        ``relation`` labels the edge from this node to the next (NULL on the last node).
    evidence(evidence_id, chain_id, position, target, entity_id, passage_id, text, source, run,
             round, trajectory_id)
        Evidence attached to a chain node (``target`` = 'node') or to the edge leaving it
        (``target`` = 'edge'). ``source`` is 'walk' (the node passage of G_0) or 'writeback'.
        G_t of a run = chains and evidence with run NULL or that run, and round <= t.
    pool_builds(build_id, seed, walks, min_hops, max_hops, params, rejections, created_at)
        One row per ``pool build``; ``rejections`` is a JSON object {reason: count}.

Questions and evaluation
    questions(question_id, dataset, split, family, question, answers, chain, hops, source)
        ``answers`` is a list of gold strings; ``chain`` the gold entity-id chain (may be empty
        for imported human QA). TinyWorld writes dataset 'tinyworld' with splits seed/val/test; a
        training run writes its admitted generated questions as dataset 'generated', split = the run.
    generated_questions(question_id, run, round, chain_id)
        The round and originating chain of each generated question (``method/run_store.py``).
    eval_outcomes(eval_id, model, dataset, question_id, prediction, em, f1, cover_em, turns,
                  created_at)

Rollouts and training (issues 3-4)
    trajectories(trajectory_id, run, round, question_id, sample, role, prompt, response,
                 queries, passage_ids, entity_ids, answer, r_ans, s_path, reward, n_generated,
                 n_retrieved, gen_seconds, search_seconds)
    candidates(candidate_id, run, round, chain_id, idx, question, answer, extracted, admitted,
               scores, reason, p_s, reward)
        Proposer candidates with the gate verdict (per-dimension ``scores`` as JSON).
    run_metrics(run, round, metrics)     One JSON object per round (``runs show``).
    runs(run, method, preset, seed, config, config_hash, steps, status, created_at)

Imports and batches
    imports(import_id, kind, file, lines, skipped, created_at, fingerprint, inserted, content, content_head)
        ``fingerprint`` identifies the imported file(s) (``kg.sources.fingerprint``), ``content`` their
        content (decompressed, decoded, line ends removed; ``content_head`` its first MiB): an import
        of a file or content already recorded is refused unless asked to append. ``inserted``: the rows it added.
    skipped_lines(import_id, file, line, error)
    pipeline_steps(pipeline, step, checksum, input, inputs, report, seconds, created_at)
        One row per step of ``workbench data paper`` done in this store (``data_pipeline``): the
        checksum of its input (a rerun skips it when unchanged), the input's name, its report.
    batch_results(batch, point, params, status, duration_s, outputs, error, notebook)

Example:
    >>> import tempfile, os
    >>> from workbench import store
    >>> con = store.connect(os.path.join(tempfile.mkdtemp(), "s.duckdb"))
    >>> con.execute("SELECT count(*) FROM entities").fetchone()
    (0,)
"""

from __future__ import annotations

import contextlib
import re
from pathlib import Path
from typing import Iterator

import duckdb

from workbench import paths

SCHEMA = """
CREATE TABLE IF NOT EXISTS entities (
    entity_id BIGINT PRIMARY KEY, title VARCHAR NOT NULL, type VARCHAR, kind VARCHAR DEFAULT 'entity',
    source VARCHAR);
CREATE TABLE IF NOT EXISTS passages (
    passage_id BIGINT PRIMARY KEY, entity_id BIGINT, paragraph INTEGER, text VARCHAR);
CREATE TABLE IF NOT EXISTS anchors (
    src_entity BIGINT, paragraph INTEGER, start INTEGER, stop INTEGER, text VARCHAR, dst_entity BIGINT);
CREATE TABLE IF NOT EXISTS relations (
    label VARCHAR PRIMARY KEY, domain VARCHAR, range VARCHAR, functional BOOLEAN);
CREATE TABLE IF NOT EXISTS edges (
    src BIGINT, dst BIGINT, relation VARCHAR, source VARCHAR);
CREATE TABLE IF NOT EXISTS triples (head VARCHAR, relation VARCHAR, tail VARCHAR);
CREATE TABLE IF NOT EXISTS aliases (entity_id BIGINT, alias VARCHAR);

CREATE TABLE IF NOT EXISTS chains (
    chain_id BIGINT PRIMARY KEY, hash VARCHAR NOT NULL, hops INTEGER, run VARCHAR,
    created_round INTEGER DEFAULT 0, origin VARCHAR DEFAULT 'walk', trajectory_id BIGINT);
CREATE TABLE IF NOT EXISTS chain_nodes (
    chain_id BIGINT, position INTEGER, entity_id BIGINT, relation VARCHAR);
CREATE TABLE IF NOT EXISTS evidence (
    evidence_id BIGINT PRIMARY KEY, chain_id BIGINT, position INTEGER, target VARCHAR,
    entity_id BIGINT, passage_id BIGINT, text VARCHAR, source VARCHAR, run VARCHAR,
    round INTEGER DEFAULT 0, trajectory_id BIGINT);
CREATE TABLE IF NOT EXISTS pool_builds (
    build_id INTEGER PRIMARY KEY, seed BIGINT, walks BIGINT, min_hops INTEGER, max_hops INTEGER,
    params JSON, rejections JSON, created_at TIMESTAMP DEFAULT current_timestamp);

CREATE TABLE IF NOT EXISTS questions (
    question_id BIGINT PRIMARY KEY, dataset VARCHAR, split VARCHAR, family VARCHAR,
    question VARCHAR NOT NULL, answers VARCHAR[], chain BIGINT[], hops INTEGER, source VARCHAR);
CREATE TABLE IF NOT EXISTS generated_questions (
    question_id BIGINT PRIMARY KEY, run VARCHAR, round INTEGER, chain_id BIGINT);
CREATE TABLE IF NOT EXISTS eval_outcomes (
    eval_id VARCHAR, model VARCHAR, dataset VARCHAR, question_id BIGINT, prediction VARCHAR,
    em DOUBLE, f1 DOUBLE, cover_em DOUBLE, turns INTEGER,
    created_at TIMESTAMP DEFAULT current_timestamp);

CREATE TABLE IF NOT EXISTS trajectories (
    trajectory_id BIGINT PRIMARY KEY, run VARCHAR, round INTEGER, question_id BIGINT,
    sample INTEGER, role VARCHAR, prompt VARCHAR, response VARCHAR, queries VARCHAR[],
    passage_ids BIGINT[], entity_ids BIGINT[], answer VARCHAR, r_ans DOUBLE, s_path DOUBLE,
    reward DOUBLE, n_generated INTEGER, n_retrieved INTEGER, gen_seconds DOUBLE,
    search_seconds DOUBLE);
CREATE TABLE IF NOT EXISTS candidates (
    candidate_id BIGINT PRIMARY KEY, run VARCHAR, round INTEGER, chain_id BIGINT, idx INTEGER,
    question VARCHAR, answer VARCHAR, extracted BOOLEAN, admitted BOOLEAN, scores JSON,
    reason VARCHAR, p_s DOUBLE, reward DOUBLE);
CREATE TABLE IF NOT EXISTS run_metrics (run VARCHAR, round INTEGER, metrics JSON);
CREATE TABLE IF NOT EXISTS runs (
    run VARCHAR PRIMARY KEY, method VARCHAR, preset VARCHAR, seed BIGINT, config JSON,
    config_hash VARCHAR, steps INTEGER, status VARCHAR,
    created_at TIMESTAMP DEFAULT current_timestamp);

CREATE TABLE IF NOT EXISTS imports (
    import_id INTEGER PRIMARY KEY, kind VARCHAR, file VARCHAR, lines BIGINT, skipped BIGINT,
    created_at TIMESTAMP DEFAULT current_timestamp);
ALTER TABLE imports ADD COLUMN IF NOT EXISTS fingerprint VARCHAR;
ALTER TABLE imports ADD COLUMN IF NOT EXISTS inserted JSON;
ALTER TABLE imports ADD COLUMN IF NOT EXISTS content VARCHAR;
ALTER TABLE imports ADD COLUMN IF NOT EXISTS content_head VARCHAR;
CREATE TABLE IF NOT EXISTS skipped_lines (import_id INTEGER, file VARCHAR, line BIGINT, error VARCHAR);
CREATE TABLE IF NOT EXISTS pipeline_steps (
    pipeline VARCHAR, step VARCHAR, checksum VARCHAR, input VARCHAR, inputs JSON, report JSON, seconds DOUBLE,
    created_at TIMESTAMP DEFAULT current_timestamp, PRIMARY KEY (pipeline, step));
CREATE TABLE IF NOT EXISTS batch_results (
    batch VARCHAR, point VARCHAR, params JSON, status VARCHAR, duration_s DOUBLE, outputs JSON,
    error VARCHAR, notebook VARCHAR);
"""


def connect(db: str | Path | None = None, read_only: bool = False) -> duckdb.DuckDBPyConnection:
    """Open (and create, with the schema) the store at ``db``; default ``data/tiny.duckdb``.

    A directory, or a store file shorter than its own header says (truncated: a half-copied or
    damaged file), is refused with ValueError before anything is read or written.

    Example:
        >>> con = connect(":memory:")
        >>> sorted(t for (t,) in con.execute("SHOW TABLES").fetchall())[:3]
        ['aliases', 'anchors', 'batch_results']
    """
    db = str(db if db is not None else paths.default_db())
    if db != ":memory:":
        if Path(db).is_dir():
            raise ValueError(f"{db}: is a directory; expected a DuckDB store file (e.g. {Path(db) / 'store.duckdb'})")
        Path(db).parent.mkdir(parents=True, exist_ok=True)
    try:
        con = duckdb.connect(db, read_only=read_only)
    except duckdb.Error as err:
        if not damaged(err):  # e.g. locked by another process: as it is
            raise
        raise ValueError(f"{db}: the store is damaged ({str(err).splitlines()[0]}); {RESTORE}") from None
    if db != ":memory:":
        try:
            check_whole(con, db)
        except ValueError:
            con.close()
            raise
    if not read_only:
        con.execute(SCHEMA)
    return con


_DAMAGED = ("Could not read enough bytes", "not a valid DuckDB database", "Corrupt database")
RESTORE = "restore it from a copy or rebuild it"


def file_of(con: duckdb.DuckDBPyConnection) -> str:
    """The resolved file of a store connection (':memory:' for an in-memory one).

    Example:
        >>> file_of(connect(":memory:"))
        ':memory:'
    """
    (path,) = con.execute("SELECT path FROM duckdb_databases() WHERE database_name = current_database()"
                          ).fetchall()[0]
    return str(Path(path).resolve()) if path else ":memory:"


def world_fingerprint(con: duckdb.DuckDBPyConnection) -> str:
    """A hash of the store's knowledge source (every entity's id and title, every passage's id and
    text, in any order): a checkpoint records it, so a resume onto another world is refused.

    Example:
        >>> con = connect(":memory:"); a = world_fingerprint(con)
        >>> _ = con.execute("INSERT INTO entities (entity_id, title) VALUES (1, 'Ada')")
        >>> a == world_fingerprint(con)
        False
    """
    import hashlib

    rows = con.execute("SELECT (SELECT count(*) FROM entities), (SELECT sum(hash(entity_id, title)) FROM entities), "
                       "(SELECT count(*) FROM passages), (SELECT sum(hash(passage_id, text)) FROM passages)").fetchone()
    return hashlib.sha256(repr(rows).encode()).hexdigest()[:16]


def damaged(err: Exception) -> bool:
    """Whether a DuckDB error says the store file itself is damaged (truncated, corrupt, not DuckDB).

    Example:
        >>> damaged(duckdb.IOException("IO Error: Could not set lock on file"))
        False
    """
    return any(sign in str(err) for sign in _DAMAGED)

def lock_holder(err: Exception) -> str | None:
    """What holds the store, from DuckDB's "Conflicting lock is held in ... (PID n)" error, and how
    to release it; None when ``err`` is not a lock conflict.

    Example:
        >>> lock_holder(duckdb.IOException('IO Error: Could not set lock on file "s.duckdb": Conflicting lock '
        ...                                'is held in /usr/bin/python3 (PID 999999999). See also ...'))
        'process 999999999 (no longer running; try again) holds the store open'
    """
    found = re.search(r"Conflicting lock is held in (.*?) \(PID (\d+)\)", str(err))
    if not found:
        return None
    pid = int(found.group(2))
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        cmd = " ".join(a.decode(errors="replace") for a in argv if a)
    except OSError:  # not Linux, or the process ended
        cmd = None if Path("/proc").is_dir() else found.group(1)
    if cmd is None:
        return f"process {pid} (no longer running; try again) holds the store open"
    if "ipykernel" in cmd or "jupyter" in cmd:
        return (f"a Jupyter kernel (PID {pid}) holds the store open: run con.close() in that notebook, or "
                f"restart or shut down its kernel, then try again")
    return (f"process {pid} ({cmd[:120]}) holds the store open: wait for it to finish, or stop it "
            f"(kill {pid}), then try again; DuckDB allows one writer per store file")


# DuckDB's file starts with three 4 KiB headers (the main one and two alternating database
# headers); the blocks follow, so a whole file is at least this long plus its USED blocks (its
# header's total also counts free blocks, which a checkpoint may have cut from the file's end).
HEADER_BYTES = 3 * 4096


def check_whole(con: duckdb.DuckDBPyConnection, db: str | Path) -> None:
    """ValueError when the store file at ``db`` is shorter than its used blocks need
    (``connect`` also turns DuckDB's own errors for a damaged file into this ValueError).

    DuckDB opens a truncated file without complaint and fails only when a missing block is read
    (checksum and short-read errors, table by table), so writers would build on a broken store.

    Example:
        >>> import os, tempfile
        >>> f = os.path.join(tempfile.mkdtemp(), "s.duckdb")
        >>> c = connect(f); _ = c.execute("CREATE TABLE big AS SELECT range AS i FROM range(300000)"); c.close()
        >>> os.truncate(f, os.path.getsize(f) // 2)
        >>> connect(f)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ValueError: ...s.duckdb: the store is damaged (...); restore it from a copy or rebuild it
    """
    (row,) = con.execute("PRAGMA database_size").fetchall()
    block_size, used = int(row[2]), int(row[4])
    size = Path(db).stat().st_size
    if used and size < HEADER_BYTES + used * block_size:
        raise ValueError(f"{db}: the store is damaged (truncated: {size} bytes for {used} used blocks of "
                         f"{block_size} bytes); {RESTORE}")


_open_transactions: dict[int, int] = {}  # id(connection) -> nesting depth of ``transaction`` blocks


@contextlib.contextmanager
def transaction(con: duckdb.DuckDBPyConnection) -> Iterator[duckdb.DuckDBPyConnection]:
    """All or nothing: commit on success, roll back (store unchanged) on any exception.

    Blocks nest: an inner block joins the outer one (DuckDB has no savepoints), so a writer that
    uses its own transaction can run inside a larger unit, such as a training round.

    Example:
        >>> con = connect(":memory:")
        >>> try:
        ...     with transaction(con):
        ...         _ = con.execute("INSERT INTO aliases VALUES (1, 'x')")
        ...         raise ValueError("bad input")
        ... except ValueError:
        ...     pass
        >>> con.execute("SELECT count(*) FROM aliases").fetchone()
        (0,)
    """
    key = id(con)
    if _open_transactions.get(key):
        _open_transactions[key] += 1
        try:
            yield con
        finally:
            _open_transactions[key] -= 1
        return
    con.execute("BEGIN TRANSACTION")
    _open_transactions[key] = 1
    try:
        yield con
    except BaseException:
        con.execute("ROLLBACK")
        raise
    else:
        con.execute("COMMIT")
    finally:
        _open_transactions.pop(key, None)


@contextlib.contextmanager
def registered(con, name: str, frame) -> Iterator[None]:
    """``con.register`` a frame for the block; on an error the original exception propagates (an
    aborted DuckDB transaction also refuses ``unregister``, which must not mask the cause)."""
    con.register(name, frame)
    try:
        yield
    except BaseException:
        with contextlib.suppress(duckdb.Error):
            con.unregister(name)
        raise
    con.unregister(name)


def next_id(con: duckdb.DuckDBPyConnection, table: str, column: str) -> int:
    """The smallest id above every id in ``table.column`` (0 for an empty table)."""
    # fetchall, not fetchone: an unfinished result blocks a later con.register() in DuckDB 2.0
    (top,) = con.execute(f"SELECT max({column}) FROM {table}").fetchall()[0]
    return 0 if top is None else int(top) + 1


# Rows whose ids point into the world (entities, questions, chains): a new world orphans them.
WORLD_TABLES = ("entities", "passages", "anchors", "relations", "edges", "triples", "aliases",
                "chains", "chain_nodes", "evidence", "pool_builds", "questions", "imports", "skipped_lines",
                "pipeline_steps")
RUN_TABLES = ("runs", "run_metrics", "trajectories", "candidates", "generated_questions", "eval_outcomes")


def clear_world(con: duckdb.DuckDBPyConnection) -> None:
    """Delete every knowledge-source, pool, question and import row, and the run and evaluation
    rows that point into them (a world is rebuilt from scratch). Run folders on disk are kept.

    Callers refuse first when :func:`world_users` names anything (``build_world``).
    """
    for table in WORLD_TABLES + RUN_TABLES:
        con.execute(f"DELETE FROM {table}")


def world_users(con: duckdb.DuckDBPyConnection) -> list[str]:
    """What replacing the store's world would lose: its runs, evaluations and imports, as phrases.

    Example:
        >>> con = connect(":memory:")
        >>> _ = con.execute("INSERT INTO run_metrics VALUES ('r1', 0, '{}')")
        >>> world_users(con)
        ["run(s) ['r1']"]
    """
    runs = [r for (r,) in con.execute(
        "SELECT run FROM runs UNION SELECT run FROM run_metrics UNION SELECT run FROM trajectories "
        "UNION SELECT run FROM candidates ORDER BY 1").fetchall() if r is not None]
    evals = [e for (e,) in con.execute("SELECT DISTINCT eval_id FROM eval_outcomes ORDER BY 1").fetchall()]
    imports = [f"{k} {Path(f).name}" for k, f in con.execute(
        "SELECT kind, file FROM imports ORDER BY import_id").fetchall()]
    out = []
    for what, names in (("run(s)", runs), ("evaluation(s)", evals), ("import(s)", imports)):
        if names:
            out.append(f"{what} {names[:5]}" + (f" and {len(names) - 5} more" if len(names) > 5 else ""))
    return out
