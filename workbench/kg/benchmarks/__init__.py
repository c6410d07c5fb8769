"""Six held-out TinyWorld benchmarks shaped like the paper's Table 1 columns (seed 000, section
4.1; issue 42): ``tw-nq``, ``tw-trivia``, ``tw-pop`` (single hop), ``tw-hotpot``, ``tw-2wiki``,
``tw-bamboogle`` (multi-hop), each its own generator and card (``data/benchmarks/<name>.md``).

TinyWorld's own test split shares the seed pool's five templates, so a solver that learns only
those templates wins there by construction. These sets share no template with the seed pool (a
test matches every question against every seed template), each asks in its own wording, and each
card says which of the seed pool's facts it may reuse (none for ``tw-bamboogle``). The seed pool
and validation stay as they are: the paper's "split from the source benchmark training data".

Sizes are the paper's (500 questions a benchmark, 125 for Bamboogle) at the tiny preset
(``world.suite_questions``; fewer where a small world has fewer). Every question's answer is
computed from the world's functional facts, unique, and not given away by the question (choice
comparisons name both options by design); ``spec`` records how, for the tests to re-check.
Deterministic by the world and ``seed`` (``SUITE_SEED``, ours).

In a store the six live as ``questions`` of datasets ``tw-*``, split 'test', built on first use
after the world's own questions (``ensure_suite``), so they export and import as any QA set
(``workbench export-qa --dataset tw-nq``, the Search-R1 parquet layout).

Example:
    >>> from workbench.kg.tinyworld import generate_world
    >>> from workbench.kg import qa_sets
    >>> w = generate_world(400, 0)
    >>> items = generate_suite(w, qa_sets.generate_questions(w, 5, 0), n=20)
    >>> {name: len(v) for name, v in items.items()}["tw-bamboogle"]
    5
"""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa

from workbench import paths, store
from workbench.kg.benchmarks import bamboogle, hotpot, nq, pop, trivia, twowiki
from workbench.kg.benchmarks.view import Held, Item, WorldView

SUITE_NAME = "table1"
GENERATORS = {m.NAME: m for m in (nq, trivia, pop, hotpot, twowiki, bamboogle)}  # Table 1's column order
SUITE = tuple(GENERATORS)
SINGLE_HOP = ("tw-nq", "tw-trivia", "tw-pop")
IN_DOMAIN = "tw-hotpot"  # the seed pool's own two multi-hop types, in new wording
SPLIT = "test"
SUITE_SEED = 0  # ours
SIZE = 500  # questions a benchmark (seed 000, section 4.1); Bamboogle a quarter
QUESTION_COLUMNS = ("question_id", "dataset", "split", "family", "question", "answers", "chain", "hops", "source")
_SCHEMA = pa.schema([("question_id", pa.int64()), ("dataset", pa.string()), ("split", pa.string()),
                     ("family", pa.string()), ("question", pa.string()), ("answers", pa.list_(pa.string())),
                     ("chain", pa.list_(pa.int64())), ("hops", pa.int32()), ("source", pa.string()),
                     ("spec", pa.string())])


def size_of(name: str, n: int = SIZE) -> int:
    """Questions of benchmark ``name`` when the others have ``n``.

    Example:
        >>> size_of("tw-nq"), size_of("tw-bamboogle"), size_of("tw-bamboogle", 40)
        (500, 125, 10)
    """
    return max(1, round(n * getattr(GENERATORS[name], "SIZE_SHARE", 1.0)))


def generate_suite(world=None, questions: pa.Table | None = None, n: int = SIZE, seed: int = SUITE_SEED, *,
                   view: WorldView | None = None, held: Held | None = None,
                   names=SUITE) -> dict[str, list[Item]]:
    """The benchmarks ``names`` of a world: ``{name: [Item, ...]}``, ``size_of(name, n)`` each where
    the world has that many. Pass a ``World`` and its TinyWorld ``questions`` (the seed pool and
    validation are read from them), or ``view`` and ``held`` directly."""
    if n < 1:
        raise ValueError(f"suite size n={n}: expected at least 1 question a benchmark")
    unknown = [x for x in names if x not in GENERATORS]
    if unknown:
        raise ValueError(f"unknown benchmark(s) {unknown}; the suite is {list(SUITE)}")
    view = view or WorldView.from_world(world)
    held = held or Held.from_questions(questions, view)
    return {name: GENERATORS[name].generate(view, held, size_of(name, n),
                                            np.random.default_rng([seed, 42, SUITE.index(name)]))
            for name in names}


def to_table(items: dict[str, list[Item]], first_id: int = 0) -> pa.Table:
    """The items as ``questions`` rows (ids from ``first_id``), plus ``spec`` as JSON."""
    rows = {c: [] for c in _SCHEMA.names}
    for name, part in items.items():
        for item in part:
            values = (first_id + len(rows["question"]), name, SPLIT, item.family, item.question, item.answers,
                      item.chain, item.hops, f"{name} (TinyWorld, workbench.kg.benchmarks)", json.dumps(item.spec))
            for c, v in zip(_SCHEMA.names, values):
                rows[c].append(v)
    return pa.table(rows, schema=_SCHEMA)


def stored_sizes(con) -> dict[str, int]:
    """How many test questions of each suite benchmark the store holds (0 where none)."""
    rows = dict(con.execute("SELECT dataset, count(*) FROM questions WHERE split = ? AND dataset IN "
                            "(SELECT unnest(?)) GROUP BY dataset", [SPLIT, list(SUITE)]).fetchall())
    return {name: int(rows.get(name, 0)) for name in SUITE}


def ensure_suite(con, n: int = SIZE, seed: int = SUITE_SEED) -> dict[str, int]:
    """Make sure the store holds the six benchmarks' test questions: those missing are generated
    from the store's world and its TinyWorld seed and validation questions and appended (in suite
    order, one transaction); those present (built earlier, or imported) are kept. Returns the
    sizes.

    Example:
        >>> from workbench.kg.tinyworld import build_world
        >>> con = store.connect(":memory:"); _ = build_world(con, preset="smoke")
        >>> sizes = ensure_suite(con, n=8)
        >>> sizes["tw-nq"], sizes["tw-bamboogle"], ensure_suite(con, n=8) == sizes
        (8, 2, True)
    """
    sizes = stored_sizes(con)
    missing = tuple(name for name, k in sizes.items() if k == 0)
    if not missing:
        return sizes
    view = WorldView.from_store(con)
    items = generate_suite(n=n, seed=seed, view=view, held=Held.from_store(con, view), names=missing)
    empty = [name for name, part in items.items() if not part]
    if empty:
        raise ValueError(f"the store's world is too small for benchmark(s) {empty}: build a larger world "
                         "(workbench world --preset tiny)")
    with store.transaction(con):
        table = to_table(items, first_id=store.next_id(con, "questions", "question_id")).drop_columns(["spec"])
        cols = ", ".join(QUESTION_COLUMNS)
        with store.registered(con, "_suite_insert", table):
            con.execute(f"INSERT INTO questions ({cols}) SELECT {cols} FROM _suite_insert")
    return stored_sizes(con)


def overlap(items: list[Item], held: Held) -> dict:
    """How a benchmark meets the training splits' facts: questions with at least one fact a seed or
    validation question uses (share), and the share of all its facts that are such.

    Example:
        >>> overlap([], Held())
        {'questions': 0, 'with_training_fact': 0.0, 'training_facts': 0.0}
    """
    facts = [f for i in items for f in i.facts]
    return {"questions": len(items),
            "with_training_fact": float(np.mean([held.uses(i.facts) > 0 for i in items])) if items else 0.0,
            "training_facts": float(np.mean([f in held.facts for f in facts])) if facts else 0.0}


def export_suite_parquet(con, path, names=SUITE, force: bool = False) -> int:
    """All of the suite's test questions in one Search-R1 parquet file (as Search-R1's own
    ``test.parquet`` mixes its benchmarks: ``data_source`` names each row's), each benchmark's rows as
    ``qa_sets.export_searchr1_parquet`` writes them; returns the row count. ``path`` is checked and
    written as every export is (``paths.output_file``, ``paths.atomic_output``).

    Example:
        >>> import os, tempfile
        >>> from workbench.kg.tinyworld import build_world
        >>> con = store.connect(":memory:"); _ = build_world(con, preset="smoke"); _ = ensure_suite(con, n=4)
        >>> export_suite_parquet(con, os.path.join(tempfile.mkdtemp(), "test.parquet"))
        21
    """
    import tempfile
    from pathlib import Path

    import pyarrow.parquet as pq

    from workbench.kg.qa_sets import export_searchr1_parquet

    path = paths.output_file(path, "OUT", inputs=[store.file_of(con)], force=force)  # before any work
    with tempfile.TemporaryDirectory() as tmp:
        parts = []
        for name in names:
            export_searchr1_parquet(con, Path(tmp) / f"{name}.parquet", SPLIT, dataset=name)
            parts.append(pq.read_table(Path(tmp) / f"{name}.parquet"))
    table = pa.concat_tables(parts, promote_options="default")
    with paths.atomic_output(path) as tmp:
        pq.write_table(table, tmp)
    return table.num_rows
