"""Importers of real knowledge sources into the store, with the same schema as TinyWorld.

* KILT knowledge source (JSON lines: ``wikipedia_id``, ``wikipedia_title``, ``text`` = list of
  paragraphs, ``anchors``): one entity per page, one passage per paragraph, every anchor kept
  exactly as KILT records it, and the labelled hyperlink graph (``edges``) the walker traverses.
* wiki-18 (JSON lines: ``id``, ``contents`` = ``"Title"\\ntext``): passages, entities by title.
* Wikidata5M (tab-separated ``head relation tail`` ids, alias files ``id alias1 alias2 ...``):
  ``triples`` and ``aliases``. Every line ends with a line end: a tab-separated line cut short can
  still parse, so a last line without one is a bad line (the file may be cut short).

Every import streams: lines are read one at a time and inserted in Arrow batches, so Python's
memory does not grow with the file (the real KILT file is 35 GB). Title -> id resolution of
KILT anchors happens once at the end, in SQL over staged temp tables, not in a Python dict.
The whole import is one transaction: a malformed line raises ValueError naming the file, the
line and what was expected, and the store is unchanged; with ``skip_bad=True`` the line is
recorded in ``skipped_lines`` instead. Malformed includes: not JSON (or not the tab-separated
fields), text no store can hold (a lone UTF-16 surrogate), nesting deeper than Python's recursion
limit, in KILT a page id or title already seen earlier in the file, and a line longer than
``max_line_bytes`` (:data:`input_files.MAX_LINE_BYTES`, ours), which is refused before it is read
whole. Files are read by :class:`input_files.Lines`: ``.gz``, ``.bz2`` and ``.xz`` decompressed,
UTF-16/32 decoded, a byte order mark dropped, ``\\r\\n`` line ends read as ``\\n``. A truncated or
corrupt compressed file and an empty file are errors naming the file (and line).

Each import writes one row to ``imports`` with the :func:`fingerprint` of its file(s), the digest
of their content (decompressed, decoded, line ends normalised) and the rows it inserted (the
returned counts count rows inserted, not rows read). A file or a content already recorded there
is refused (:class:`AlreadyImported`, the store unchanged) unless ``append=True`` imports it again:
a re-run after a kill, when one cannot tell whether the import landed, cannot double it, nor can
the same source as ``.gz`` or with CRLF line ends. Content, not row keys, identifies a source:
the store keeps no source keys for passages (KILT page ids, wiki-18 passage ids), and titles are
shared on purpose across sources (KILT and wiki-18 passages of one entity).

Entity matching (our choice): a page or alias whose title equals an existing entity's title
reuses that entity (the smallest id), so importing Wikidata5M and then KILT links Wikidata ids
to KILT pages. The Wikidata id itself is stored as one of the entity's aliases ("Q42"), which is
how ``triples`` (ids) join to entities. Import Wikidata5M first if its relations should label
KILT edges (rule 1 of :func:`relation_label`).

Example:
    >>> import json, os, tempfile
    >>> from workbench import store
    >>> d = tempfile.mkdtemp()
    >>> f = os.path.join(d, "kilt.jsonl")
    >>> page = {"wikipedia_id": "1", "wikipedia_title": "Alba", "text": ["Alba", "Alba was directed by Bo."],
    ...         "anchors": [{"paragraph_id": 1, "start": 21, "end": 23, "text": "Bo", "href": "Bo"}]}
    >>> bo = {"wikipedia_id": "2", "wikipedia_title": "Bo", "text": ["Bo", "Bo is a director."], "anchors": []}
    >>> _ = open(f, "w").write(json.dumps(page) + "\\n" + json.dumps(bo) + "\\n")
    >>> con = store.connect(os.path.join(d, "s.duckdb"))
    >>> import_kilt(con, f, progress=False)["edges"]
    1
    >>> con.execute("SELECT relation FROM edges").fetchall()
    [('directed by',)]
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import sys
import time
from pathlib import Path
from typing import Iterator
from urllib.parse import unquote

import duckdb
import numpy as np
import pyarrow as pa

from workbench import store
from workbench.kg.filters import classify_title
from workbench.kg.input_files import MAX_LINE_BYTES, Lines, Oversized, content_digest, content_head

GENERIC_LABEL = "links to"

# Relation cue phrases (ours, documented): the label of an anchor whose sentence reads "... <cue>
# [anchor]". The value says whether the relation is functional (one target per source), which the
# Dr. Free whitelist filter reads from ``relations.functional``.
RELATION_CUES: dict[str, bool] = {
    "directed by": True,
    "written by": True,
    "produced by": False,
    "composed by": True,
    "performed by": False,
    "published by": True,
    "developed by": False,
    "designed by": False,
    "founded by": False,
    "owned by": True,
    "born in": True,
    "died in": True,
    "located in": True,
    "headquartered in": True,
    "capital of": True,
    "educated at": False,
    "member of": False,
    "part of": True,
    "flows through": False,
    "named after": True,
    "son of": False,
    "daughter of": False,
    "married to": False,
}
MAX_GAP_WORDS = 3  # ours: at most this many words between a cue and the anchor it labels

# The cue nearest to the anchor wins: the greedy ``.*`` pushes the match to the last cue.
_CUE_RE = re.compile(
    r".*\b(" + "|".join(re.escape(c) for c in sorted(RELATION_CUES, key=len, reverse=True)) + r")\b"
    r"(?:\W+\w+){0,%d}\W*$" % MAX_GAP_WORDS, re.IGNORECASE | re.DOTALL)


def title_kind(title: str) -> str:
    """The noise kind a page title signals: 'year', 'list', 'short', 'nationality' or 'entity'.

    The patterns and the nationality adjective list are the chain filters' own
    (:func:`workbench.kg.filters.classify_title`), so import and filtering agree.

    Example:
        >>> [title_kind(t) for t in ["1987", "List of rivers of Peru", "Ox", "French", "Lima"]]
        ['year', 'list', 'short', 'nationality', 'entity']
    """
    return classify_title(title) or "entity"


def relation_label(sentence_before_anchor: str, wikidata: str | None = None) -> str:
    """The relation label of a real (KILT) anchor: the workbench's documented choice.

    In this order: (1) ``wikidata``, the relation of a Wikidata triple (source page, r, target
    page) when the store holds triples and aliases linking the two pages; (2) the cue phrase of
    :data:`RELATION_CUES` nearest to the anchor in the text of its sentence before it, at most
    :data:`MAX_GAP_WORDS` words away; (3) the generic :data:`GENERIC_LABEL`. At import time rule
    (1) is applied in SQL once every page is known (``import_kilt``), overriding (2)-(3).

    Example:
        >>> relation_label("The film was directed by ")
        'directed by'
        >>> relation_label("Born in 1950, she was educated at the ")
        'educated at'
        >>> relation_label("It was directed by Ann Lee and ")
        'directed by'
        >>> relation_label("It was directed by Ann Lee, and later shown in ")
        'links to'
        >>> relation_label("The film was directed by ", wikidata="director")
        'director'
    """
    if wikidata:
        return wikidata
    match = _CUE_RE.match(sentence_before_anchor)
    return match.group(1).lower() if match else GENERIC_LABEL


def _sentence_before(paragraph: str, start: int) -> str:
    """The text of the anchor's sentence before the anchor (from the last '. ', '! ', '? ')."""
    cut = max(paragraph.rfind(". ", 0, start), paragraph.rfind("! ", 0, start), paragraph.rfind("? ", 0, start))
    return paragraph[cut + 2 if cut >= 0 else 0:start]


def href_title(href: str) -> str:
    """The page title a Wikipedia href points at (URL-decoded, '_' -> ' ', first letter upper).

    Example:
        >>> href_title("Douglas_Adams%27s#Life")
        "Douglas Adams's"
    """
    if "#" in href:
        href = href.split("#", 1)[0]
    title = (unquote(href) if "%" in href else href).replace("_", " ").strip()
    return title[:1].upper() + title[1:]


class _Bad(Exception):
    """A malformed line; the message says what was expected."""


def record_import(con, import_id: int, kind: str, file, lines: int, skipped: int, fingerprint: str,
                  inserted: dict, content: str | None = None, content_head: str | None = None) -> None:
    """The ``imports`` row of one import: what it read, skipped and inserted, its file's
    fingerprint and its content's digest and head (a second import of either is refused by them)."""
    con.execute("INSERT INTO imports (import_id, kind, file, lines, skipped, fingerprint, inserted, content, "
                "content_head) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [import_id, kind, str(file), lines, skipped, fingerprint, json.dumps(inserted), content, content_head])
SAMPLE_BYTES = 1 << 20  # fingerprint: the first and last MiB of a file, with its size

# Ours, chosen by measurement (LOG.md 2026-12-01; scripts/kilt_scale.py, scripts/duckdb_pk_probe.py):
# under DuckDB's own default (80% of RAM) the buffer pool grows with the file, 3.6 MB of peak RSS
# per 1k KILT pages (~22 GB at the real dump's 5.9M pages); under a limit it stays bounded and
# DuckDB spills to disk. The floor is the passages' primary-key index, which must fit in memory
# when the import's one transaction commits: 30M keys commit under 512MB (not 256MB), 75M under
# 2GB (not 1GB), and the real dump has ~69M paragraphs. 4GB leaves room for wiki-18's 21M more.
# None keeps DuckDB's default.
IMPORT_MEMORY_LIMIT = "4GB"


@contextlib.contextmanager
def memory_limited(con: duckdb.DuckDBPyConnection, limit: str | None) -> Iterator[None]:
    """DuckDB's ``memory_limit`` at ``limit`` (e.g. '1GB') for the block, the previous one after it
    (DuckDB's default exactly, another as DuckDB prints it); ``None`` leaves the limit alone.

    Example:
        >>> con = store.connect(":memory:")
        >>> with memory_limited(con, "256MB"):
        ...     con.execute("SELECT current_setting('memory_limit')").fetchone()[0]
        '244.1 MiB'
    """
    if limit is None:
        yield
        return
    (before,) = con.execute("SELECT current_setting('memory_limit')").fetchone()
    try:
        con.execute("SET memory_limit = ?", [limit])
    except duckdb.Error:
        raise ValueError(f"memory_limit {limit!r}: expected a size such as 512MB or 8GB") from None
    try:
        yield
    finally:
        with contextlib.suppress(duckdb.Error):  # an aborted enclosing transaction refuses it; the cause propagates
            con.execute("RESET memory_limit")  # exact when it was DuckDB's default (a printed size rounds)
            if con.execute("SELECT current_setting('memory_limit')").fetchone()[0] != before:
                con.execute("SET memory_limit = ?", [before])


def check_input(path: str | Path, what: str) -> Path:
    """``path`` as a Path when it is a readable file, else an error naming it and ``what`` was expected.

    Example:
        >>> check_input("/", "KILT file")
        Traceback (most recent call last):
        ...
        ValueError: /: is a directory; expected a KILT file
    """
    path = Path(path)
    if path.is_dir():
        raise ValueError(f"{path}: is a directory; expected a {what}")
    if not path.is_file():
        raise FileNotFoundError(f"no {what} at {path}")
    return path


def fingerprint(*paths: str | Path | None) -> str:
    """What identifies the file(s) of one import: a hash of each file's size and of its first and
    last MiB (the whole file when smaller); ``None`` (an optional file not given) counts too.

    Reading 2 MiB instead of a 35 GB file keeps the check instant; two different files agree only
    when they have the same size and the same first and last MiB.

    Example:
        >>> import os, tempfile
        >>> f = os.path.join(tempfile.mkdtemp(), "a.txt")
        >>> _ = open(f, "w").write("Q1\\tP1\\tQ2\\n")
        >>> fingerprint(f) == fingerprint(f) != fingerprint(f, None)
        True
    """
    h = hashlib.sha256()
    for path in paths:
        if path is None:
            h.update(b"-\0")
            continue
        size = Path(path).stat().st_size
        h.update(f"{size}\0".encode())
        with open(path, "rb") as f:
            h.update(f.read(2 * SAMPLE_BYTES) if size <= 2 * SAMPLE_BYTES else f.read(SAMPLE_BYTES))
            if size > 2 * SAMPLE_BYTES:
                f.seek(size - SAMPLE_BYTES)
                h.update(f.read(SAMPLE_BYTES))
    return h.hexdigest()


class AlreadyImported(ValueError):
    """An import refused because this store holds its file or content already (``import_id``: that import)."""

    def __init__(self, message: str, import_id: int):
        super().__init__(message)
        self.import_id = import_id


def refuse_repeat(con: duckdb.DuckDBPyConnection, kind: str, digest: str, shown: Path,
                  column: str = "fingerprint") -> None:
    """:class:`AlreadyImported` when an import of ``kind`` whose ``column`` ('fingerprint', or 'content':
    the content's digest) is ``digest`` is recorded in ``imports``.

    Example:
        >>> refuse_repeat(store.connect(":memory:"), "kilt", "0" * 64, Path("kilt.jsonl"))  # nothing recorded
    """
    assert column in ("fingerprint", "content")
    found = con.execute("SELECT import_id, file, strftime(created_at, '%Y-%m-%d %H:%M:%S'), lines FROM imports "
                        f"WHERE kind = ? AND {column} = ? ORDER BY import_id LIMIT 1", [kind, digest]).fetchall()
    if found:
        import_id, file, when, lines = found[0]
        how = "" if column == "fingerprint" else \
            " with the same content (compared after decompression, decoding and line-end normalisation)"
        raise AlreadyImported(f"{shown}: already in this store (import {import_id} of {file} at {when}, {lines} "
                              f"lines){how}; importing it again would add its rows a second time: pass --append "
                              "to do that anyway", import_id)


def _combined(digests: list[str | None]) -> str:
    """One digest for the files of an import, in their order (``None``: an optional file not given)."""
    if len(digests) == 1 and digests[0] is not None:
        return digests[0]
    return hashlib.sha256("\0".join(d or "-" for d in digests).encode()).hexdigest()


def same_content(con: duckdb.DuckDBPyConnection, kind: str, files: tuple[Path | None, ...],
                 max_line_bytes: int = MAX_LINE_BYTES) -> tuple[int, str] | None:
    """(import id, content digest) of the first import of ``kind`` recorded with the content of
    ``files`` (:class:`input_files.Lines`' digest, combined in order), else None. The heads are
    compared first (the files' first MiB); the whole content is hashed only when one matches.

    Example:
        >>> same_content(store.connect(":memory:"), "kilt", (Path("/dev/null"),)) is None
        True
    """
    head = _combined([f and content_head(f, max_line_bytes) for f in files])
    alike = con.execute("SELECT import_id, content FROM imports WHERE kind = ? AND content_head = ? ORDER BY import_id",
                        [kind, head]).fetchall()
    if not alike:
        return None
    digest = _combined([f and content_digest(f, max_line_bytes) for f in files])
    return next(((import_id, digest) for import_id, content in alike if content == digest), None)


TRUNCATED = " (the file's last line, without a line end: is the file cut short?)"


class _Import:
    """One streaming import: line reading with progress, bad-line policy, the ``imports`` row.

    ``files`` are the import's input files, the main one first (``None`` for an optional file not
    given). Unless ``append``, files already imported as ``kind`` are refused (:func:`refuse_repeat`):
    at once when their fingerprint is recorded; when an earlier import's content starts as theirs
    (:func:`input_files.content_head`), after one pass that hashes their whole content, so the same
    source compressed, re-encoded or with other line ends is refused before anything is parsed.
    """

    def __init__(self, con: duckdb.DuckDBPyConnection, kind: str, files: tuple[Path | None, ...], skip_bad: bool,
                 progress: bool, append: bool, max_line_bytes: int = MAX_LINE_BYTES):
        self.con, self.kind, self.file, self.files = con, kind, files[0], files
        self.skip_bad, self.progress, self.fingerprint = skip_bad, progress, fingerprint(*files)
        self.max_line_bytes = max_line_bytes
        self.digests: dict[Path, tuple[str, str]] = {}  # file -> (content digest, head) once read
        if not append:
            refuse_repeat(con, kind, self.fingerprint, self.file)
            self._refuse_same_content()
        self.import_id = store.next_id(con, "imports", "import_id")
        self.lines = 0
        self.skipped = 0
        self.started = time.perf_counter()

    def _refuse_same_content(self) -> None:
        found = same_content(self.con, self.kind, self.files, self.max_line_bytes)
        if found:
            refuse_repeat(self.con, self.kind, found[1], self.file, column="content")

    def read(self, path: Path, parse, line_end: bool = False) -> Iterator[tuple[int, object]]:
        """Yield ``(line number, parse(line))`` for every non-blank line (read by
        :class:`input_files.Lines`: decompressed, decoded, bounded); bad lines raise or skip.
        ``line_end``: a last line without a line end is a bad line (a tab-separated line cut short
        can still parse).

        A file without a non-blank line, or one that cannot be read to its end (a truncated or
        corrupt ``.gz``), raises ValueError naming the file (and the line reached).
        """
        from tqdm import tqdm

        seen = 0
        with Lines(path, self.max_line_bytes) as lines, tqdm(total=lines.size, unit="B", unit_scale=True,
                                                             desc=path.name, disable=not self.progress,
                                                             mininterval=1.0) as bar:
            for lineno, raw in lines:
                self.lines += 1
                seen += 1
                if self.progress and not seen % 1024:
                    bar.update(lines.position() - bar.n)
                if isinstance(raw, Oversized):
                    self.bad(path, lineno, str(raw))
                    continue
                if line_end and not lines.ended:
                    self.bad(path, lineno, "expected a line end after the last line: is the file cut short? (a "
                                           "tab-separated line cut short can still look whole); add a line end if "
                                           "the file is whole, or pass --skip-bad to skip the line")
                    continue
                try:
                    yield lineno, parse(raw)
                except _Bad as err:
                    self.bad(path, lineno, str(err) + ("" if lines.ended else TRUNCATED))
            bar.update(lines.position() - bar.n)
            self.digests[path] = (lines.digest(), lines.head())
        if not seen:
            raise ValueError(f"{path}: empty file (no non-blank line); nothing imported")

    def bad(self, path: Path, lineno: int, error: str) -> None:
        if not self.skip_bad:
            todo = "" if "--skip-bad" in error else "; pass --skip-bad to skip such lines"
            raise ValueError(f"{path} line {lineno}: {error}{todo}")
        self.skipped += 1
        self.con.execute("INSERT INTO skipped_lines VALUES (?, ?, ?, ?)",
                         [self.import_id, str(path), lineno, error])

    def finish(self, **counts) -> dict:
        """Write the ``imports`` row; the report: counts of rows inserted, lines, skipped, speed."""
        read = [self.digests[f] if f else (None, None) for f in self.files]
        record_import(self.con, self.import_id, self.kind, self.file, self.lines, self.skipped, self.fingerprint,
                      counts, _combined([d for d, _ in read]), _combined([h for _, h in read]))
        seconds = time.perf_counter() - self.started
        return {"import_id": self.import_id, "kind": self.kind, "file": str(self.file),
                "lines": self.lines, "skipped": self.skipped, **counts,
                "seconds": round(seconds, 3), "lines_per_s": round(self.lines / max(seconds, 1e-9), 1)}


def _chunks(items, size: int):
    """Lists of up to ``size`` consecutive items (the last may be shorter), read lazily."""
    chunk = []
    for item in items:
        chunk.append(item)
        if len(chunk) >= size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _insert(con: duckdb.DuckDBPyConnection, table: str, columns: dict[str, list | np.ndarray]) -> int:
    """Append one Arrow batch to the named columns of ``table``; returns the row count."""
    # A replacement scan of the local Arrow table (DuckDB reads Python variables by name):
    # unlike con.register it needs no clean-up and works after an unfetched result.
    _wb_batch = pa.table(columns)
    if _wb_batch.num_rows:
        con.execute(f"INSERT INTO {table} ({', '.join(columns)}) SELECT * FROM _wb_batch")
    return _wb_batch.num_rows


class _Entities:
    """Title -> entity id for batches of titles: reuse an existing entity, else create one."""

    def __init__(self, con: duckdb.DuckDBPyConnection, source: str):
        self.con, self.source = con, source
        self.next_id = self.first_id = store.next_id(con, "entities", "entity_id")
        self.created = 0

    def ids(self, titles: list[str]) -> np.ndarray:
        """Entity ids of ``titles`` (one SQL join of the batch against ``entities``)."""
        _wb_titles = pa.table({"key": np.arange(len(titles), dtype=np.int64), "title": titles})  # noqa: F841
        found = self.con.execute(
            "SELECT b.key, min(e.entity_id) AS id FROM _wb_titles b JOIN entities e ON e.title = b.title "
            "GROUP BY b.key").fetchnumpy()
        ids = np.full(len(titles), -1, dtype=np.int64)
        ids[found["key"]] = found["id"]
        new: dict[str, int] = {}
        for i in np.flatnonzero(ids < 0):
            title = titles[i]
            if title not in new:
                new[title] = self.next_id + len(new)
            ids[i] = new[title]
        if new:
            _insert(self.con, "entities", {
                "entity_id": np.fromiter(new.values(), dtype=np.int64, count=len(new)),
                "title": list(new), "kind": [title_kind(t) for t in new],
                "source": [self.source] * len(new)})
            self.next_id += len(new)
            self.created += len(new)
        return ids


# --------------------------------------------------------------------------------------- KILT

def _field(obj: dict, name: str, types: type | tuple, what: str):
    value = obj.get(name)
    if not isinstance(value, types) or isinstance(value, bool):
        raise _Bad(f"expected field {name!r} ({what})")
    return value


# A lone surrogate can only come from a \\uD800-\\uDFFF escape, or from its UTF-8-like bytes, which
# json.loads decodes with 'surrogatepass': lines without either need no further check.
_MAYBE_SURROGATE = re.compile(rb"\\u[dD][89a-fA-F]|\xed[\xa0-\xbf]")


def json_value(raw: bytes | str):
    """``json.loads(raw)``, or ValueError saying what is wrong: not JSON, not UTF-8, nested deeper
    than Python's recursion limit, or holding text no store can hold (a lone UTF-16 surrogate).

    Example:
        >>> json_value(b'{"t": "ok"}')
        {'t': 'ok'}
        >>> json_value(b'{"t": "\\\\ud800"}')
        Traceback (most recent call last):
        ...
        ValueError: text that cannot be stored: a lone UTF-16 surrogate '\\ud800' (expected valid Unicode)
    """
    try:
        value = json.loads(raw)
    except UnicodeDecodeError as err:
        raise ValueError(f"expected UTF-8 text (byte 0x{err.object[err.start]:02X} at byte {err.start} of the line is "
                         "not UTF-8): convert the file to UTF-8 (a Latin-1 file: iconv -f LATIN1 -t UTF-8)") from None
    except ValueError as err:  # JSONDecodeError, an over-long integer
        raise ValueError(f"not valid JSON ({err})") from None
    except RecursionError:
        raise ValueError(f"JSON nested deeper than Python's recursion limit ({sys.getrecursionlimit()})") from None
    if _MAYBE_SURROGATE.search(raw if isinstance(raw, bytes) else raw.encode("utf-8", "surrogatepass")):
        try:
            json.dumps(value, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError as err:
            raise ValueError(f"text that cannot be stored: a lone UTF-16 surrogate {err.object[err.start:err.end]!r} "
                             "(expected valid Unicode)") from None
    return value


def _json_object(raw: bytes) -> dict:
    try:
        obj = json_value(raw)
    except ValueError as err:
        raise _Bad(str(err) if str(err).startswith("expected UTF-8") else f"expected a JSON object: {err}") from None
    if not isinstance(obj, dict):
        raise _Bad("expected a JSON object")
    return obj


def _anchor_error(a, text: list[str]) -> str:
    """What a malformed KILT anchor should have been."""
    if not isinstance(a, dict):
        return "expected an object"
    try:
        p, start, end = (_field(a, k, int, "integer") for k in ("paragraph_id", "start", "end"))
        _field(a, "text", str, "string")
        _field(a, "href", str, "string")
    except _Bad as err:
        return str(err)
    return (f"expected 0 <= paragraph_id < {len(text)} and 0 <= start <= end <= paragraph length, "
            f"got paragraph_id={p} start={start} end={end}")


def _parse_kilt(raw: bytes) -> tuple[str, str, list[str], list[tuple]]:
    """One KILT page: (wikipedia_id, title, paragraphs, anchors as tuples ready to stage)."""
    obj = _json_object(raw)
    wid = str(_field(obj, "wikipedia_id", (str, int), "string or integer page id"))
    title = _field(obj, "wikipedia_title", str, "non-empty string").strip()
    if not title:
        raise _Bad("expected field 'wikipedia_title' (non-empty string)")
    text = _field(obj, "text", list, "list of paragraphs")
    if not all(isinstance(p, str) for p in text):
        raise _Bad("expected field 'text' (list of paragraphs)")
    anchors = []
    for i, a in enumerate(_field(obj, "anchors", list, "list of anchor objects")):
        # Fast path for well-formed anchors (a 35 GB file has ~100M); _anchor_error explains the rest.
        try:
            p, start, end, surface, href = a["paragraph_id"], a["start"], a["end"], a["text"], a["href"]
            ok = (type(p) is int and type(start) is int and type(end) is int and type(surface) is str
                  and type(href) is str and 0 <= p < len(text) and 0 <= start <= end <= len(text[p]))
        except (KeyError, TypeError):
            ok = False
        if not ok:
            raise _Bad(f"anchor {i}: {_anchor_error(a, text)}")
        dst_id = a.get("wikipedia_id")
        dst_title = a.get("wikipedia_title")
        dst_title = dst_title.strip() if isinstance(dst_title, str) else ""
        anchors.append((p, start, end, surface, None if dst_id is None else str(dst_id),
                        dst_title or href_title(href), relation_label(_sentence_before(text[p], start))))
    return wid, title, text, anchors


_KILT_STAGE = """
CREATE OR REPLACE TEMP TABLE _kilt_pages (line BIGINT, wid VARCHAR, title VARCHAR, entity_id BIGINT,
    first_passage BIGINT, passages INTEGER);
CREATE OR REPLACE TEMP TABLE _kilt_anchors (line BIGINT, src BIGINT, paragraph INTEGER, start INTEGER,
    stop INTEGER, text VARCHAR, dst_wid VARCHAR, dst_title VARCHAR, label VARCHAR);
"""

# A page whose id or title an earlier line of the file already had (one set-based pass at the
# end: a Python set of 6M ids would grow with the file).
_KILT_DUPLICATES = """
CREATE OR REPLACE TEMP TABLE _kilt_dups AS
SELECT line, wid, title, first_passage, passages,
       min(line) OVER (PARTITION BY wid) AS first_id, min(line) OVER (PARTITION BY title) AS first_title
FROM _kilt_pages QUALIFY first_id < line OR first_title < line;
"""

# --skip-bad: the duplicates' rows go (passages by their id range, staged anchors by line, and
# the entities only they created); each becomes a skipped line.
_KILT_DROP_DUPLICATES = """
INSERT INTO skipped_lines SELECT $import_id, $file, line,
    CASE WHEN first_id < line THEN 'duplicate page id ' || wid || ' (first at line ' || first_id || ')'
         ELSE 'duplicate page title ' || title || ' (first at line ' || first_title || ')' END
FROM _kilt_dups;
DELETE FROM passages p USING _kilt_dups d
WHERE p.passage_id >= d.first_passage AND p.passage_id < d.first_passage + d.passages;
DELETE FROM _kilt_anchors WHERE line IN (SELECT line FROM _kilt_dups);
DELETE FROM _kilt_pages WHERE line IN (SELECT line FROM _kilt_dups);
DELETE FROM entities WHERE entity_id >= $first_entity AND entity_id NOT IN (SELECT entity_id FROM _kilt_pages);
"""

# Targets resolve by page id, else by title, among the pages of this file; the rest stay NULL.
_KILT_RESOLVE = """
CREATE OR REPLACE TEMP TABLE _kilt_resolved AS
SELECT a.src, a.paragraph, a.start, a.stop, a.text, coalesce(bi.entity_id, bt.entity_id) AS dst, a.label
FROM _kilt_anchors a
LEFT JOIN (SELECT wid, min(entity_id) AS entity_id FROM _kilt_pages GROUP BY wid) bi ON bi.wid = a.dst_wid
LEFT JOIN (SELECT title, min(entity_id) AS entity_id FROM _kilt_pages GROUP BY title) bt ON bt.title = a.dst_title;
INSERT INTO anchors SELECT src, paragraph, start, stop, text, dst FROM _kilt_resolved;
"""

# Rule (1) of relation_label: a Wikidata triple (src, r, dst), found through the ids stored as
# aliases, overrides the sentence label. One edge per distinct (src, dst, relation); those the
# store already has (an earlier import) are not inserted again, nor counted.
_KILT_EDGES = """
CREATE OR REPLACE TEMP TABLE _kilt_wikidata AS
SELECT hd.entity_id AS src, tl.entity_id AS dst, min(t.relation) AS relation
FROM triples t JOIN aliases hd ON hd.alias = t.head JOIN aliases tl ON tl.alias = t.tail
GROUP BY ALL;
CREATE OR REPLACE TEMP TABLE _kilt_all_edges AS
SELECT DISTINCT r.src, r.dst, coalesce(w.relation, r.label) AS relation
FROM _kilt_resolved r LEFT JOIN _kilt_wikidata w ON w.src = r.src AND w.dst = r.dst
WHERE r.dst IS NOT NULL AND r.dst <> r.src;
CREATE OR REPLACE TEMP TABLE _kilt_edges AS SELECT * FROM _kilt_all_edges e
WHERE NOT EXISTS (SELECT 1 FROM edges x WHERE x.src = e.src AND x.dst = e.dst AND x.relation = e.relation);
INSERT INTO edges SELECT src, dst, relation, 'kilt' FROM _kilt_edges;
CREATE OR REPLACE TEMP TABLE _kilt_relations AS
SELECT l.label, c.functional FROM (SELECT DISTINCT relation AS label FROM _kilt_edges) l
LEFT JOIN _wb_cues c ON c.label = l.label WHERE l.label NOT IN (SELECT label FROM relations);
INSERT INTO relations SELECT label, NULL, NULL, functional FROM _kilt_relations;
"""
_KILT_TEMP = ("_kilt_pages", "_kilt_anchors", "_kilt_dups", "_kilt_resolved", "_kilt_wikidata", "_kilt_all_edges",
              "_kilt_edges", "_kilt_relations")


def import_kilt(con: duckdb.DuckDBPyConnection, path: str | Path, *, skip_bad: bool = False,
                batch_rows: int = 10_000, progress: bool = True, append: bool = False,
                memory_limit: str | None = IMPORT_MEMORY_LIMIT, max_line_bytes: int = MAX_LINE_BYTES) -> dict:
    """Import a KILT knowledge source file (JSON lines, optionally .gz) in one transaction.

    Writes entities (kind from :func:`title_kind`), one passage per paragraph, every anchor
    (``dst_entity`` NULL when the target page is not in the file) and one labelled edge per
    distinct (source, target, :func:`relation_label`) the store does not have yet. Returns the
    counts of rows inserted (``edges_present``: this file's edges the store already had) and lines/s.
    A file already imported is refused unless ``append``; a page id or title repeated in the file
    is a malformed line (``skip_bad`` keeps the first page). DuckDB's memory is capped at
    ``memory_limit`` meanwhile (:data:`IMPORT_MEMORY_LIMIT`, ours; None: DuckDB's default).

    Example:
        >>> import_kilt(store.connect(":memory:"), "kilt_knowledgesource.json", progress=False)  # doctest: +SKIP
        {'import_id': 0, 'kind': 'kilt', 'lines': 5903530, 'skipped': 0, 'entities': ..., ...}
    """
    path = check_input(path, "KILT file")
    with memory_limited(con, memory_limit), store.transaction(con):
        run = _Import(con, "kilt", (path,), skip_bad, progress, append, max_line_bytes)
        entities = _Entities(con, "kilt")
        next_passage = store.next_id(con, "passages", "passage_id")
        con.execute(_KILT_STAGE)
        pages: list[tuple[int, tuple[str, str, list[str], list[tuple]]]] = []
        rows = 0

        def flush() -> None:
            nonlocal next_passage
            if not pages:
                return
            ids = entities.ids([page[1] for _, page in pages])
            sizes = np.array([len(page[2]) for _, page in pages], dtype=np.int64)
            firsts = next_passage + np.concatenate([[0], np.cumsum(sizes)[:-1]])
            _insert(con, "_kilt_pages", {"line": np.array([line for line, _ in pages], dtype=np.int64),
                                          "wid": [page[0] for _, page in pages],
                                          "title": [page[1] for _, page in pages], "entity_id": ids,
                                          "first_passage": firsts, "passages": sizes.astype(np.int32)})
            texts = [t for _, page in pages for t in page[2]]
            _insert(con, "passages", {
                "passage_id": np.arange(next_passage, next_passage + len(texts), dtype=np.int64),
                "entity_id": np.repeat(ids, sizes),
                "paragraph": np.concatenate([np.arange(n, dtype=np.int32) for n in sizes]),
                "text": texts})
            next_passage += len(texts)
            anchors = [a for _, page in pages for a in page[3]]
            cols = list(zip(*anchors)) if anchors else [[]] * 7
            counts = [len(page[3]) for _, page in pages]
            _insert(con, "_kilt_anchors", {
                "line": np.repeat(np.array([line for line, _ in pages], dtype=np.int64), counts),
                "src": np.repeat(ids, counts),
                "paragraph": pa.array(cols[0], pa.int32()), "start": pa.array(cols[1], pa.int32()),
                "stop": pa.array(cols[2], pa.int32()), "text": pa.array(cols[3], pa.string()),
                "dst_wid": pa.array(cols[4], pa.string()), "dst_title": pa.array(cols[5], pa.string()),
                "label": pa.array(cols[6], pa.string())})
            pages.clear()

        for line, page in run.read(path, _parse_kilt):
            pages.append((line, page))
            rows += 1 + len(page[2]) + len(page[3])
            if rows >= batch_rows:
                flush()
                rows = 0
        flush()
        _drop_duplicate_pages(con, run, entities)
        con.execute(_KILT_RESOLVE)
        _wb_cues = pa.table({"label": list(RELATION_CUES), "functional": list(RELATION_CUES.values())})  # noqa: F841
        con.execute(_KILT_EDGES)
        (n_passages,) = con.execute("SELECT coalesce(sum(passages), 0) FROM _kilt_pages").fetchall()[0]
        (n_anchors, n_resolved), = con.execute("SELECT count(*), count(dst) FROM _kilt_resolved").fetchall()
        (n_edges, n_present, n_relations), = con.execute(
            "SELECT (SELECT count(*) FROM _kilt_edges), (SELECT count(*) FROM _kilt_all_edges) - "
            "(SELECT count(*) FROM _kilt_edges), (SELECT count(*) FROM _kilt_relations)").fetchall()
        by_rule = _rule_counts(con)
        for table in _KILT_TEMP:
            con.execute(f"DROP TABLE {table}")
        return run.finish(entities=entities.created, passages=int(n_passages), anchors=n_anchors,
                          resolved_anchors=n_resolved, edges=n_edges, edges_present=n_present,
                          relations=n_relations, edges_by_rule=by_rule)


def _drop_duplicate_pages(con: duckdb.DuckDBPyConnection, run: _Import, entities: _Entities) -> None:
    """A page id or title seen on an earlier line is a malformed line: raise, or (``skip_bad``)
    drop the later pages' rows and record them as skipped."""
    con.execute(_KILT_DUPLICATES)
    (n,) = con.execute("SELECT count(*) FROM _kilt_dups").fetchall()[0]
    if not n:
        return
    if not run.skip_bad:
        line, wid, title, first_id, first_title = con.execute(
            "SELECT line, wid, title, first_id, first_title FROM _kilt_dups ORDER BY line LIMIT 1").fetchall()[0]
        what = f"page id {wid!r} (first at line {first_id})" if first_id < line else \
            f"page title {title!r} (first at line {first_title})"
        more = f"; {n} duplicate pages in all" if n > 1 else ""
        raise ValueError(f"{run.file} line {line}: duplicate {what}{more}; pass --skip-bad to keep each first page")
    (before,) = con.execute("SELECT count(*) FROM entities WHERE entity_id >= ?", [entities.first_id]).fetchall()[0]
    params = {"import_id": run.import_id, "file": str(run.file), "first_entity": entities.first_id}
    for statement in filter(str.strip, _KILT_DROP_DUPLICATES.split(";")):  # DuckDB binds one statement at a time
        con.execute(statement, {k: v for k, v in params.items() if f"${k}" in statement})
    (after,) = con.execute("SELECT count(*) FROM entities WHERE entity_id >= ?", [entities.first_id]).fetchall()[0]
    entities.created -= before - after
    run.skipped += n


def _rule_counts(con: duckdb.DuckDBPyConnection) -> dict[str, int]:
    """How many of this import's inserted edges each rule of :func:`relation_label` labelled."""
    wikidata, cue, generic = con.execute(
        "SELECT count(*) FILTER (WHERE w.relation IS NOT NULL), "
        "count(*) FILTER (WHERE w.relation IS NULL AND e.relation <> ?), "
        "count(*) FILTER (WHERE w.relation IS NULL AND e.relation = ?) "
        "FROM _kilt_edges e LEFT JOIN _kilt_wikidata w ON w.src = e.src AND w.dst = e.dst "
        "AND w.relation = e.relation", [GENERIC_LABEL, GENERIC_LABEL]).fetchone()
    return {"wikidata": wikidata, "sentence": cue, "generic": generic}


# ------------------------------------------------------------------------------------ wiki-18

def split_contents(contents: str) -> tuple[str, str]:
    """(title, text) of a wiki-18 / Search-R1 document's ``contents``: the first line, its double
    quotes and surrounding spaces removed, and the rest. No newline gives text "".

    Example:
        >>> split_contents('"Aaron"\\nAaron is a prophet.')
        ('Aaron', 'Aaron is a prophet.')
    """
    head, _, text = contents.partition("\n")
    title = head.strip()
    if len(title) >= 2 and title[0] == title[-1] == '"':
        title = title[1:-1].strip()
    return title, text


def _parse_wiki18(raw: bytes) -> tuple[str, str]:
    """One wiki-18 passage: (title, text) from ``contents`` = '"Title"\\ntext'."""
    obj = _json_object(raw)
    _field(obj, "id", (str, int), "string or integer passage id")
    contents = obj.get("contents")
    title, text = split_contents(contents) if isinstance(contents, str) and "\n" in contents else ("", "")
    if not title:
        raise _Bad("expected field 'contents' as '\"Title\"\\ntext'")
    return title, text.strip()


def import_wiki18(con: duckdb.DuckDBPyConnection, path: str | Path, *, skip_bad: bool = False,
                  batch_rows: int = 10_000, progress: bool = True, append: bool = False,
                  memory_limit: str | None = IMPORT_MEMORY_LIMIT, max_line_bytes: int = MAX_LINE_BYTES) -> dict:
    """Import the wiki-18 corpus (JSON lines ``id``, ``contents``) as passages, in one transaction.

    Each line becomes a passage of the entity with its title (created when missing, kind from
    :func:`title_kind`). ``paragraph`` numbers the passages of a title in file order within a
    run of consecutive lines (wiki-18 stores an article's passages consecutively). A file
    already imported is refused unless ``append``. DuckDB's memory is capped at ``memory_limit``
    meanwhile (:data:`IMPORT_MEMORY_LIMIT`, ours; None: DuckDB's default).

    Example:
        >>> import_wiki18(store.connect(":memory:"), "wiki18_100w.jsonl", progress=False)  # doctest: +SKIP
        {'import_id': 0, 'kind': 'wiki18', 'lines': 21015324, 'passages': 21015324, ...}
    """
    path = check_input(path, "wiki-18 file")
    with memory_limited(con, memory_limit), store.transaction(con):
        run = _Import(con, "wiki18", (path,), skip_bad, progress, append, max_line_bytes)
        entities = _Entities(con, "wiki18")
        next_passage = store.next_id(con, "passages", "passage_id")
        titles: list[str] = []
        texts: list[str] = []
        paragraphs: list[int] = []
        last_title, paragraph, n_passages = None, 0, 0

        def flush() -> None:
            nonlocal next_passage, n_passages
            if titles:
                _insert(con, "passages", {
                    "passage_id": np.arange(next_passage, next_passage + len(texts), dtype=np.int64),
                    "entity_id": entities.ids(titles), "paragraph": pa.array(paragraphs, pa.int32()),
                    "text": texts})
                next_passage += len(texts)
                n_passages += len(texts)
                titles.clear(), texts.clear(), paragraphs.clear()

        for _, (title, text) in run.read(path, _parse_wiki18):
            paragraph = paragraph + 1 if title == last_title else 0
            last_title = title
            titles.append(title), texts.append(text), paragraphs.append(paragraph)
            if len(titles) >= batch_rows:
                flush()
        flush()
        return run.finish(entities=entities.created, passages=n_passages)


# --------------------------------------------------------------------------------- Wikidata5M

def _tab_fields(raw: bytes, at_least: int, exactly: bool, what: str) -> list[str]:
    try:
        fields = raw.decode("utf-8").rstrip("\r\n").split("\t")
    except UnicodeDecodeError as err:
        raise _Bad(f"expected UTF-8 text ({what}; byte 0x{raw[err.start]:02X} at byte {err.start} of the line is "
                   "not UTF-8): convert the file to UTF-8 (a Latin-1 file: iconv -f LATIN1 -t UTF-8)") from None
    fields = [f.strip() for f in fields]
    if (len(fields) != at_least if exactly else len(fields) < at_least) or not all(fields[:at_least]):
        raise _Bad(f"expected {what}, got {len(fields)} field(s)")
    return fields


def _parse_triple(raw: bytes) -> list[str]:
    return _tab_fields(raw, 3, True, "3 tab-separated fields: head, relation, tail ids")


def _parse_alias(raw: bytes) -> list[str]:
    return [f for f in _tab_fields(raw, 2, False, "tab-separated id, alias1, alias2, ...") if f]


def import_wikidata5m(con: duckdb.DuckDBPyConnection, triples: str | Path,
                      entity_aliases: str | Path | None = None,
                      relation_aliases: str | Path | None = None, *, skip_bad: bool = False,
                      batch_rows: int = 10_000, progress: bool = True, append: bool = False,
                      memory_limit: str | None = IMPORT_MEMORY_LIMIT, max_line_bytes: int = MAX_LINE_BYTES) -> dict:
    """Import Wikidata5M-style triples and alias files in one transaction.

    ``entity_aliases`` lines (``Q42\\tDouglas Adams\\tDouglas Noel Adams``) give each id an entity
    (the one titled like its first alias, created when missing) and ``aliases`` rows for the id
    itself and every alias. ``relation_aliases`` lines (``P57\\tdirector\\t...``) name relations:
    ``triples.relation`` holds a relation's first alias when one is given, else its raw id.
    The same three files (or the same triples without alias files) again are refused unless ``append``.
    DuckDB's memory is capped at ``memory_limit`` meanwhile (:data:`IMPORT_MEMORY_LIMIT`, ours).

    Example:
        >>> import_wikidata5m(store.connect(":memory:"), "wikidata5m_all_triplet.txt",
        ...                   "wikidata5m_entity.txt", "wikidata5m_relation.txt")  # doctest: +SKIP
        {'import_id': 0, 'kind': 'wikidata5m', 'triples': 21354359, 'aliases': ..., ...}
    """
    triples, entity_aliases, relation_aliases = (None if p is None else check_input(p, f"Wikidata5M {what} file")
                                                 for p, what in ((triples, "triples"), (entity_aliases, "alias"),
                                                                 (relation_aliases, "relation alias")))
    with memory_limited(con, memory_limit), store.transaction(con):
        run = _Import(con, "wikidata5m", (triples, entity_aliases, relation_aliases), skip_bad, progress, append,
                      max_line_bytes)
        entities = _Entities(con, "wikidata5m")
        n_aliases = n_triples = 0
        names: dict[str, str] = {}  # relation id -> first alias (Wikidata5M has ~800 relations)
        if relation_aliases is not None:
            for _, fields in run.read(relation_aliases, _parse_alias, line_end=True):
                names.setdefault(fields[0], fields[1])

        if entity_aliases is not None:
            for batch in _chunks((f for _, f in run.read(entity_aliases, _parse_alias, line_end=True)), batch_rows):
                ids = entities.ids([fields[1] for fields in batch])
                owners, names_ = [], []
                for eid, fields in zip(ids.tolist(), batch):
                    for alias in dict.fromkeys(fields):  # the id first, then the aliases, deduplicated
                        owners.append(eid), names_.append(alias)
                n_aliases += _insert(con, "aliases", {"entity_id": pa.array(owners, pa.int64()),
                                                      "alias": pa.array(names_, pa.string())})

        for rows in _chunks((f for _, f in run.read(triples, _parse_triple, line_end=True)), batch_rows):
            heads, rels, tails = zip(*rows)
            n_triples += _insert(con, "triples", {"head": list(heads),
                                                  "relation": [names.get(r, r) for r in rels],
                                                  "tail": list(tails)})
        return run.finish(entities=entities.created, aliases=n_aliases, triples=n_triples,
                          relations_named=len(names))
