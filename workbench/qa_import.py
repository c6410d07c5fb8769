"""Importers of human QA datasets into the ``questions`` table (issue 3, Evaluation).

Formats (detected from the extension and the first record, or named):
* ``parquet``: FlashRAG (``question``, ``golden_answers``) or Search-R1 (``prompt``,
  ``reward_model.ground_truth.target``, ``extra_info``, ``data_source``).
* ``kilt``: KILT task JSON lines (``id``, ``input``, ``output[].answer``).
* ``hotpot``: HotpotQA JSON (a list of objects with ``_id``, ``question``, ``answer``,
  ``supporting_facts``, ``context``); ``type`` (bridge / comparison) becomes the family.
* ``jsonl``: plain JSON lines (``question``, ``answers``), optional ``split``, ``family``.

Rows: ``dataset`` = the given name; ``split`` = the argument, else the record's own (Search-R1
``extra_info.split``, a ``split`` field), else 'test'; ``family`` from the data or NULL;
``answers`` the gold strings; ``chain`` empty (human QA has no gold entity chain); ``source``
the record's ``data_source`` or the file name. Every record is validated before anything is
written; a malformed one raises ValueError naming the file and the record (line, row or index,
and id where there is one), and the store is unchanged.

Example:
    >>> import json, os, tempfile
    >>> from workbench import store
    >>> f = os.path.join(tempfile.mkdtemp(), "nq.jsonl")
    >>> _ = open(f, "w").write(json.dumps({"question": "who wrote hamlet", "answers": ["Shakespeare"]}) + "\\n")
    >>> con = store.connect(":memory:")
    >>> import_qa(con, f, "nq")["questions"]
    1
    >>> con.execute("SELECT dataset, split, question, answers FROM questions").fetchall()
    [('nq', 'test', 'who wrote hamlet', ['Shakespeare'])]
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import duckdb
import numpy as np
import pyarrow as pa

from workbench import store

FORMATS = ("auto", "parquet", "kilt", "hotpot", "jsonl")
DEFAULT_SPLIT = "test"


@dataclass
class QARecord:
    """One parsed question, before its dataset name and id are assigned."""

    question: str
    answers: list[str]
    split: str | None = None
    family: str | None = None
    hops: int | None = None
    source: str | None = None


def _answers(value, what: str) -> list[str]:
    """Gold answers as a non-empty list of non-empty strings (a single string is one answer)."""
    if isinstance(value, np.ndarray):
        value = value.tolist()
    if isinstance(value, (str, int, float)) and not isinstance(value, bool):
        value = [value]
    if not isinstance(value, list) or not value or not all(
            isinstance(a, (str, int, float)) and not isinstance(a, bool) and str(a).strip() for a in value):
        raise ValueError(f"expected {what} (a non-empty list of answer strings)")
    return [str(a).strip() for a in value]


def _text(value, what: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"expected {what} (a non-empty string)")
    return value.strip()


def _named(where: str, record) -> str:
    ident = None
    if isinstance(record, dict):
        ident = record.get("_id", record.get("id"))
    return f"{where} (id {ident!r})" if ident is not None else where


# ------------------------------------------------------------------------------------ formats

def _jsonl(path: Path) -> Iterator[tuple[str, dict]]:
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            where = f"line {lineno}"
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as err:
                raise ValueError(f"{path} {where}: expected a JSON object ({err})") from None
            if not isinstance(obj, dict):
                raise ValueError(f"{path} {where}: expected a JSON object")
            yield where, obj


def _plain(obj: dict) -> QARecord:
    """Plain JSON lines: ``question``, ``answers`` (also ``golden_answers`` / ``answer``)."""
    gold = next((obj[k] for k in ("answers", "golden_answers", "answer") if k in obj), None)
    return QARecord(_text(obj.get("question"), "field 'question'"),
                    _answers(gold, "field 'answers'"),
                    split=obj.get("split"), family=obj.get("family"), hops=obj.get("hops"))


def _kilt(obj: dict) -> QARecord:
    """KILT task line: ``input`` and the ``answer`` of each ``output`` entry that has one."""
    output = obj.get("output")
    if not isinstance(output, list):
        raise ValueError("expected field 'output' (a list of objects with 'answer')")
    gold = [o["answer"] for o in output if isinstance(o, dict) and o.get("answer") not in (None, "")]
    return QARecord(_text(obj.get("input"), "field 'input'"), _answers(gold, "field 'output[].answer'"))


def _hotpot(obj: dict) -> QARecord:
    """HotpotQA object; ``supporting_facts`` and ``context`` must be lists (not imported)."""
    for key in ("supporting_facts", "context"):
        if not isinstance(obj.get(key), list):
            raise ValueError(f"expected field {key!r} (a list)")
    return QARecord(_text(obj.get("question"), "field 'question'"), _answers(obj.get("answer"), "field 'answer'"),
                    family=obj.get("type"), hops=2)


def _search_r1_question(prompt) -> str:
    """The question inside a Search-R1 prompt: the last user message, after its last 'Question:'."""
    if isinstance(prompt, np.ndarray):
        prompt = prompt.tolist()
    if isinstance(prompt, list):
        users = [m.get("content") for m in prompt if isinstance(m, dict) and m.get("role") == "user"]
        prompt = users[-1] if users else None
    text = _text(prompt, "column 'prompt' (chat messages with a user turn)")
    _, marker, after = text.rpartition("Question:")
    return _text(after if marker else text, "a question after 'Question:' in column 'prompt'")


def _parquet_row(row: dict) -> QARecord:
    """FlashRAG (``question``, ``golden_answers``) or Search-R1 (``prompt``, ``reward_model``)."""
    extra = row.get("extra_info") if isinstance(row.get("extra_info"), dict) else {}
    if row.get("question") is not None:
        question = _text(row["question"], "column 'question'")
    else:
        question = _search_r1_question(row.get("prompt"))
    if row.get("golden_answers") is not None:
        gold = _answers(row["golden_answers"], "column 'golden_answers'")
    else:
        target = ((row.get("reward_model") or {}).get("ground_truth") or {}).get("target")
        gold = _answers(target, "column 'reward_model.ground_truth.target' (or 'golden_answers')")
    return QARecord(question, gold, split=row.get("split") or extra.get("split"),
                    family=row.get("family") or extra.get("family"),
                    hops=row.get("hops") if row.get("hops") is not None else extra.get("hops"),
                    source=row.get("data_source"))


def _records(path: Path, fmt: str) -> Iterator[tuple[str, object, callable]]:
    """(where, raw record, parser) for every record of ``path`` in format ``fmt``."""
    if fmt == "parquet":
        import pyarrow.parquet as pq

        try:
            table = pq.read_table(path)
        except (pa.ArrowInvalid, OSError) as err:
            raise ValueError(f"{path}: expected a parquet file ({err})") from None
        for i, row in enumerate(table.to_pylist()):
            yield f"row {i}", row, _parquet_row
    elif fmt == "hotpot":
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as err:
            raise ValueError(f"{path}: expected a JSON list of HotpotQA objects ({err})") from None
        if not isinstance(data, list):
            raise ValueError(f"{path}: expected a JSON list of HotpotQA objects")
        for i, obj in enumerate(data):
            yield f"index {i}", obj, _hotpot
    else:
        parse = _kilt if fmt == "kilt" else _plain
        for where, obj in _jsonl(path):
            yield where, obj, parse


def detect_format(path: str | Path) -> str:
    """The QA format of ``path`` from its extension and, for JSON, its first record.

    Example:
        >>> detect_format("nq_test.parquet")
        'parquet'
    """
    path = Path(path)
    if path.suffix == ".parquet":
        return "parquet"
    with open(path, encoding="utf-8") as f:
        head = f.read(1 << 16).lstrip()
    if head.startswith("["):
        return "hotpot"
    first = head.split("\n", 1)[0]
    try:
        obj = json.loads(first)
    except json.JSONDecodeError:
        raise ValueError(f"{path}: cannot detect the QA format (expected parquet, a JSON list or "
                         "JSON lines); pass --format") from None
    if isinstance(obj, dict) and "input" in obj and "output" in obj:
        return "kilt"
    return "jsonl"


def import_qa(con: duckdb.DuckDBPyConnection, path: str | Path, name: str, split: str | None = None,
              fmt: str = "auto", replace: bool = False) -> dict:
    """Import a QA file as dataset ``name`` into ``questions`` (all or nothing).

    Refuses (ValueError) when ``name`` already has questions in an imported split, unless
    ``replace`` deletes those first.

    Example:
        >>> import_qa(store.connect(":memory:"), "hotpot_dev_distractor_v1.json", "hotpotqa", "dev")  # doctest: +SKIP
        {'dataset': 'hotpotqa', 'format': 'hotpot', 'questions': 7405, 'splits': {'dev': 7405}}
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no QA file at {path}")
    if fmt not in FORMATS:
        raise ValueError(f"unknown QA format {fmt!r}; expected one of {list(FORMATS)}")
    if not name or not name.strip():
        raise ValueError("expected a non-empty dataset --name")
    fmt = detect_format(path) if fmt == "auto" else fmt
    records: list[QARecord] = []
    for where, raw, parse in _records(path, fmt):
        if not isinstance(raw, dict):
            raise ValueError(f"{path} {where}: expected an object")
        try:
            rec = parse(raw)
            rec.split = split or (str(rec.split) if rec.split else DEFAULT_SPLIT)
            rec.family = None if rec.family in (None, "") else str(rec.family)
            if rec.hops is not None and (isinstance(rec.hops, bool) or not isinstance(rec.hops, int)):
                raise ValueError("expected 'hops' to be an integer")
        except ValueError as err:
            raise ValueError(f"{path} {_named(where, raw)}: {err}") from None
        records.append(rec)
    if not records:
        raise ValueError(f"{path}: no questions found")
    splits: dict[str, int] = {}
    for rec in records:
        splits[rec.split] = splits.get(rec.split, 0) + 1
    with store.transaction(con):
        clash = con.execute("SELECT split, count(*) FROM questions WHERE dataset = ? AND list_contains(?, split) "
                            "GROUP BY split ORDER BY split", [name, list(splits)]).fetchall()
        if clash and not replace:
            raise ValueError(f"dataset {name!r} already has questions in {dict(clash)}; "
                             "pass --replace to overwrite them")
        con.execute("DELETE FROM questions WHERE dataset = ? AND list_contains(?, split)", [name, list(splits)])
        start = store.next_id(con, "questions", "question_id")
        _wb_questions = pa.table({  # noqa: F841 (read by DuckDB's replacement scan)
            "question_id": pa.array(range(start, start + len(records)), pa.int64()),
            "dataset": pa.array([name] * len(records), pa.string()),
            "split": pa.array([r.split for r in records], pa.string()),
            "family": pa.array([r.family for r in records], pa.string()),
            "question": pa.array([r.question for r in records], pa.string()),
            "answers": pa.array([r.answers for r in records], pa.list_(pa.string())),
            "chain": pa.array([[] for _ in records], pa.list_(pa.int64())),
            "hops": pa.array([r.hops for r in records], pa.int32()),
            "source": pa.array([r.source or path.name for r in records], pa.string())})
        con.execute("INSERT INTO questions SELECT * FROM _wb_questions")
        import_id = store.next_id(con, "imports", "import_id")
        con.execute("INSERT INTO imports (import_id, kind, file, lines, skipped) VALUES (?, ?, ?, ?, 0)",
                    [import_id, f"qa:{fmt}", str(path), len(records)])
    return {"import_id": import_id, "dataset": name, "format": fmt, "questions": len(records),
            "splits": splits, "replaced": sum(n for _, n in clash)}
