"""The store a speed benchmark runs on (``workbench bench retrieval|rollout|loop|drfree|kgsearch``).

By default the preset's TinyWorld is built in memory: a self-contained world, the same for a given
preset and seed on any machine, and nothing written to disk. ``--db PATH`` measures the user's own
store instead, opened read-only -- a benchmark never writes into it; one that writes as it
measures (``bench loop`` trains two runs) gets an in-memory copy of it.

Example:
    >>> con, where = bench_store(None, "smoke")
    >>> where
    ':memory: (TinyWorld, preset smoke, seed 0)'
    >>> con.execute("SELECT count(*) > 0 FROM passages").fetchone()
    (True,)
"""

from __future__ import annotations

from pathlib import Path

from workbench import store


def bench_store(db: str | Path | None, preset: str, copy: bool = False):
    """(open connection, description): ``db`` read-only (``copy``: an in-memory copy, writable), or
    with ``db`` None or ':memory:' the ``preset``'s TinyWorld built in memory at its world seed.
    A ``db`` that is missing or holds no passages is refused (FileNotFoundError / ValueError naming
    ``--db``): a benchmark neither creates nor fills the user's store."""
    from workbench.config import preset as get_preset
    from workbench.kg.tinyworld import build_world

    if db is None or str(db) == ":memory:":
        seed = get_preset(preset).world.seed
        con = store.connect(":memory:")
        build_world(con, preset=preset, seed=seed)
        return con, f":memory: (TinyWorld, preset {preset}, seed {seed})"
    if not Path(db).is_file():
        raise FileNotFoundError(f"--db: no store at {db} (leave --db out to build the preset's world in memory)")
    con = memory_copy(db) if copy else store.connect(db, read_only=True)
    if not con.execute("SELECT count(*) FROM passages").fetchone()[0]:
        con.close()
        raise ValueError(f"--db {db}: the store holds no passages (build a world there first, or leave --db out "
                         "to build the preset's world in memory)")
    return con, f"{db}" + (" (an in-memory copy)" if copy else "")


def memory_copy(db: str | Path):
    """An in-memory store holding a copy of the store file ``db`` (read, never written), with the
    current schema's tables added where the file lacks them."""
    import duckdb

    con = duckdb.connect(":memory:")
    try:
        con.execute(f"ATTACH '{str(db).replace(chr(39), chr(39) * 2)}' AS source (READ_ONLY)")
        con.execute("COPY FROM DATABASE source TO memory")
        con.execute("DETACH source")
        con.execute(store.SCHEMA)
    except Exception:
        con.close()
        raise
    return con
