"""Importers of real knowledge sources (KILT, wiki-18, Wikidata5M) on files written here in their formats."""

from __future__ import annotations

import bz2
import contextlib
import gzip
import json
import lzma
import random
import threading
import time

import psutil
import pytest

from workbench import store
from workbench.cli import main
from workbench.kg.sources import (GENERIC_LABEL, AlreadyImported, import_kilt, import_wiki18, import_wikidata5m,
                                  relation_label, title_kind)

TABLES = ("entities", "passages", "anchors", "relations", "edges", "triples", "aliases", "imports",
          "skipped_lines")


def counts(con) -> dict[str, int]:
    return {t: con.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in TABLES}


def page(wid, title, paragraphs, links=()):
    """A KILT page; ``links`` = (paragraph, surface, target fields) with offsets found in the text."""
    anchors = []
    for p, surface, target in links:
        start = paragraphs[p].index(surface)
        anchors.append({"paragraph_id": p, "start": start, "end": start + len(surface), "text": surface,
                        **target})
    return {"wikipedia_id": wid, "wikipedia_title": title, "text": paragraphs, "anchors": anchors}


def write_lines(path, records):
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records))
    return path


ALBA = page("10", "Alba", ["Alba", "Alba is a 1990 film. It was directed by Bo Lind and written by Cara.",
                           "Alba premiered in Café Noir. It was shot near Nowhere Land."],
            [(1, "1990", {"href": "1990"}),
             (1, "Bo Lind", {"href": "Bo_Lind"}),                             # by title from the href
             (1, "Cara", {"href": "Someone_else", "wikipedia_id": "12"}),      # by id
             (2, "Café Noir", {"href": "Caf%C3%A9_Noir"}),                    # URL-decoded href
             (2, "Nowhere Land", {"href": "Nowhere_Land"})])                  # not in the file
KILT = [ALBA,
        page("11", "Bo Lind", ["Bo Lind", "Bo Lind was born in Café Noir."],
             [(1, "Café Noir", {"href": "x", "wikipedia_title": "Café Noir"})]),
        page("12", "Cara", ["Cara", "Cara is a French writer."], [(1, "French", {"href": "French"})]),
        page("13", "Café Noir", ["Café Noir", "Café Noir is a town."]),
        page("14", "1990", ["1990", "1990 was a year."]),
        page("15", "List of films", ["List of films", "Alba."], [(1, "Alba", {"href": "Alba"})]),
        page("16", "French", ["French", "French people."]),
        page("17", "Ox", ["Ox", "A river."])]


def test_kilt_rows_offsets_and_labels(con, tmp_path):
    result = import_kilt(con, write_lines(tmp_path / "kilt.jsonl", KILT), progress=False)
    assert result["lines"] == 8 and result["entities"] == 8 and result["passages"] == 17
    kinds = dict(con.execute("SELECT title, kind FROM entities").fetchall())
    assert kinds == {"Alba": "entity", "Bo Lind": "entity", "Cara": "entity", "Café Noir": "entity",
                     "1990": "year", "List of films": "list", "French": "nationality", "Ox": "short"}
    # every anchor kept, offsets exactly as written: the span of the paragraph is the anchor text
    rows = con.execute("""SELECT a.text, substr(p.text, a.start + 1, a.stop - a.start), d.title
                          FROM anchors a JOIN passages p ON p.entity_id = a.src_entity AND p.paragraph = a.paragraph
                          LEFT JOIN entities d ON d.entity_id = a.dst_entity ORDER BY a.src_entity, a.start""").fetchall()
    assert len(rows) == 8 and all(text == span for text, span, _ in rows)
    assert {t: d for t, _, d in rows}["Nowhere Land"] is None
    assert result["anchors"] == 8 and result["resolved_anchors"] == 7
    edges = set(con.execute("""SELECT s.title, d.title, e.relation FROM edges e JOIN entities s ON s.entity_id = e.src
                               JOIN entities d ON d.entity_id = e.dst""").fetchall())
    assert edges == {("Alba", "1990", GENERIC_LABEL), ("Alba", "Bo Lind", "directed by"),
                     ("Alba", "Cara", "written by"), ("Alba", "Café Noir", GENERIC_LABEL),
                     ("Bo Lind", "Café Noir", "born in"), ("Cara", "French", GENERIC_LABEL),
                     ("List of films", "Alba", GENERIC_LABEL)}
    assert result["edges_by_rule"] == {"wikidata": 0, "sentence": 3, "generic": 4}
    assert con.execute("SELECT functional FROM relations WHERE label = 'born in'").fetchone() == (True,)
    assert con.execute("SELECT kind, lines, skipped FROM imports").fetchall() == [("kilt", 8, 0)]


def test_relation_label_rules():
    assert relation_label("He was born in ") == "born in"
    assert relation_label("The Nile flows through the ") == "flows through"
    assert relation_label("It was written by A and directed by ") == "directed by"  # nearest cue wins
    assert relation_label("It is located in a very large old ") == GENERIC_LABEL  # cue too far away
    assert relation_label("He visited ") == GENERIC_LABEL
    assert relation_label("He was born in ", wikidata="place of birth") == "place of birth"
    assert [title_kind(t) for t in ("AD 79", "300 BC", "Lists of lakes", "Italian", "Rome")] == \
        ["year", "year", "list", "nationality", "entity"]


def test_wikidata_labels_kilt_edges(con, tmp_path):
    write_lines(tmp_path / "triples.txt", ["Q1\tP57\tQ2", "Q1\tP58\tQ3", "Q3\tP27\tQ9"])
    write_lines(tmp_path / "entity.txt", ["Q1\tAlba\tAlba (film)", "Q2\tBo Lind", "Q3\tCara\tC."])
    write_lines(tmp_path / "relation.txt", ["P57\tdirector\tdirected by", "P58\tscreenwriter"])
    wd = import_wikidata5m(con, tmp_path / "triples.txt", tmp_path / "entity.txt", tmp_path / "relation.txt",
                           progress=False)
    assert wd["triples"] == 3 and wd["entities"] == 3 and wd["aliases"] == 8
    assert con.execute("SELECT relation FROM triples ORDER BY relation").fetchall() == \
        [("P27",), ("director",), ("screenwriter",)]
    alba_id = con.execute("SELECT entity_id FROM aliases WHERE alias = 'Q1'").fetchone()[0]
    result = import_kilt(con, write_lines(tmp_path / "kilt.jsonl", KILT), progress=False)
    assert result["entities"] == 5  # Alba, Bo Lind and Cara reuse the Wikidata5M entities
    assert con.execute("SELECT entity_id FROM entities WHERE title = 'Alba'").fetchall() == [(alba_id,)]
    labels = dict(con.execute("""SELECT d.title, e.relation FROM edges e JOIN entities d ON d.entity_id = e.dst
                                 WHERE e.src = ?""", [alba_id]).fetchall())
    assert labels["Bo Lind"] == "director" and labels["Cara"] == "screenwriter"  # rule 1 over rule 2
    assert labels["Café Noir"] == GENERIC_LABEL
    assert result["edges_by_rule"] == {"wikidata": 2, "sentence": 1, "generic": 4}


@pytest.mark.parametrize("bad, expected", [
    ({"wikipedia_id": "9", "wikipedia_title": "X", "anchors": []}, r"line 2: expected field 'text' \(list of paragraphs\)"),
    ('{"wikipedia_id": "9", "wikipedia_title": ', "line 2: expected a JSON object"),
    (page("9", "Xyzzy", ["Xyzzy", "ab"], []) | {"anchors": [{"paragraph_id": 1, "start": 0, "end": 9,
                                                               "text": "ab", "href": "Ab"}]},
     "line 2: anchor 0: expected 0 <= paragraph_id < 2"),
    (page("9", "Xyzzy", ["Xyzzy"]) | {"anchors": [{"paragraph_id": 0, "start": 0, "text": "X", "href": "X"}]},
     "line 2: anchor 0: expected field 'end'"),
])
def test_kilt_malformed_leaves_store_unchanged(con, tmp_path, bad, expected):
    import_kilt(con, write_lines(tmp_path / "good.jsonl", KILT[1:4]), progress=False)
    before = counts(con)
    path = write_lines(tmp_path / "wiki.jsonl", [KILT[0], bad, KILT[4]])
    with pytest.raises(ValueError, match=r"wiki\.jsonl " + expected):
        import_kilt(con, path, progress=False)
    assert counts(con) == before


def test_kilt_skip_bad_records_lines(con, tmp_path):
    path = write_lines(tmp_path / "kilt.jsonl", [KILT[0], "not json", KILT[1], {"wikipedia_id": "3"}])
    result = import_kilt(con, path, skip_bad=True, progress=False)
    assert result["skipped"] == 2 and result["entities"] == 2
    rows = con.execute("SELECT import_id, file, line, error FROM skipped_lines ORDER BY line").fetchall()
    assert [(r[0], r[2]) for r in rows] == [(result["import_id"], 2), (result["import_id"], 4)]
    assert rows[0][1] == str(path) and "wikipedia_title" in rows[1][3]
    assert con.execute("SELECT lines, skipped FROM imports").fetchall() == [(4, 2)]


def test_wiki18_passages_and_entities(con, tmp_path):
    import_kilt(con, write_lines(tmp_path / "kilt.jsonl", KILT[:1]), progress=False)
    lines = [{"id": "1", "contents": '"Alba"\nAlba is a 1990 film.'},
             {"id": "2", "contents": '"Alba"\nIt was directed by Bo Lind.'},
             {"id": 3, "contents": '"Zed River"\nThe Zed flows north.'}]
    result = import_wiki18(con, write_lines(tmp_path / "psgs.jsonl", lines), batch_rows=2, progress=False)
    assert result["passages"] == 3 and result["entities"] == 1  # Alba exists already
    rows = con.execute("""SELECT e.title, p.paragraph, p.text FROM passages p JOIN entities e USING (entity_id)
                          WHERE e.source = 'wiki18' OR p.text LIKE '%Bo Lind.' ORDER BY p.passage_id""").fetchall()
    assert rows == [("Alba", 1, "It was directed by Bo Lind."), ("Zed River", 0, "The Zed flows north.")]
    before = counts(con)
    bad = write_lines(tmp_path / "bad.jsonl", lines[:1] + [{"id": "4", "contents": "no title line"}])
    with pytest.raises(ValueError, match=r"bad\.jsonl line 2: expected field 'contents'"):
        import_wiki18(con, bad, progress=False)
    assert counts(con) == before


def test_wikidata5m_malformed_and_skip_bad(con, tmp_path):
    triples = write_lines(tmp_path / "t.txt", ["Q1\tP1\tQ2", "Q1\tP1", "Q2\tP1\tQ3"])
    before = counts(con)
    with pytest.raises(ValueError, match=r"t\.txt line 2: expected 3 tab-separated fields"):
        import_wikidata5m(con, triples, progress=False)
    aliases = write_lines(tmp_path / "a.txt", ["Q1\tOne", "Q2"])
    with pytest.raises(ValueError, match=r"a\.txt line 2: expected tab-separated id, alias1"):
        import_wikidata5m(con, write_lines(tmp_path / "ok.txt", ["Q1\tP1\tQ2"]), aliases, progress=False)
    assert counts(con) == before
    result = import_wikidata5m(con, triples, aliases, skip_bad=True, progress=False)
    assert (result["triples"], result["skipped"], result["aliases"]) == (2, 2, 2)
    assert con.execute("SELECT file, line FROM skipped_lines ORDER BY file").fetchall() == \
        [(str(aliases), 2), (str(triples), 2)]


def test_cli_import(tmp_path, capsys):
    db = str(tmp_path / "cli.duckdb")
    path = write_lines(tmp_path / "kilt.jsonl", KILT)
    assert main(["import", "kilt", str(path), "--db", db, "--no-progress"]) == 0
    assert json.loads(capsys.readouterr().out)["edges"] == 7
    bad = write_lines(tmp_path / "bad.jsonl", [KILT[0], {"wikipedia_id": "1"}])
    assert main(["import", "kilt", str(bad), "--db", db, "--no-progress"]) == 2
    assert "bad.jsonl line 2: expected field 'wikipedia_title'" in capsys.readouterr().err
    assert main(["import", "kilt", str(bad), "--db", db, "--no-progress", "--skip-bad"]) == 0
    assert json.loads(capsys.readouterr().out)["skipped"] == 1
    assert main(["import", "wikidata5m", str(write_lines(tmp_path / "t.txt", ["Q1\tP1\tQ2"])), "--db", db,
                 "--no-progress"]) == 0
    assert main(["import", "wiki18", str(write_lines(tmp_path / "w.jsonl", [{"id": 1, "contents": '"A b"\nx'}])),
                 "--db", db, "--no-progress"]) == 0
    con = store.connect(db)
    assert con.execute("SELECT kind FROM imports ORDER BY import_id").fetchall() == \
        [("kilt",), ("kilt",), ("wikidata5m",), ("wiki18",)]


@contextlib.contextmanager
def rss_growth(interval: float):
    """This process's RSS sampled every ``interval`` s while the block runs; ``growth[0]`` is then
    the peak's growth over the start, in MB."""
    proc = psutil.Process()
    base = proc.memory_info().rss
    peak, growth = [base], [0.0]
    done = threading.Event()

    def sample():
        while not done.is_set():
            peak[0] = max(peak[0], proc.memory_info().rss)
            time.sleep(interval)

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        yield growth
    finally:
        done.set()
        sampler.join()
        growth[0] = (peak[0] - base) / 2**20


def write_kilt_like(path, n_pages: int, seed: int = 0, anchors: int = 4):
    """A KILT-shaped file of ``n_pages`` pages (3 paragraphs, ``anchors`` links each), about 1 KB a line."""
    rng = random.Random(seed)
    words = "the river city film was by of in a and born directed located near old new north".split()
    with open(path, "w") as f:
        for i in range(n_pages):
            paras = [f"Page {i}"] + [" ".join(rng.choices(words, k=40)) + "." for _ in range(2)]
            links = []
            for _ in range(anchors):
                j = rng.randrange(n_pages)
                p = rng.randrange(1, 3)
                cue = rng.choice(["directed by ", "located in ", "near "])
                start = len(paras[p]) + 1 + len(cue)
                paras[p] += f" {cue}Page {j}."
                links.append({"paragraph_id": p, "start": start, "end": start + len(f"Page {j}"),
                              "text": f"Page {j}", "href": f"Page_{j}"})
            f.write(json.dumps({"wikipedia_id": str(i), "wikipedia_title": f"Page {i}", "text": paras,
                                "anchors": links}) + "\n")


@pytest.mark.slow
def test_kilt_import_memory_is_bounded(tmp_path):
    """50k lines (44 MB, ~140 MB as Python objects) import with RSS growth well below that.

    A 5k-line warm-up import first pays the one-off costs (module imports, DuckDB's buffer pool up
    to its memory limit), so the second import's growth is what the streaming itself holds.
    """
    warm, path = tmp_path / "warm.jsonl", tmp_path / "big.jsonl"
    write_kilt_like(warm, 5_000, seed=1)
    write_kilt_like(path, 50_000)
    con = store.connect(tmp_path / "big.duckdb")
    limit = "64MB"  # what the CLI's --memory-limit sets (the default cap is 4GB); DuckDB spills beyond it
    import_kilt(con, warm, progress=False, memory_limit=limit)
    with rss_growth(0.02) as growth:
        result = import_kilt(con, path, progress=False, memory_limit=limit)
    assert result["lines"] == 50_000 and result["anchors"] == 200_000 and result["resolved_anchors"] == 200_000
    growth_mb = growth[0]
    print(f"\nKILT-like import: {result['lines_per_s']:.0f} lines/s, peak RSS growth {growth_mb:.0f} MB, "
          f"file {path.stat().st_size / 2**20:.0f} MB")
    assert growth_mb < 80


# ------------------------------------------------------------------ issue 12: nothing doubled, every fault told

def test_reimporting_a_file_is_refused_unless_append(con, tmp_path, capsys):
    """Regression: the same file again doubled every passage and anchor with exit 0 (issue 12, item 5)."""
    path = write_lines(tmp_path / "kilt.jsonl", KILT)
    first = import_kilt(con, path, progress=False)
    before = counts(con)
    copy = tmp_path / "copy-of-kilt.jsonl"
    copy.write_bytes(path.read_bytes())  # the same content under another name is the same file
    for again in (path, copy):
        with pytest.raises(ValueError, match=r"already in this store \(import 0 of .*kilt\.jsonl at .*, 8 lines\).*"
                                             r"--append"):
            import_kilt(con, again, progress=False)
        assert counts(con) == before
    db = str(tmp_path / "cli.duckdb")
    assert main(["import", "kilt", str(path), "--db", db, "--no-progress"]) == 0
    capsys.readouterr()
    assert main(["import", "kilt", str(path), "--db", db, "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "already in this store" in err
    # --append imports it again, and the report counts what it inserted: no edge twice
    again = import_kilt(con, path, progress=False, append=True)
    assert (again["passages"], again["anchors"], again["entities"]) == (first["passages"], first["anchors"], 0)
    assert (again["edges"], again["edges_present"], again["relations"]) == (0, first["edges"], 0)
    assert again["edges_by_rule"] == {"wikidata": 0, "sentence": 0, "generic": 0}
    after = counts(con)
    assert after["edges"] == before["edges"] and after["passages"] == 2 * before["passages"]
    inserted = json.loads(con.execute("SELECT inserted FROM imports WHERE import_id = 1").fetchone()[0])
    assert inserted["passages"] == first["passages"] and inserted["edges"] == 0


def test_edges_the_store_has_are_not_reported_as_inserted(con, tmp_path):
    """Regression: a second file's edges that the store already held were counted as inserted."""
    import_kilt(con, write_lines(tmp_path / "a.jsonl", KILT[:4]), progress=False)
    n_edges = counts(con)["edges"]
    result = import_kilt(con, write_lines(tmp_path / "b.jsonl", KILT), progress=False)
    assert result["edges"] == counts(con)["edges"] - n_edges == 7 - result["edges_present"]
    assert result["edges_present"] == n_edges == 4


def test_wikidata5m_reimport_is_refused_per_set_of_files(con, tmp_path):
    triples = write_lines(tmp_path / "t.txt", ["Q1\tP1\tQ2"])
    aliases = write_lines(tmp_path / "a.txt", ["Q1\tOne", "Q2\tTwo"])
    import_wikidata5m(con, triples, aliases, progress=False)
    with pytest.raises(ValueError, match="already in this store"):
        import_wikidata5m(con, triples, aliases, progress=False)
    # the triples without the alias file are another import
    assert import_wikidata5m(con, triples, progress=False)["triples"] == 1


BOM = b"\xef\xbb\xbf"


def test_a_byte_order_mark_is_dropped_by_every_source_importer(con, tmp_path):
    kilt = tmp_path / "kilt.jsonl"
    kilt.write_bytes(BOM + write_lines(tmp_path / "k0", KILT[:2]).read_bytes())
    assert import_kilt(con, kilt, progress=False)["entities"] == 2
    wiki = tmp_path / "w.jsonl"
    wiki.write_bytes(BOM + b'{"id": "1", "contents": "\\"Zed\\"\\nA river."}\n')
    assert import_wiki18(con, wiki, progress=False)["passages"] == 1
    triples, aliases = tmp_path / "t.txt", tmp_path / "a.txt"
    triples.write_bytes(BOM + b"Q7\tP1\tQ8\n")
    aliases.write_bytes(BOM + b"Q7\tSeven\n")
    import_wikidata5m(con, triples, aliases, progress=False)
    assert con.execute("SELECT head FROM triples").fetchall() == [("Q7",)]  # was '\ufeffQ7'
    assert ("Q7",) in con.execute("SELECT alias FROM aliases").fetchall()


@pytest.mark.parametrize("line, expected", [
    ('{"wikipedia_id": "9", "wikipedia_title": "Bad\\ud800", "text": ["x"], "anchors": []}',
     r"lone UTF-16 surrogate '\\ud800'"),
    (b'{"wikipedia_id": "9", "wikipedia_title": "Bad\xed\xa0\x80", "text": ["x"], "anchors": []}',
     "lone UTF-16 surrogate"),
    ("[" * 100_000 + "]" * 100_000, "nested deeper than Python's recursion limit"),
    (b'{"wikipedia_id": "9", "wikipedia_title": "Bad\xff", "text": ["x"], "anchors": []}',
     r"^expected UTF-8 text \(byte 0xFF at byte 45 of the line is not UTF-8\): convert the file to UTF-8 .*iconv"),
    ('{"wikipedia_id": ' + "1" * 5000 + "}", "not valid JSON"),
])
def test_text_that_cannot_be_stored_is_a_bad_line(con, tmp_path, line, expected):
    path = tmp_path / "kilt.jsonl"
    good = write_lines(tmp_path / "g", KILT[:2]).read_bytes()
    path.write_bytes(good + (line if isinstance(line, bytes) else line.encode()) + b"\n")
    before = counts(con)
    prefix = "" if expected.startswith("^") else "expected a JSON object: .*"
    with pytest.raises(ValueError, match=r"kilt\.jsonl line 3: " + prefix + expected.lstrip("^")):
        import_kilt(con, path, progress=False)
    assert counts(con) == before
    result = import_kilt(con, path, progress=False, skip_bad=True)
    assert (result["entities"], result["skipped"]) == (2, 1)
    assert con.execute("SELECT line FROM skipped_lines").fetchall() == [(3,)]


def test_wiki18_lone_surrogate_names_its_line(con, tmp_path):
    path = write_lines(tmp_path / "w.jsonl", [{"id": 1, "contents": '"A"\nok'},
                                              '{"id": 2, "contents": "\\"B\\"\\n\\udfff"}'])
    with pytest.raises(ValueError, match=r"w\.jsonl line 2: .*lone UTF-16 surrogate"):
        import_wiki18(con, path, progress=False)


def test_truncated_or_corrupt_gzip_names_file_and_line(con, tmp_path):
    whole = gzip.compress(write_lines(tmp_path / "k", KILT * 40).read_bytes())
    cut = tmp_path / "cut.jsonl.gz"
    cut.write_bytes(whole[: len(whole) // 2])
    before = counts(con)
    with pytest.raises(ValueError, match=r"cut\.jsonl\.gz line \d+: the compressed file ends early \(truncated\?\)"):
        import_kilt(con, cut, progress=False)
    flipped = bytearray(whole)
    flipped[len(flipped) // 2] ^= 0xFF
    bad = tmp_path / "bad.jsonl.gz"
    bad.write_bytes(bytes(flipped))
    with pytest.raises(ValueError, match=r"bad\.jsonl\.gz line \d+: (corrupt compressed data|expected a JSON)"):
        import_kilt(con, bad, progress=False)
    plain = tmp_path / "plain.jsonl.gz"
    plain.write_bytes(b"not gzip")
    with pytest.raises(ValueError, match=r"plain\.jsonl\.gz line 1: corrupt compressed data: Not a gzipped file"):
        import_kilt(con, plain, progress=False)
    assert counts(con) == before


@pytest.mark.parametrize("content", [b"", b"\n  \n", BOM + b"\n"])
def test_an_empty_file_is_told(con, tmp_path, content):
    for name, run in (("kilt.jsonl", import_kilt), ("w.jsonl", import_wiki18), ("t.txt", import_wikidata5m)):
        path = tmp_path / name
        path.write_bytes(content)
        with pytest.raises(ValueError, match=rf"{name}: empty file"):
            run(con, path, progress=False)
    assert counts(con)["imports"] == 0


def test_a_directory_where_a_file_belongs_is_told(con, tmp_path, capsys):
    with pytest.raises(ValueError, match="is a directory; expected a KILT file"):
        import_kilt(con, tmp_path, progress=False)
    db = tmp_path / "new.duckdb"
    assert main(["import", "wiki18", str(tmp_path), "--db", str(db)]) == 2
    assert "is a directory; expected a wiki-18 file" in capsys.readouterr().err
    assert not db.exists()  # checked before the store is created
    assert main(["import", "kilt", str(write_lines(tmp_path / "k.jsonl", KILT)), "--db", str(tmp_path)]) == 2
    assert "is a directory; expected a DuckDB store file" in capsys.readouterr().err


def test_memory_limit_is_checked_before_the_store_is_created(tmp_path, capsys):
    db = tmp_path / "new.duckdb"
    path = write_lines(tmp_path / "k.jsonl", KILT)
    assert main(["import", "kilt", str(path), "--db", str(db), "--memory-limit", "abc"]) == 2
    assert capsys.readouterr().err == ("workbench import: error: --memory-limit 'abc': expected a size such as "
                                       "512MB or 8GB\n")
    assert not db.exists()
    assert main(["import", "kilt", str(path), "--db", str(db), "--memory-limit", "64MB", "--no-progress"]) == 0


@pytest.mark.parametrize("dup, expected", [
    (page("11", "Bo Lind again", ["Bo Lind again", "x"]), r"line 9: duplicate page id '11' \(first at line 2\)"),
    (page("99", "Cara", ["Cara", "Cara again."]), r"line 9: duplicate page title 'Cara' \(first at line 3\)"),
])
def test_duplicate_kilt_pages_are_told_and_skippable(con, tmp_path, dup, expected):
    path = write_lines(tmp_path / "kilt.jsonl", KILT + [dup])
    with pytest.raises(ValueError, match=rf"kilt\.jsonl {expected}; pass --skip-bad"):
        import_kilt(con, path, progress=False)
    assert counts(con)["entities"] == 0
    result = import_kilt(con, path, progress=False, skip_bad=True, batch_rows=3)
    clean = store.connect(":memory:")
    expected_counts = import_kilt(clean, write_lines(tmp_path / "clean.jsonl", KILT), progress=False)
    for key in ("entities", "passages", "anchors", "resolved_anchors", "edges"):
        assert result[key] == expected_counts[key], key
    assert (result["lines"], result["skipped"]) == (9, 1)
    assert con.execute("SELECT count(*) FROM passages").fetchone()[0] == expected_counts["passages"]
    assert con.execute("SELECT count(*) FROM entities").fetchone()[0] == expected_counts["entities"]
    (line, error), = con.execute("SELECT line, error FROM skipped_lines").fetchall()
    assert line == 9 and "duplicate page" in error


# ------------------------------------------------------------------ issue 39: one source however it is stored

def stored_as(data: bytes, how: str) -> tuple[bytes, str]:
    """``data`` (UTF-8 lines) stored another way: (its bytes, the file name's suffix)."""
    return {"gz": (gzip.compress(data), ".gz"), "bz2": (bz2.compress(data), ".bz2"), "xz": (lzma.compress(data), ".xz"),
            "crlf": (data.replace(b"\n", b"\r\n"), ""), "utf16": (data.decode().encode("utf-16"), ""),
            "bom": (BOM + data, ""), "blank-lines": (data.replace(b"\n", b"\n\n"), ""),
            "no-last-line-end": (data.rstrip(b"\n"), "")}[how]


@pytest.mark.parametrize("how", ["gz", "crlf", "bz2", "xz", "utf16", "bom", "blank-lines"])
def test_the_same_kilt_source_stored_another_way_is_refused(con, tmp_path, capsys, how):
    """Regression (issue 39): the same KILT source as .gz or with CRLF line ends was imported a second
    time, doubling every passage and anchor (22,866 -> 45,732 -> 68,598) with exit 0."""
    path = write_lines(tmp_path / "kilt.jsonl", KILT)
    first = import_kilt(con, path, progress=False)
    before = counts(con)
    data, suffix = stored_as(path.read_bytes(), how)
    other = tmp_path / f"other.jsonl{suffix}"
    other.write_bytes(data)
    with pytest.raises(AlreadyImported, match=r"other\.jsonl.*: already in this store \(import 0 of .*kilt\.jsonl "
                                              r"at .*, 8 lines\) with the same content \(compared after decompression, "
                                              r"decoding and line-end normalisation\); .* pass --append"):
        import_kilt(con, other, progress=False)
    assert counts(con) == before
    again = import_kilt(con, other, progress=False, append=True)  # the user says so: imported, as the file says
    assert (again["passages"], again["anchors"], again["entities"]) == (first["passages"], first["anchors"], 0)
    db = str(tmp_path / "cli.duckdb")
    assert main(["import", "kilt", str(path), "--db", db, "--no-progress"]) == 0
    capsys.readouterr()
    assert main(["import", "kilt", str(other), "--db", db, "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "with the same content" in err


def test_wiki18_as_gz_and_a_wikidata5m_set_with_crlf_are_refused(con, tmp_path):
    wiki = write_lines(tmp_path / "psgs.jsonl", [{"id": str(i), "contents": f'"T{i % 3}"\nText {i}.'}
                                                 for i in range(9)])
    assert import_wiki18(con, wiki, progress=False)["passages"] == 9
    packed = tmp_path / "psgs.jsonl.gz"
    packed.write_bytes(gzip.compress(wiki.read_bytes()))
    before = counts(con)
    with pytest.raises(AlreadyImported, match=r"psgs\.jsonl\.gz: already in this store .* with the same content"):
        import_wiki18(con, packed, progress=False)
    triples = write_lines(tmp_path / "t.txt", ["Q1\tP1\tQ2", "Q2\tP1\tQ3"])
    aliases = write_lines(tmp_path / "a.txt", ["Q1\tOne", "Q2\tTwo"])
    import_wikidata5m(con, triples, aliases, progress=False)
    before = counts(con)
    crlf = {}
    for f in (triples, aliases):
        crlf[f] = tmp_path / f"crlf-{f.name}"
        crlf[f].write_bytes(f.read_bytes().replace(b"\n", b"\r\n"))
    with pytest.raises(AlreadyImported, match=r"crlf-t\.txt: already in this store .* with the same content"):
        import_wikidata5m(con, crlf[triples], crlf[aliases], progress=False)
    assert counts(con) == before
    # the same triples with another alias file, or without one, are another import
    assert import_wikidata5m(con, crlf[triples], progress=False)["triples"] == 2


def test_content_is_hashed_a_second_time_only_when_an_earlier_import_starts_alike(con, tmp_path, monkeypatch):
    """The refusal comes before anything is parsed, and costs a second pass over the file only when an
    earlier import's content starts as this file's (its first HEAD_BYTES, here 300)."""
    from workbench.kg import input_files, sources

    monkeypatch.setattr(input_files, "HEAD_BYTES", 300)
    passes = []
    real = sources.content_digest
    monkeypatch.setattr(sources, "content_digest", lambda path, *a: passes.append(path.name) or real(path, *a))
    import_kilt(con, write_lines(tmp_path / "a.jsonl", KILT[:4]), progress=False)
    import_kilt(con, write_lines(tmp_path / "b.jsonl", KILT[4:]), progress=False)  # starts otherwise
    assert passes == []
    longer = write_lines(tmp_path / "c.jsonl", KILT[:4] + [page("20", "Dee", ["Dee", "A town."])])
    assert import_kilt(con, longer, progress=False)["entities"] == 1  # starts alike, is not the same
    assert passes == ["c.jsonl"]
    parse_calls = []
    monkeypatch.setattr(sources, "_parse_kilt", lambda raw: parse_calls.append(1))
    packed = tmp_path / "a.jsonl.gz"
    packed.write_bytes(gzip.compress((tmp_path / "a.jsonl").read_bytes()))
    with pytest.raises(AlreadyImported, match=r"a\.jsonl\.gz: already in this store \(import 0 of .*a\.jsonl"):
        import_kilt(con, packed, progress=False)
    assert passes == ["c.jsonl", "a.jsonl.gz"] and parse_calls == []  # refused before any line was parsed


def big_page(size: int) -> dict:
    return page("99", "Big", ["Big", "x" * size])


@pytest.mark.parametrize("suffix", ["", ".gz"])
def test_an_oversized_line_is_refused_before_it_is_read_whole(con, tmp_path, suffix):
    """Regression (issue 39): a 200 MB line cost ~5x its size in memory; a line longer than
    max_line_bytes is now refused (or skipped) after reading at most about the limit of it."""
    import tracemalloc

    data = write_lines(tmp_path / "k", KILT[:2] + [big_page(8_000_000)] + KILT[2:]).read_bytes()
    path = tmp_path / f"kilt.jsonl{suffix}"
    path.write_bytes(gzip.compress(data) if suffix else data)
    before = counts(con)
    tracemalloc.start()
    try:
        with pytest.raises(ValueError, match=r"kilt\.jsonl(\.gz)? line 3: a line of 8,000,0\d\d bytes, longer than "
                                             r"the limit of 1,000,000 \(max_line_bytes, ours\); expected one record "
                                             r"per line: pass --max-line-bytes N .* or --skip-bad"):
            import_kilt(con, path, progress=False, max_line_bytes=1_000_000)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 5_000_000, peak  # the line is 8 MB: never held whole
    assert counts(con) == before
    result = import_kilt(con, path, progress=False, max_line_bytes=1_000_000, skip_bad=True)
    assert (result["lines"], result["skipped"], result["entities"]) == (9, 1, 8)
    (line, error), = con.execute("SELECT line, error FROM skipped_lines").fetchall()
    assert line == 3 and "longer than the limit" in error
    # a limit that allows it imports it
    assert import_kilt(store.connect(":memory:"), path, progress=False, max_line_bytes=9_000_000)["entities"] == 9


def test_max_line_bytes_on_the_command_line(tmp_path, capsys):
    path = write_lines(tmp_path / "k.jsonl", KILT[:2] + [big_page(5000)])
    db = tmp_path / "s.duckdb"
    assert main(["import", "kilt", str(path), "--db", str(db), "--max-line-bytes", "0"]) == 2
    assert "--max-line-bytes 0: expected a positive number of bytes" in capsys.readouterr().err
    assert not db.exists()  # checked before the store is created
    assert main(["import", "kilt", str(path), "--db", str(db), "--max-line-bytes", "4000", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "k.jsonl line 3: a line of 5,0" in err and "limit of 4,000" in err
    assert main(["import", "kilt", str(path), "--db", str(db), "--max-line-bytes", "6000", "--no-progress"]) == 0


@pytest.mark.slow
def test_a_200_mb_line_is_refused_in_bounded_memory_at_the_default_limit(tmp_path):
    """The issue's case at full size: a 200 MB line under the default MAX_LINE_BYTES (64 MiB)."""
    from workbench.kg.input_files import MAX_LINE_BYTES

    path = tmp_path / "kilt.jsonl"
    with open(path, "wb") as f:
        f.write(write_lines(tmp_path / "k", KILT[:2]).read_bytes())
        f.write(b'{"wikipedia_id": "99", "wikipedia_title": "Big", "text": ["' + b"x" * 200_000_000 + b'"], '
                b'"anchors": []}\n')
    con = store.connect(":memory:")
    expected = rf"kilt\.jsonl line 3: a line of 200,000,0\d\d bytes, longer than the limit of {MAX_LINE_BYTES:,}"
    with rss_growth(0.01) as growth, pytest.raises(ValueError, match=expected):
        import_kilt(con, path, progress=False)
    growth_mb = growth[0]
    print(f"\n200 MB line: peak RSS growth {growth_mb:.0f} MB")
    assert growth_mb < 2.5 * MAX_LINE_BYTES / 2**20  # read whole it was ~5x 200 MB


@pytest.mark.parametrize("cut", [40, 75])
def test_a_file_cut_short_is_told_as_such(con, tmp_path, cut):
    data = write_lines(tmp_path / "k", KILT).read_bytes()
    path = tmp_path / "kilt.jsonl"
    path.write_bytes(data[:len(data) * cut // 100])
    before = counts(con)
    with pytest.raises(ValueError, match=r"kilt\.jsonl line \d: expected a JSON object: not valid JSON .*\(the "
                                         r"file's last line, without a line end: is the file cut short\?\); pass "
                                         r"--skip-bad"):
        import_kilt(con, path, progress=False)
    assert counts(con) == before
    # a tab-separated line cut short can still parse: without its line end it is refused
    triples = tmp_path / "t.txt"
    triples.write_bytes(b"Q1\tP1\tQ2\nQ2\tP1\tQ3")  # Q3 may have been Q35
    with pytest.raises(ValueError, match=r"t\.txt line 2: expected a line end after the last line: is the file cut "
                                         r"short\? .* add a line end if the file is whole, or pass --skip-bad"):
        import_wikidata5m(con, triples, progress=False)
    assert counts(con) == before
    assert import_wikidata5m(con, triples, progress=False, skip_bad=True)["triples"] == 1
