"""Property-based tests of the importers (issue 12, "Proof"): no input file crashes them.

Whatever bytes a file holds, an import either succeeds, with counts that match the store, or
raises ValueError (FileNotFoundError for a missing file) in one line that names the file (and the
line, for a line-level fault); a failed import leaves the store unchanged, and with ``skip_bad``
every line-level fault is skipped and recorded instead. ``WB_PROP_EXAMPLES=400`` runs more examples
per property than the default 30 (about a minute here instead of five seconds).
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

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
    if skip_bad and report is None:  # only a file-level fault remains
        con = store.connect(":memory:")
        with pytest.raises(ValueError, match=r"kilt\.jsonl: empty file"):
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
tab_files = st.builds(lambda bom, ls: (b"\xef\xbb\xbf" if bom else b"") + b"\n".join(ls), st.booleans(),
                      st.lists(tab_lines, max_size=6))


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
