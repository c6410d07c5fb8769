"""Importers of human QA datasets into the ``questions`` table (issue 3, Evaluation).

Formats (detected from the extension and the first record or header line, or named):
* ``parquet``: FlashRAG (``question``, ``golden_answers``) or Search-R1 (``prompt``,
  ``reward_model.ground_truth.target``, ``extra_info``, ``data_source``).
* ``kilt``: KILT task JSON lines (``id``, ``input``, ``output[].answer``).
* ``hotpot``: HotpotQA JSON (a list of objects with ``_id``, ``question``, ``answer``,
  ``supporting_facts``, ``context``); ``type`` (bridge / comparison) becomes the family; hops 2. It
  reads 2WikiMultihopQA's JSON too (the same fields plus ``evidences``; ``type`` comparison /
  inference / compositional / bridge_comparison), hops the number of ``evidences`` triples (4 for
  bridge_comparison, 2 for the others). The gold supporting documents (the titles of
  ``supporting_facts``, in order of first mention; 2Wiki's ``evidences`` are triples over entity
  names, not documents) become the question's ``chain``: each title resolved to the store's entity
  of that exact title, where the store has one (import the knowledge source first); the report
  counts ``support_titles`` and ``support_resolved``. DynaSearcher's r_recall reads them.
* ``triviaqa``: TriviaQA's original JSON (rc or unfiltered: ``{"Data": [{"Question", "QuestionId",
  "Answer": {"Value", "Aliases", ...}}], "Split": ...}``); answers are ``Value`` then ``Aliases``,
  duplicates dropped; the file's ``Split`` is the records' split.
* ``popqa``: PopQA's ``popQA.tsv`` (or the same columns comma-separated): ``question``,
  ``possible_answers`` (a JSON list in the cell), ``id``; ``prop`` (the relation) becomes the family.
* ``bamboogle``: Bamboogle's CSV (header ``Question``, ``Answer``; one answer per question).
* ``jsonl``: plain JSON lines (``question``, ``answers``), optional ``split``, ``family``.

Rows: ``dataset`` = the given name; ``split`` = the argument, else the record's own (Search-R1
``extra_info.split``, a ``split`` field), else 'test'; ``family`` from the data or NULL;
``answers`` the gold strings; ``chain`` empty (human QA has no gold entity chain), except the
gold supporting documents of HotpotQA / 2Wiki records (above); ``source``
the record's ``data_source`` or the file name. Every record is validated before anything is
written; a malformed one raises ValueError naming the file and the record (line, row or index,
and id where there is one), and the store is unchanged; with ``skip_bad`` it is recorded in
``skipped_lines`` instead. Malformed includes bytes that are not UTF-8, JSON nested deeper than
Python's recursion limit, text no store can hold (a lone surrogate), a non-string ``split``, a
PopQA or Bamboogle row with more or fewer cells than its header, and an id (``_id``, ``id``,
TriviaQA's ``QuestionId``) an earlier record of the file already had. A UTF-8 byte order mark at
the start of a file is dropped, as by every importer.

A dataset split that already has questions is refused unless ``replace`` (delete them first) or
``append`` (add to them) is given; so importing the same file twice never doubles it silently.

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

import csv
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import duckdb
import numpy as np
import pyarrow as pa

from workbench import store
from workbench.kg.input_files import COMPRESSED, MAX_JSON_BYTES, MAX_LINE_BYTES, Lines, Oversized, read_document
from workbench.kg.sources import TRUNCATED, check_input, fingerprint, json_value, record_import

FORMATS = ("auto", "parquet", "kilt", "hotpot", "triviaqa", "popqa", "bamboogle", "jsonl")
DEFAULT_SPLIT = "test"
POPQA_COLUMNS = ("question", "possible_answers")  # of popQA.tsv's header, the ones read
BAMBOOGLE_COLUMNS = ("Question", "Answer")


@dataclass
class QARecord:
    """One parsed question, before its dataset name and id are assigned."""

    question: str
    answers: list[str]
    split: str | None = None
    family: str | None = None
    hops: int | None = None
    source: str | None = None
    support: tuple[str, ...] = ()  # titles of the gold supporting documents (HotpotQA, 2Wiki), in order


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


def _label(value, what: str, numbers: bool = False) -> str | None:
    """An optional label (split, family): a string, None or "" (absent); a number only when ``numbers``."""
    if value is None or value == "":
        return None
    if isinstance(value, str) or (numbers and isinstance(value, int) and not isinstance(value, bool)):
        return str(value).strip() or None
    raise ValueError(f"expected {what} to be a string, got {value!r}")


def _ident(record):
    """The record's own id (``_id``, ``id`` or TriviaQA's ``QuestionId``), or None."""
    if isinstance(record, dict):  # a blank cell of a table's id column is no id
        return next((record[k] for k in ("_id", "id", "QuestionId") if record.get(k) not in (None, "")), None)
    return None


def _named(where: str, record) -> str:
    ident = _ident(record)
    return f"{where} (id {ident!r})" if ident is not None else where


# ------------------------------------------------------------------------------------ formats

class _Unreadable:
    """A record that could not be read at all (bytes that are not UTF-8, not JSON): why."""

    def __init__(self, why: str):
        self.why = why


def _jsonl(path: Path, max_line_bytes: int) -> Iterator[tuple[int, object]]:
    """(line number, the line's JSON value or an ``_Unreadable``) for every non-blank line."""
    with Lines(path, max_line_bytes) as lines:
        for lineno, raw in lines:
            if isinstance(raw, Oversized):
                yield lineno, _Unreadable(str(raw))
                continue
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as err:
                yield lineno, _Unreadable(f"expected UTF-8 text ({err.reason} at byte {err.start} of the line): "
                                          f"{TO_UTF8}")
                continue
            try:
                yield lineno, json_value(text)
            except ValueError as err:
                yield lineno, _Unreadable(f"expected a JSON object: {err}" + ("" if lines.ended else TRUNCATED))


TO_UTF8 = "convert the file to UTF-8 (a Latin-1 file: iconv -f LATIN1 -t UTF-8)"


def _plain(obj: dict) -> QARecord:
    """Plain JSON lines: ``question``, ``answers`` (also ``golden_answers`` / ``answer``)."""
    gold = next((obj[k] for k in ("answers", "golden_answers", "answer") if k in obj), None)
    return QARecord(_text(obj.get("question"), "field 'question'"),
                    _answers(gold, "field 'answers'"),
                    split=_label(obj.get("split"), "field 'split'"),
                    family=_label(obj.get("family"), "field 'family'", numbers=True), hops=obj.get("hops"))


def _kilt(obj: dict) -> QARecord:
    """KILT task line: ``input`` and the ``answer`` of each ``output`` entry that has one."""
    output = obj.get("output")
    if not isinstance(output, list):
        raise ValueError("expected field 'output' (a list of objects with 'answer')")
    gold = [o["answer"] for o in output if isinstance(o, dict) and o.get("answer") not in (None, "")]
    return QARecord(_text(obj.get("input"), "field 'input'"), _answers(gold, "field 'output[].answer'"))


def _hotpot(obj: dict) -> QARecord:
    """HotpotQA object; ``supporting_facts`` and ``context`` must be lists (``context`` is not
    imported; ``supporting_facts``' titles are the record's gold supporting documents). Hops: the
    number of 2WikiMultihopQA's ``evidences`` triples where the record has them (a bridge_comparison
    question has 4: two bridge facts and the two compared; the other types 2), else 2 (HotpotQA's
    questions are two-hop by construction)."""
    for key in ("supporting_facts", "context"):
        if not isinstance(obj.get(key), list):
            raise ValueError(f"expected field {key!r} (a list)")
    evidences = obj.get("evidences")
    if evidences is not None and not (isinstance(evidences, list) and all(
            isinstance(e, list) and len(e) == 3 for e in evidences)):
        raise ValueError("expected field 'evidences' (a list of [subject, relation, object] triples)")
    facts = obj["supporting_facts"]
    if not all(isinstance(f, list) and f and isinstance(f[0], str) and f[0].strip() for f in facts):
        raise ValueError("expected field 'supporting_facts' (a list of [title, sentence index] pairs)")
    return QARecord(_text(obj.get("question"), "field 'question'"), _answers(obj.get("answer"), "field 'answer'"),
                    family=_label(obj.get("type"), "field 'type'"), hops=len(evidences) if evidences else 2,
                    support=tuple(dict.fromkeys(f[0].strip() for f in facts)))


def _triviaqa(obj: dict, split: str | None = None) -> QARecord:
    """TriviaQA entry of ``Data``: ``Question``; answers ``Answer.Value`` then ``Answer.Aliases``, once each."""
    answer = obj.get("Answer")
    if not isinstance(answer, dict):
        raise ValueError("expected field 'Answer' (an object with 'Value' and 'Aliases'; TriviaQA's test files "
                         "have none)")
    aliases = answer.get("Aliases", [])
    if not isinstance(aliases, list):
        raise ValueError("expected field 'Answer.Aliases' (a list of strings)")
    gold = _answers([_text(answer.get("Value"), "field 'Answer.Value'"), *aliases], "field 'Answer.Aliases'")
    return QARecord(_text(obj.get("Question"), "field 'Question'"), list(dict.fromkeys(gold)), split=split)


def _popqa(row: dict) -> QARecord:
    """PopQA row: ``question``; ``possible_answers`` a JSON list in the cell; ``prop`` the family."""
    try:
        gold = json_value(row.get("possible_answers") or "")
    except ValueError as err:
        raise ValueError(f"expected column 'possible_answers' (a JSON list of answer strings): {err}") from None
    return QARecord(_text(row.get("question"), "column 'question'"), _answers(gold, "column 'possible_answers'"),
                    family=_label(row.get("prop"), "column 'prop'"))


def _bamboogle(row: dict) -> QARecord:
    """Bamboogle row: ``Question`` and its one ``Answer``."""
    return QARecord(_text(row.get("Question"), "column 'Question'"), [_text(row.get("Answer"), "column 'Answer'")])


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
    split = _label(row.get("split"), "column 'split'") or _label(extra.get("split"), "column 'extra_info.split'")
    family = _label(row.get("family"), "column 'family'", numbers=True) or \
        _label(extra.get("family"), "column 'extra_info.family'", numbers=True)
    return QARecord(question, gold, split=split, family=family,
                    hops=row.get("hops") if row.get("hops") is not None else extra.get("hops"),
                    source=_label(row.get("data_source"), "column 'data_source'"))


def _json_file(path: Path, expected: str, max_bytes: int):
    """The whole file's JSON value (decompressed, decoded; at most ``max_bytes``); errors name the
    file (and the line of bytes that are not UTF-8) and say what was ``expected``."""
    data = read_document(path, max_bytes)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        raise ValueError(f"{path} line {line}: expected UTF-8 text ({err.reason}): {TO_UTF8}") from None
    try:
        return json_value(text)
    except ValueError as err:
        raise ValueError(f"{path}: expected {expected}: {err}; is the file whole? (download or copy it "
                         "again)") from None


def _hotpot_list(path: Path, max_bytes: int) -> list:
    """The HotpotQA (or 2WikiMultihopQA) file's JSON list."""
    expected = "a JSON list of HotpotQA objects"
    value = _json_file(path, expected, max_bytes)
    if not isinstance(value, list):
        raise ValueError(f"{path}: expected {expected}")
    return value


def _triviaqa_data(path: Path, max_bytes: int) -> tuple[list, str | None]:
    """The TriviaQA file's ``Data`` list and its ``Split``."""
    expected = "a TriviaQA JSON object with 'Data' (a list of questions)"
    value = _json_file(path, expected, max_bytes)
    if not isinstance(value, dict) or not isinstance(value.get("Data"), list):
        raise ValueError(f"{path}: expected {expected}")
    try:
        return value["Data"], _label(value.get("Split"), "field 'Split'")
    except ValueError as err:
        raise ValueError(f"{path}: {err}") from None


_NOT_UTF8 = re.compile("[\udc80-\udcff]")  # what surrogateescape makes of bytes that are not UTF-8


def _header(first: str, path: Path) -> tuple[str, str, list[str]]:
    """(delimiter, its name, the columns) of ``path``'s header line ``first``: tabs when it has one, else
    commas; ValueError naming the file's line 1 for one the csv reader cannot read (a lone carriage return)."""
    delimiter, kind = ("\t", "tab") if "\t" in first else (",", "comma")
    try:
        return delimiter, kind, next(csv.reader([first], delimiter=delimiter), [])
    except csv.Error as err:
        raise ValueError(f"{path} line 1: expected a {kind}-separated header line ({err})") from None


def _table(path: Path, required: tuple[str, ...], what: str, max_line_bytes: int) -> Iterator[tuple[int, object]]:
    """(line number, the row as {header column: cell} or an ``_Unreadable``) for every non-blank row
    of a tab- or comma-separated file (tabs when the header line has one) whose header has ``required``.
    An oversized line reaches the csv reader empty; the row it is part of is told as unreadable."""
    oversized: dict[int, Oversized] = {}
    with Lines(path, max_line_bytes, skip_blank=False) as lines:
        def texts():
            for lineno, raw in lines:
                if isinstance(raw, Oversized):
                    oversized[lineno], raw = raw, b""
                yield raw.decode("utf-8", "surrogateescape") + "\n"

        source = texts()
        delimiter, kind, header = _header(next(source, "").rstrip("\n"), path)
        if 1 in oversized:
            raise ValueError(f"{path} line 1: {oversized[1]}")
        if any(c not in header for c in required):
            raise ValueError(f"{path} line 1: expected a {what} header with columns {list(required)}, got {header}")
        rows = csv.reader(source, delimiter=delimiter)
        end = 1  # the last line read
        while True:
            try:
                row = next(rows)
            except StopIteration:
                return
            except csv.Error as err:
                yield end + 1, _Unreadable(f"expected {kind}-separated values ({err})")
                end = rows.line_num + 1
                continue
            start, end = end + 1, rows.line_num + 1
            too_long = next((oversized[n] for n in range(start, end + 1) if n in oversized), None)
            if too_long is not None:
                yield start, _Unreadable(str(too_long))
            elif not any(cell.strip() for cell in row):
                continue
            elif _NOT_UTF8.search("".join(row)):
                yield start, _Unreadable(f"expected UTF-8 text: {TO_UTF8}")
            elif len(row) != len(header):
                yield start, _Unreadable(f"expected {len(header)} {kind}-separated columns (the header's), "
                                         f"got {len(row)}")
            else:
                yield start, dict(zip(header, row))


def _records(path: Path, fmt: str, max_line_bytes: int = MAX_LINE_BYTES, max_json_bytes: int = MAX_JSON_BYTES
             ) -> Iterator[tuple[str, int, object, callable]]:
    """(what a record is called, its number, the raw record, its parser) for every record of
    ``path`` in format ``fmt``: ('line', 3, {...}, _plain)."""
    if fmt == "parquet":
        import pyarrow.parquet as pq

        try:
            table = pq.read_table(path)
        except (pa.ArrowInvalid, OSError) as err:
            raise ValueError(f"{path}: expected a parquet file ({err}); is the file whole? (download or copy it "
                             "again)") from None
        for i, row in enumerate(table.to_pylist()):
            yield "row", i, row, _parquet_row
    elif fmt == "hotpot":
        for i, obj in enumerate(_hotpot_list(path, max_json_bytes)):
            yield "index", i, obj, _hotpot
    elif fmt == "triviaqa":
        data, split = _triviaqa_data(path, max_json_bytes)

        def parse(obj: dict) -> QARecord:
            return _triviaqa(obj, split)

        for i, obj in enumerate(data):
            yield "index", i, obj, parse
    elif fmt == "popqa":
        for lineno, row in _table(path, POPQA_COLUMNS, "PopQA", max_line_bytes):
            yield "line", lineno, row, _popqa
    elif fmt == "bamboogle":
        for lineno, row in _table(path, BAMBOOGLE_COLUMNS, "Bamboogle", max_line_bytes):
            yield "line", lineno, row, _bamboogle
    else:
        parse = _kilt if fmt == "kilt" else _plain
        for lineno, obj in _jsonl(path, max_line_bytes):
            yield "line", lineno, obj, parse


def detect_format(path: str | Path) -> str:
    """The QA format of ``path`` from its extension and its start: a JSON list (HotpotQA, 2Wiki),
    an object with ``Data`` (TriviaQA), JSON lines (KILT when the first has ``input`` and
    ``output``), else a header line (PopQA, Bamboogle).

    Example:
        >>> detect_format("nq_test.parquet")
        'parquet'
    """
    path = Path(path)
    if (path.with_suffix("") if path.suffix in COMPRESSED else path).suffix == ".parquet":
        return "parquet"
    start = []
    with Lines(path, skip_blank=False) as lines:  # the first 64 KiB of lines (a read's fault names its line)
        for _, line in lines:
            start.append(b"" if isinstance(line, Oversized) else line)
            if sum(map(len, start)) >= 1 << 16:
                break
    # detection only: undecodable bytes are reported, with their line, when the records are read
    head = b"\n".join(start).decode("utf-8", errors="replace").lstrip()
    if head.startswith("["):
        return "hotpot"
    first = head.split("\n", 1)[0]
    try:
        obj = json_value(first)
    except ValueError:
        obj = None  # not one JSON line: a JSON object over several lines, or a header line
    if (isinstance(obj, dict) and "Data" in obj) or (obj is None and re.search(r'"Data"\s*:\s*\[', head)):
        return "triviaqa"
    if isinstance(obj, dict) and "input" in obj and "output" in obj:
        return "kilt"
    if obj is not None:
        return "jsonl"
    try:
        _, _, header = _header(first, path)
    except ValueError:
        header = []  # no header line the csv reader can read: no table format either
    if all(c in header for c in POPQA_COLUMNS):
        return "popqa"
    if all(c in header for c in BAMBOOGLE_COLUMNS):
        return "bamboogle"
    raise ValueError(f"{path}: cannot detect the QA format (expected parquet, a JSON list, a TriviaQA JSON "
                     "object, JSON lines, or a PopQA or Bamboogle header line); pass --format")


def import_qa(con: duckdb.DuckDBPyConnection, path: str | Path, name: str, split: str | None = None,
              fmt: str = "auto", replace: bool = False, append: bool = False, skip_bad: bool = False,
              max_line_bytes: int = MAX_LINE_BYTES, max_json_bytes: int = MAX_JSON_BYTES) -> dict:
    """Import a QA file as dataset ``name`` into ``questions`` (all or nothing).

    Refuses (ValueError) when ``name`` already has questions in an imported split, unless
    ``replace`` deletes those first or ``append`` adds to them. A malformed record raises
    ValueError naming file and record, or with ``skip_bad`` is recorded in ``skipped_lines``. A line
    longer than ``max_line_bytes`` is a malformed record; a whole-file JSON longer than
    ``max_json_bytes`` (:data:`MAX_JSON_BYTES`, ours) is refused before it is parsed.

    Example:
        >>> import_qa(store.connect(":memory:"), "hotpot_dev_distractor_v1.json", "hotpotqa", "dev")  # doctest: +SKIP
        {'dataset': 'hotpotqa', 'format': 'hotpot', 'questions': 7405, 'splits': {'dev': 7405}}
    """
    path = check_input(path, "QA file")
    if fmt not in FORMATS:
        raise ValueError(f"unknown QA format {fmt!r}; expected one of {list(FORMATS)}")
    if not name or not name.strip():
        raise ValueError("expected a non-empty dataset --name")
    if replace and append:
        raise ValueError("--replace and --append: choose one (overwrite the dataset's splits, or add to them)")
    if split is not None and not split.strip():
        raise ValueError("--split: expected a non-empty split name")
    fmt = detect_format(path) if fmt == "auto" else fmt
    records, skipped = _parse_all(path, fmt, split, skip_bad, max_line_bytes, max_json_bytes)
    if not records:
        raise ValueError(f"{path}: no questions found" + (f" ({len(skipped)} malformed, skipped)" if skipped else ""))
    splits: dict[str, int] = {}
    for rec in records:
        splits[rec.split] = splits.get(rec.split, 0) + 1
    with store.transaction(con):
        clash = con.execute("SELECT split, count(*) FROM questions WHERE dataset = ? AND list_contains(?, split) "
                            "GROUP BY split ORDER BY split", [name, list(splits)]).fetchall()
        if clash and not (replace or append):
            raise ValueError(f"dataset {name!r} already has questions in {dict(clash)}; "
                             "pass --replace to overwrite them or --append to add to them")
        if replace:
            con.execute("DELETE FROM questions WHERE dataset = ? AND list_contains(?, split)", [name, list(splits)])
        start = store.next_id(con, "questions", "question_id")
        chains, resolved = _support_chains(con, records)
        _wb_questions = pa.table({  # noqa: F841 (read by DuckDB's replacement scan)
            "question_id": pa.array(range(start, start + len(records)), pa.int64()),
            "dataset": pa.array([name] * len(records), pa.string()),
            "split": pa.array([r.split for r in records], pa.string()),
            "family": pa.array([r.family for r in records], pa.string()),
            "question": pa.array([r.question for r in records], pa.string()),
            "answers": pa.array([r.answers for r in records], pa.list_(pa.string())),
            "chain": pa.array(chains, pa.list_(pa.int64())),
            "hops": pa.array([r.hops for r in records], pa.int32()),
            "source": pa.array([r.source or path.name for r in records], pa.string())})
        con.execute("INSERT INTO questions SELECT * FROM _wb_questions")
        import_id = store.next_id(con, "imports", "import_id")
        report = {"questions": len(records), "splits": splits,
                  "replaced": sum(n for _, n in clash) if replace else 0,
                  "appended_to": sum(n for _, n in clash) if append else 0}
        if any(r.support for r in records):
            report.update(support_titles=sum(len(r.support) for r in records), support_resolved=resolved)
        record_import(con, import_id, f"qa:{fmt}", path, len(records) + len(skipped), len(skipped),
                      fingerprint(path), report)
        if skipped:
            con.executemany("INSERT INTO skipped_lines VALUES (?, ?, ?, ?)",
                            [[import_id, str(path), number, error] for number, error in skipped])
    return {"import_id": import_id, "dataset": name, "format": fmt, **report, "skipped": len(skipped)}


def _support_chains(con, records: list[QARecord]) -> tuple[list[list[int]], int]:
    """Each record's gold supporting documents as entity ids (its ``support`` titles resolved to
    the store's entities of that exact title, the lowest id where several share one; unresolved
    titles left out), and how many titles resolved.

    Example:
        >>> con = store.connect(":memory:")
        >>> _ = con.execute("INSERT INTO entities (entity_id, title) VALUES (7, 'Alba'), (9, 'Zed')")
        >>> _support_chains(con, [QARecord("q?", ["a"], support=("Zed", "Nowhere", "Alba")), QARecord("q?", ["a"])])
        ([[9, 7], []], 2)
    """
    rows = [(i, j, t) for i, r in enumerate(records) for j, t in enumerate(r.support)]
    chains: list[list[int]] = [[] for _ in records]
    if not rows:
        return chains, 0
    wanted = pa.table({"i": [r[0] for r in rows], "j": [r[1] for r in rows], "title": [r[2] for r in rows]})
    with store.registered(con, "_wb_support", wanted):
        found = con.execute("SELECT w.i, w.j, min(e.entity_id) FROM _wb_support w JOIN entities e ON e.title = w.title "
                            "GROUP BY w.i, w.j ORDER BY w.i, w.j").fetchall()
    for i, _, entity in found:
        chains[i].append(int(entity))
    return chains, len(found)


def _parse_all(path: Path, fmt: str, split: str | None, skip_bad: bool, max_line_bytes: int = MAX_LINE_BYTES,
               max_json_bytes: int = MAX_JSON_BYTES) -> tuple[list[QARecord], list[tuple]]:
    """Every record of the file parsed, and the skipped ones as (number, error); a malformed record
    raises ValueError naming file and record unless ``skip_bad``."""
    records: list[QARecord] = []
    skipped: list[tuple[int, str]] = []
    first_at: dict[str, str] = {}  # record id -> where it was first seen
    for word, number, raw, parse in _records(path, fmt, max_line_bytes, max_json_bytes):
        where = _named(f"{word} {number}", raw)
        try:
            if isinstance(raw, _Unreadable):
                raise ValueError(raw.why)
            if not isinstance(raw, dict):
                raise ValueError("expected a JSON object")
            ident = _ident(raw)
            if ident is not None:
                key = json.dumps(ident)  # ids may be numbers or strings: 1 and "1" stay apart
                if key in first_at:
                    raise ValueError(f"duplicate id (first at {first_at[key]})")
                first_at[key] = f"{word} {number}"
            rec = parse(raw)
            rec.split = split or rec.split or DEFAULT_SPLIT
            if rec.hops is not None and (isinstance(rec.hops, bool) or not isinstance(rec.hops, int)
                                         or not -2**31 <= rec.hops < 2**31):
                raise ValueError("expected 'hops' to be an integer")
        except ValueError as err:
            if not skip_bad:
                todo = "" if "--skip-bad" in str(err) else "; pass --skip-bad to skip such records"
                raise ValueError(f"{path} {where}: {err}{todo}") from None
            skipped.append((number, f"{word} {number}: {err}"))
            continue
        records.append(rec)
    return records, skipped


SEED_POOL_NAME = "nq_hotpotqa"  # the paper presets' method.seed_dataset and val_dataset
SEED_POOL_VAL = 500  # ours: validation questions drawn from each source (the paper gives no number)


def build_seed_pool(con: duckdb.DuckDBPyConnection, sources: list[str] | tuple[str, ...] = ("nq", "hotpotqa"),
                    name: str = SEED_POOL_NAME, source_split: str = "train", val: int = SEED_POOL_VAL,
                    seed: int = 0, replace: bool = False) -> dict:
    """Dataset ``name``'s splits 'seed' (the seed pool Q_0) and 'val' (validation) from the imported
    ``source_split`` questions of ``sources`` (section 4.1: NQ + HotpotQA training sets).

    Each source (each ``data_source`` within one imported file, as Search-R1's combined
    ``nq_hotpotqa_train``) is shuffled by ``seed``; its first ``val`` questions go to 'val', the
    rest to 'seed'; new question ids follow the shuffled order, so ``load_questions``' "first per
    family" limit reads a random sample. ``family`` is the source's (HotpotQA's bridge/comparison),
    else its dataset name. All in one transaction; an existing seed/val of ``name`` is refused
    unless ``replace``. The ``imports`` row records the sources, the settings and a digest of the
    chosen question ids.

    Example:
        >>> from workbench import store
        >>> con = store.connect(":memory:")
        >>> for i in range(6):
        ...     _ = con.execute("INSERT INTO questions VALUES (?, 'nq', 'train', NULL, ?, ['a'], [], NULL, 'nq.jsonl')",
        ...                     [i, f"q{i}"])
        >>> r = build_seed_pool(con, ["nq"], val=2)
        >>> r["splits"], r["per_source"]
        ({'seed': 4, 'val': 2}, {'nq': {'seed': 4, 'val': 2}})
    """
    import hashlib

    sources = list(dict.fromkeys(sources))
    if not sources or not all(isinstance(s, str) and s.strip() for s in sources):
        raise ValueError(f"--from: expected one or more imported QA dataset names, got {sources!r}")
    if not name or not name.strip() or name in sources:
        raise ValueError(f"--name {name!r}: expected a new dataset name, not empty and not one of --from")
    if isinstance(val, bool) or not isinstance(val, int) or val < 1:
        raise ValueError(f"--val {val!r}: expected a positive number of validation questions per source")
    with store.transaction(con):
        rows = con.execute(
            "SELECT question_id, dataset, family, question, answers, chain, hops, source FROM questions "
            "WHERE list_contains(?, dataset) AND split = ? ORDER BY question_id", [sources, source_split]).fetchall()
        found = {r[1] for r in rows}
        if missing := [s for s in sources if s not in found]:
            known = con.execute("SELECT DISTINCT dataset || '/' || split FROM questions ORDER BY 1").fetchall()
            raise ValueError(f"--from {missing}: no questions in split {source_split!r} (import them first: "
                             f"workbench import qa FILE --name NAME --split {source_split}); "
                             f"the store has {[k for (k,) in known]}")
        strata = _strata(rows)
        existing = con.execute("SELECT split, count(*) FROM questions WHERE dataset = ? AND split IN ('seed', 'val') "
                               "GROUP BY split ORDER BY split", [name]).fetchall()
        if existing and not replace:
            raise ValueError(f"dataset {name!r} already has {dict(existing)}; pass --replace to rebuild its "
                             "seed and val splits")
        chosen, per_source = _split_strata(strata, val, seed, source_split)
        if replace:
            con.execute("DELETE FROM questions WHERE dataset = ? AND split IN ('seed', 'val')", [name])
        start = store.next_id(con, "questions", "question_id")
        picked = [(split, stratum, r) for split in ("val", "seed") for stratum, r in chosen[split]]
        _wb_pool = pa.table({  # noqa: F841 (read by DuckDB's replacement scan)
            "question_id": pa.array(range(start, start + len(picked)), pa.int64()),
            "dataset": pa.array([name] * len(picked), pa.string()),
            "split": pa.array([split for split, _, _ in picked], pa.string()),
            # HotpotQA's bridge/comparison, else the source's name (nq, or a combined file's data_source)
            "family": pa.array([r[2] or stratum.rpartition(":")[2] for _, stratum, r in picked], pa.string()),
            "question": pa.array([r[3] for _, _, r in picked], pa.string()),
            "answers": pa.array([r[4] for _, _, r in picked], pa.list_(pa.string())),
            "chain": pa.array([r[5] for _, _, r in picked], pa.list_(pa.int64())),
            "hops": pa.array([r[6] for _, _, r in picked], pa.int32()),
            "source": pa.array([r[7] for _, _, r in picked], pa.string())})
        con.execute("INSERT INTO questions SELECT * FROM _wb_pool")
        digest = hashlib.sha256(json.dumps({s: [r[0] for _, r in chosen[s]] for s in chosen}).encode()).hexdigest()
        report = {"dataset": name, "from": sources, "source_split": source_split, "val_per_source": val,
                  "seed": seed, "splits": {"seed": len(chosen["seed"]), "val": len(chosen["val"])},
                  "per_source": per_source, "replaced": sum(n for _, n in existing) if replace else 0}
        import_id = store.next_id(con, "imports", "import_id")
        record_import(con, import_id, "qa:seed-pool", "+".join(f"{s}/{source_split}" for s in sources), len(rows), 0,
                      f"sha256:{digest}", report)
    return {"import_id": import_id, **report}


def _strata(rows: list[tuple]) -> dict[str, list[tuple]]:
    """The seed pool's sources: a dataset, or each ``source`` of a dataset that has several (the
    ``data_source`` of each row of Search-R1's combined ``nq_hotpotqa_train``), e.g. ``nq_hotpotqa_train:nq``."""
    origins: dict[str, set] = {}
    for r in rows:
        origins.setdefault(r[1], set()).add(r[7])
    strata: dict[str, list[tuple]] = {}
    for r in rows:
        strata.setdefault(r[1] if len(origins[r[1]]) == 1 else f"{r[1]}:{r[7]}", []).append(r)
    return strata


def _split_strata(strata: dict[str, list[tuple]], val: int, seed: int, source_split: str) -> tuple[dict, dict]:
    """Each stratum shuffled by ``seed`` (and its name, so adding a source leaves the others' draws
    unchanged): the first ``val`` to 'val', the rest to 'seed', as (stratum, row); and the counts
    per stratum."""
    import zlib

    chosen: dict[str, list] = {"val": [], "seed": []}
    per_source = {}
    for stratum, part in sorted(strata.items()):
        if len(part) <= val:
            raise ValueError(f"--val {val}: source {stratum!r} has only {len(part)} {source_split} questions; "
                             "expected more than --val, so the seed pool gets some")
        order = np.random.default_rng([seed, zlib.crc32(stratum.encode())]).permutation(len(part))
        chosen["val"] += [(stratum, part[i]) for i in order[:val]]
        chosen["seed"] += [(stratum, part[i]) for i in order[val:]]
        per_source[stratum] = {"seed": len(part) - val, "val": val}
    return chosen, per_source
