"""Property-based tests of the importers (issue 12, "Proof"): no input file crashes them.

Whatever bytes a file holds, an import either succeeds, with counts that match the store, or
raises ValueError (FileNotFoundError for a missing file) in one line that names the file (and the
line, for a line-level fault); a failed import leaves the store unchanged, and with ``skip_bad``
every line-level fault is skipped and recorded instead. ``WB_PROP_EXAMPLES=400`` runs more examples
per property than the default 30 (about a minute here instead of five seconds).

Issue 39 adds: every importer against every way a file is stored (compressed, re-encoded, CRLF) or
damaged (Latin-1, cut short, oversized, a zip) -- a matrix, its fast subset in ``make test`` and
the rest in ``make test-slow`` -- and properties that the same content stored any way imports the
same, or is refused the same, and once imported is refused as already there.
"""

from __future__ import annotations

import bz2
import gzip
import io
import json
import lzma
import os
import re
import tempfile
import zipfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

hypothesis = pytest.importorskip(
    "hypothesis", reason="hypothesis is not installed: add hypothesis to pyproject.toml's pins to run these")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from workbench import store  # noqa: E402
from workbench.kg.sources import import_kilt, import_wiki18, import_wikidata5m  # noqa: E402
from workbench.qa_import import import_qa  # noqa: E402

SETTINGS = settings(max_examples=int(os.environ.get("WB_PROP_EXAMPLES", 30)), deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])
TABLES = ("entities", "passages", "anchors", "edges", "relations", "triples", "aliases", "questions", "imports",
          "skipped_lines")

json_scalars = (st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats(allow_nan=False)
                | st.text(max_size=12))
json_values = st.recursive(json_scalars, lambda inner: st.lists(inner, max_size=4)
                           | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=12)
words = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=15)


@st.composite
def kilt_pages(draw):
    """A KILT page, well-formed or with one field wrong (anchors' offsets drawn, not computed)."""
    paragraphs = draw(st.lists(words, min_size=1, max_size=3))
    anchors = draw(st.lists(st.fixed_dictionaries({
        "paragraph_id": st.integers(-1, 3), "start": st.integers(-1, 20), "end": st.integers(-1, 20),
        "text": words, "href": words}, optional={"wikipedia_id": st.text(max_size=3) | st.integers(0, 5)}),
        max_size=3))
    page = {"wikipedia_id": draw(st.text(max_size=3) | st.integers(0, 5)), "wikipedia_title": draw(words),
            "text": paragraphs, "anchors": anchors}
    if draw(st.booleans()):
        page[draw(st.sampled_from(sorted(page)))] = draw(json_values)
    return page


def lines_of(records) -> st.SearchStrategy[bytes]:
    """A file: records as JSON lines, raw junk lines, blank lines, maybe a BOM, maybe an unfinished last line."""
    line = (records.map(lambda r: json.dumps(r, ensure_ascii=False).encode("utf-8", "surrogatepass"))
            | json_values.map(lambda v: json.dumps(v).encode())
            | st.binary(max_size=30)
            | st.sampled_from([b"", b"  ", b'{"a": "\\ud800"}', b"[" * 3000, b"\xef\xbb\xbf{}"]))
    return st.builds(lambda bom, ls, end: (b"\xef\xbb\xbf" if bom else b"") + b"\n".join(ls) + (b"\n" if end else b""),
                     st.booleans(), st.lists(line, max_size=6), st.booleans())


def counts(con) -> dict:
    return {t: con.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in TABLES}


def attempt(run, path: Path, *args, names: tuple[str, ...] = (), **kwargs) -> dict | None:
    """Run one import on a fresh store: its report, or None after a clear error naming ``path``
    (or one of ``names``), the store unchanged."""
    con = store.connect(":memory:")
    before = counts(con)
    try:
        report = run(con, path, *args, **kwargs)
    except (ValueError, FileNotFoundError) as err:
        message = str(err)
        assert "\n" not in message and any(n in message for n in (path.name, *names)), message
        assert counts(con) == before
        return None
    else:
        after = counts(con)
        for table in ("passages", "anchors", "triples", "aliases", "questions"):
            if table in report:
                assert after[table] - before[table] == report[table], (table, report)
        return report
    finally:
        con.close()


def file_with(data: bytes, name: str) -> Path:
    path = Path(tempfile.mkdtemp()) / name
    path.write_bytes(data)
    return path


@SETTINGS
@given(lines_of(kilt_pages()), st.booleans())
def test_kilt_import_never_crashes(data, skip_bad):
    path = file_with(data, "kilt.jsonl")
    report = attempt(import_kilt, path, progress=False, skip_bad=skip_bad, batch_rows=3)
    if skip_bad and report is None:  # only a file-level fault remains: no line, or bytes no line can be read from
        con = store.connect(":memory:")
        with pytest.raises(ValueError, match=r"kilt\.jsonl(: empty file|: a (zip|7z) archive|: zstd-compressed| line "
                                             r"\d+: (expected UTF-(16|32)-[BL]E text, as the file's first bytes say|"
                                             r"corrupt compressed data|the compressed file ends early))"):
            import_kilt(con, path, progress=False, skip_bad=True)
    os.remove(path)


wiki18_records = st.fixed_dictionaries({"id": st.integers(0, 9) | st.text(max_size=3) | json_values,
                                        "contents": st.builds(lambda t, x: f'"{t}"\n{x}', words, words) | json_values})


@SETTINGS
@given(lines_of(wiki18_records), st.booleans())
def test_wiki18_import_never_crashes(data, skip_bad):
    attempt(import_wiki18, file_with(data, "psgs.jsonl"), progress=False, skip_bad=skip_bad)


tab_lines = st.lists(st.text(st.characters(blacklist_characters="\n\r"), max_size=8), max_size=4).map(
    lambda fields: "\t".join(fields).encode("utf-8", "surrogatepass")) | st.binary(max_size=20)
tab_files = st.builds(lambda bom, ls, end: (b"\xef\xbb\xbf" if bom else b"") + b"\n".join(ls) + (b"\n" if end else b""),
                      st.booleans(), st.lists(tab_lines, max_size=6), st.booleans())


@SETTINGS
@given(tab_files, tab_files | st.none(), st.booleans())
def test_wikidata5m_import_never_crashes(triples, aliases, skip_bad):
    folder = Path(tempfile.mkdtemp())
    (folder / "t.txt").write_bytes(triples)
    alias_path = None
    if aliases is not None:
        alias_path = folder / "a.txt"
        alias_path.write_bytes(aliases)
    attempt(import_wikidata5m, folder / "t.txt", alias_path, progress=False, skip_bad=skip_bad, names=("a.txt",))


qa_records = st.fixed_dictionaries({}, optional={
    "id": st.integers(0, 3) | st.text(max_size=2), "question": words | json_values,
    "answers": st.lists(words, max_size=2) | json_values, "split": words | json_values,
    "family": words | json_values, "hops": st.integers(-3, 2**40) | json_values,
    "input": words, "output": st.lists(st.fixed_dictionaries({"answer": words}), max_size=2) | json_values})


@SETTINGS
@given(lines_of(qa_records), st.sampled_from(["auto", "jsonl", "kilt"]), st.booleans())
def test_qa_jsonl_import_never_crashes(data, fmt, skip_bad):
    attempt(import_qa, file_with(data, "qa.jsonl"), "x", fmt=fmt, skip_bad=skip_bad)


@SETTINGS
@given(st.lists(qa_records | json_values, max_size=5).map(lambda v: json.dumps(v, ensure_ascii=False).encode(
    "utf-8", "surrogatepass")) | st.binary(max_size=40), st.booleans())
def test_qa_hotpot_import_never_crashes(data, skip_bad):
    attempt(import_qa, file_with(data, "hotpot.json"), "x", fmt="hotpot", skip_bad=skip_bad)


# ------------------------------------------------------------ issue 39: every importer, every way a file is stored
# Each importer against the same content stored another way (compressed, re-encoded, CRLF, a byte
# order mark) -- the store ends exactly as after the plain file -- and against faults (Latin-1, cut
# short, a cut compressed file, an oversized line or document, a zip) -- refused in one line that
# names the file (and the line, for a line's fault) and says what to do, the store unchanged.

LIMIT = 3000  # max_line_bytes / max_json_bytes of every case: the oversized case goes past it
CONTENT_TABLES = ("entities", "passages", "anchors", "edges", "relations", "triples", "aliases", "questions")
TODO = ("pass --", "convert the file", "copy it again", "unzip it", "decompress it", "add a line end")


def _kilt_pages(long: bool) -> list[dict]:
    from test_sources import KILT, page
    return KILT + [page("30", "Zoë Café", ["Zoë Café", "A café." + " x" * (2 * LIMIT if long else 1)])]


def _jsonl(records) -> bytes:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records).encode()


def _parquet(long: bool) -> bytes:
    sink = io.BytesIO()
    pq.write_table(pa.table({"question": ["who is zoë?", "who wrote alba?"],
                             "golden_answers": [["Zoë Café" + " x" * (2 * LIMIT if long else 1)], ["Cara"]]}), sink)
    return sink.getvalue()


def _tsv(long: bool) -> bytes:
    return ("Q1\tP1\tQ2\nQ2\tP2\tQ30\nQ30\tP1\tQ1" + "\t" * (2 * LIMIT if long else 0) + "\n").encode()


FORMATS = {  # name -> (file name, its content (long: with one record past LIMIT), the import)
    "kilt": ("kilt.jsonl", lambda long: _jsonl(_kilt_pages(long)),
             lambda con, p: import_kilt(con, p, progress=False, max_line_bytes=LIMIT)),
    "wiki18": ("psgs.jsonl", lambda long: _jsonl({"id": i, "contents": f'"Zoë {i % 2}"\nCafé {i}.'
                                                  + " x" * (2 * LIMIT if long and i == 3 else 1)} for i in range(6)),
               lambda con, p: import_wiki18(con, p, progress=False, max_line_bytes=LIMIT)),
    "wikidata5m": ("triples.txt", _tsv,  # with an alias file stored the same way (see _case)
                   lambda con, p, a=None: import_wikidata5m(con, p, a, progress=False, max_line_bytes=LIMIT)),
    "qa-jsonl": ("nq.jsonl", lambda long: _jsonl({"id": i, "question": f"who is zoë {i}?", "answers": [
        "Café" + " x" * (2 * LIMIT if long and i == 2 else 1)]} for i in range(5)),
                 lambda con, p: import_qa(con, p, "nq", max_line_bytes=LIMIT)),
    "qa-kilt": ("nq-kilt.jsonl", lambda long: _jsonl({"id": f"k{i}", "input": f"who is zoë {i}?", "output": [
        {"answer": "Café" + " x" * (2 * LIMIT if long and i == 1 else 1)}]} for i in range(4)),
                lambda con, p: import_qa(con, p, "nqk", max_line_bytes=LIMIT)),
    "hotpot": ("hotpot.json", lambda long: json.dumps([
        {"_id": f"h{i}", "question": f"Which café, zoë {i}?", "answer": "Café" + " x" * (2 * LIMIT if long else 1),
         "type": "bridge", "supporting_facts": [], "context": []} for i in range(3)], ensure_ascii=False,
        indent=1).encode(), lambda con, p: import_qa(con, p, "hotpot", max_json_bytes=LIMIT)),
    "triviaqa": ("triviaqa.json", lambda long: json.dumps({"Data": [
        {"QuestionId": f"t{i}", "Question": f"Zoë {i}?", "Answer": {"Value": "Café" + " x" * (
            2 * LIMIT if long else 1), "Aliases": ["Cafe"]}} for i in range(3)], "Split": "dev"},
        ensure_ascii=False).encode(), lambda con, p: import_qa(con, p, "trivia", max_json_bytes=LIMIT)),
    "popqa": ("popQA.tsv", lambda long: ("id\tprop\tquestion\tpossible_answers\n" + "".join(
        f'{i}\tocc\tWhat is Zoë {i}\'s job?\t"[""café owner{" x" * (2 * LIMIT if long and i == 1 else 1)}""]"\n'
        for i in range(3))).encode(), lambda con, p: import_qa(con, p, "popqa", max_line_bytes=LIMIT)),
    "bamboogle": ("bamboogle.csv", lambda long: ('"Question","Answer"\n' + "".join(
        f'"Who founded the café of Zoë, number {i}, in the year of the flood?",'
        f'"Zoë{" x" * (2 * LIMIT if long and i == 1 else 1)}"\n'
        for i in range(3))).encode(), lambda con, p: import_qa(con, p, "bamboogle", max_line_bytes=LIMIT)),
    "parquet": ("nq.parquet", _parquet, lambda con, p: import_qa(con, p, "nqp")),
}
TEXT_ONLY = {"crlf", "bom", "utf16", "utf16be-no-bom", "utf32", "latin1", "oversized"}  # not for parquet


def _cut(data: bytes) -> bytes:
    """``data`` cut in the middle of its middle line (a download that stopped)."""
    ends = [i for i, b in enumerate(data) if b == 0x0A]
    if len(ends) < 3:  # one line (a JSON document on one line): its middle
        return data[:len(data) // 2]
    start, end = ends[len(ends) // 2 - 1], ends[len(ends) // 2]
    return data[:(start + end) // 2]


def _zip(data: bytes) -> bytes:
    sink = io.BytesIO()
    with zipfile.ZipFile(sink, "w") as z:
        z.writestr("inner", data)
    return sink.getvalue()


STORED = {  # how -> (bytes of the file, suffix of its name)
    "plain": lambda d: (d, ""), "gz": lambda d: (gzip.compress(d), ".gz"), "bz2": lambda d: (bz2.compress(d), ".bz2"),
    "xz": lambda d: (lzma.compress(d), ".xz"), "crlf": lambda d: (d.replace(b"\n", b"\r\n"), ""),
    "bom": lambda d: (b"\xef\xbb\xbf" + d, ""), "utf16": lambda d: (d.decode().encode("utf-16"), ""),
    "utf16be-no-bom": lambda d: (d.decode().encode("utf-16-be"), ""),
    "utf32": lambda d: (d.decode().encode("utf-32"), ""),
}
FAULTS = {  # how -> (bytes of the file, suffix); the content is the long one for "oversized"
    "latin1": lambda d: (d.decode().encode("latin-1"), ""), "cut": lambda d: (_cut(d), ""),
    "cut-gz": lambda d: (gzip.compress(d)[:len(gzip.compress(d)) * 2 // 3], ".gz"),
    "oversized": lambda d: (d, ""), "zip": lambda d: (_zip(d), ""),
}
LINE_FAULTS = {"latin1", "cut", "cut-gz", "oversized"}  # a line is named (except in whole-file JSON and parquet)
WHOLE_FILE = {"hotpot", "triviaqa", "parquet"}
FAST = {"plain", "gz", "cut", "oversized"}  # and every way for KILT: the default run's subset


def content_snapshot(con) -> dict:
    """Each content table's rows (count and an order-free hash); the QA ``source`` (the file name) left out."""
    out = {}
    for table in CONTENT_TABLES:
        cols = [c for (c,) in con.execute(f"SELECT column_name FROM (DESCRIBE {table})").fetchall()
                if not (table == "questions" and c == "source") and c != "created_at"]
        out[table] = con.execute(f"SELECT count(*), sum(hash(t)) FROM (SELECT {', '.join(cols)} FROM {table}) t"
                                 ).fetchone()
    return out


def _case(fmt: str, how: str, folder: Path):
    """Write the case's file(s); return (a fresh store, the import to run on it)."""
    name, content, run = FORMATS[fmt]
    data, suffix = (FAULTS.get(how) or STORED[how])(content(how == "oversized"))
    path = folder / (name + suffix)
    path.write_bytes(data)
    if fmt == "wikidata5m":  # the alias file (where the non-ASCII text is) stored the same way, or Latin-1
        stored = STORED.get(how) or (FAULTS["latin1"] if how == "latin1" else STORED["plain"])
        alias_data, alias_suffix = stored("Q1\tZoë\nQ2\tCafé\n".encode())
        aliases = folder / ("aliases.txt" + alias_suffix)
        aliases.write_bytes(alias_data)
        return (path, aliases), lambda con: run(con, path, aliases)
    return (path,), lambda con: run(con, path)


def _cases():
    for fmt in FORMATS:
        for how in (*STORED, *FAULTS):
            if fmt == "parquet" and how in TEXT_ONLY:
                continue
            fast = fmt == "kilt" or how in FAST
            yield pytest.param(fmt, how, marks=() if fast else pytest.mark.slow, id=f"{fmt}-{how}")


@pytest.mark.parametrize("fmt, how", list(_cases()))
def test_every_importer_imports_a_stored_form_or_refuses_a_fault(fmt, how, tmp_path):
    for folder in ("plain", "case"):
        (tmp_path / folder).mkdir()
    con = store.connect(":memory:")
    _case(fmt, "plain", tmp_path / "plain")[1](con)
    expected = content_snapshot(con)
    con.close()
    paths, run = _case(fmt, how, tmp_path / "case")
    con = store.connect(":memory:")
    before = counts(con)
    if how in STORED and not (fmt == "parquet" and how != "plain"):
        run(con)
        assert content_snapshot(con) == expected
        if fmt not in ("qa-jsonl", "qa-kilt", "hotpot", "triviaqa", "popqa", "bamboogle", "parquet"):
            # the same content again, as the plain file: refused, nothing changed (issue 39 item 1)
            after = counts(con)
            with pytest.raises(ValueError, match="already in this store"):
                _case(fmt, "plain", tmp_path / "case")[1](con)
            assert counts(con) == after
        return
    with pytest.raises(ValueError) as err:
        run(con)
    message = str(err.value)
    assert "\n" not in message and any(p.name in message for p in paths), message
    assert any(todo in message for todo in TODO), message
    if how in LINE_FAULTS and fmt not in WHOLE_FILE:
        assert any(re.search(rf"{re.escape(p.name)} line \d+", message) for p in paths), message
    assert counts(con) == before


SAME_CONTENT = ("gz", "bz2", "xz", "crlf", "bom", "utf16", "utf32")


def outcome(run, path: Path, *args, **kwargs):
    """('ok', the content tables, the store) or ('refused', the message with the file's path as FILE)."""
    con = store.connect(":memory:")
    before = counts(con)
    try:
        run(con, path, *args, **kwargs)
    except (ValueError, FileNotFoundError) as err:
        assert counts(con) == before
        return ("refused", str(err).replace(str(path), "FILE")), con
    return ("ok", content_snapshot(con)), con


def stored(data: bytes, how: str) -> tuple[bytes, str] | None:
    """``data`` stored as ``how``, or None where that storage changes the content (text that is not
    UTF-8 cannot be UTF-16; a '\\r' of its own, or a byte order mark, would not read back the same)."""
    if how in ("utf16", "utf32"):
        try:
            return data.removeprefix(b"\xef\xbb\xbf").decode("utf-8").encode(how), ""
        except UnicodeDecodeError:
            return None
    if (how == "crlf" and b"\r" in data) or (how == "bom" and data.startswith(b"\xef\xbb\xbf")):
        return None
    return STORED[how](data)


def same_outcome(run, data: bytes, how: str, name: str, *args, again: str = "already in this store", **kwargs):
    """The file stored as ``how`` imports exactly as the plain one, or is refused with the same message;
    once the plain one is in a store, the other is refused there (``again``), nothing changed."""
    form = stored(data, how)
    hypothesis.assume(form is not None)
    plain, con = outcome(run, file_with(data, name), *args, **kwargs)
    other_path = file_with(form[0], name + form[1])
    other, _ = outcome(run, other_path, *args, **kwargs)
    assert other == plain, (how, plain, other)
    if plain[0] == "ok":
        before = counts(con)
        with pytest.raises(ValueError, match=again):
            run(con, other_path, *args, **kwargs)
        assert counts(con) == before


# Well-formed files, so that the properties below see imports that succeed (random ones mostly fail).
names = st.text(st.characters(blacklist_categories=("Cs", "Cc", "Zl", "Zp")), min_size=1, max_size=12).filter(
    lambda t: t.strip() == t and t)


@st.composite
def good_kilt_files(draw) -> bytes:
    """Pages with distinct ids and titles, anchors at valid offsets pointing at other pages."""
    titles = draw(st.lists(names, min_size=1, max_size=5, unique=True))
    pages = []
    for i, title in enumerate(titles):
        text = [title, *draw(st.lists(names, max_size=2))]
        anchors = []
        for p in draw(st.lists(st.integers(0, len(text) - 1), max_size=3)):
            start = draw(st.integers(0, len(text[p])))
            end = draw(st.integers(start, len(text[p])))
            anchors.append({"paragraph_id": p, "start": start, "end": end, "text": text[p][start:end],
                            "href": draw(st.sampled_from(titles)).replace(" ", "_")})
        pages.append({"wikipedia_id": str(i), "wikipedia_title": title, "text": text, "anchors": anchors})
    return _jsonl(pages)


good_triples = st.lists(st.tuples(*[st.from_regex(r"[QP][0-9]{1,3}", fullmatch=True)] * 3), min_size=1,
                        max_size=6).map(lambda ts: "".join("\t".join(t) + "\n" for t in ts).encode())
good_questions = st.lists(st.fixed_dictionaries({"question": names,
                                                  "answers": st.lists(names, min_size=1, max_size=2)}),
                          min_size=1, max_size=5).map(_jsonl)


@SETTINGS
@given(good_kilt_files() | lines_of(kilt_pages()), st.sampled_from(SAME_CONTENT), st.booleans())
def test_kilt_stored_any_way_imports_or_is_refused_as_the_plain_file(data, how, skip_bad):
    same_outcome(import_kilt, data, how, "kilt.jsonl", progress=False, skip_bad=skip_bad, batch_rows=3)


@SETTINGS
@given(good_triples | tab_files, st.sampled_from(SAME_CONTENT), st.booleans())
def test_wikidata5m_stored_any_way_imports_or_is_refused_as_the_plain_file(data, how, skip_bad):
    same_outcome(import_wikidata5m, data, how, "t.txt", progress=False, skip_bad=skip_bad)


@SETTINGS
@given(good_questions | lines_of(qa_records), st.sampled_from(SAME_CONTENT), st.booleans())
def test_qa_stored_any_way_imports_or_is_refused_as_the_plain_file(data, how, skip_bad):
    same_outcome(import_qa, data, how, "questions.jsonl", "x", skip_bad=skip_bad, again="already has questions")


@SETTINGS
@given(st.lists(st.text(st.characters(blacklist_categories=("Cs", "Cc"), blacklist_characters="\ufeff"),
                        max_size=20).map(str.encode), max_size=8), st.integers(1, 12), st.integers(1, 5), st.booleans())
def test_lines_read_crlf_as_lf_at_any_limit_and_chunk(lines, limit, chunk, last_end):
    """Oversized lines are skipped in CHUNK pieces: a '\\r\\n' split across pieces is still a line end,
    so sizes, lines and digests agree between the LF and the CRLF file."""
    from workbench.kg import input_files

    def read(end: bytes):
        path = file_with(end.join(lines) + (end if last_end else b""), "x.txt")
        with input_files.Lines(path, limit) as reader:
            got = [(n, ("over", x.size) if isinstance(x, input_files.Oversized) else x) for n, x in reader]
            return got, reader.digest()

    saved, input_files.CHUNK = input_files.CHUNK, chunk
    try:
        lf, crlf = read(b"\n"), read(b"\r\n")
    finally:
        input_files.CHUNK = saved
    assert lf == crlf
    assert [(n + 1, ("over", len(line)) if len(line) > limit else line) for n, line in enumerate(lines)
            if len(line) > limit or line.strip()] == lf[0]
