"""A synthetic replica of the KILT knowledge source, in KILT's own JSON-lines layout (issue 16).

KILT's ``kilt_knowledgesource.json`` (34.76 GiB, 5,903,530 pages, the 2019-08-01 Wikipedia dump)
cannot be downloaded here, so the importer's scale is proved on this replica instead. Each line is
one page with the fields and types real KILT pages carry (KILT README, "Structure of each record";
the Hugging Face ``kilt_wikipedia`` card for the sub-fields):

* ``_id`` and ``wikipedia_id`` (the page id, a string), ``wikipedia_title``;
* ``text``: the paragraphs, each ending in ``"\\n"``; the first is the title, section headings
  read ``"Section::::History.\\n"`` and list items ``"BULLET::::- ...\\n"``, as KILT writes them;
* ``anchors``: ``{paragraph_id, start, end, text, href, wikipedia_title, wikipedia_id}`` with
  character offsets into the paragraph; an anchor to a page the dump lacks (a red link) has
  ``href`` only, no target id or title;
* ``categories`` (one comma-separated string), ``history`` (``pageid``, ``parentid``, ``revid``,
  ``pre_dump``, ``timestamp``, ``url``) and ``wikidata_info`` (``wikidata_id``, ``wikidata_label``,
  ``description``, ``aliases``, ...), which the importer ignores but which make a line the size of
  a real one.

The sizes are ours, chosen so that a page averages about the real dump's 6.3 KB a line (34.76 GiB
/ 5.9M pages) and about 17 anchors (the ~100M anchors of the real file): a log-normal number of
body paragraphs and of words per paragraph, anchors whose targets follow a power law over page
ids (a few pages, like real hubs, are linked from everywhere), half of them after one of the
importer's relation cue phrases so edges get labels. About 1 in 40 pages is a year page and 1 in
80 a "List of ..." page, Wikipedia's usual noise. Page ``i`` depends only on ``(seed, i, pages)``,
so the file is written one line at a time in constant memory and is byte-identical for a seed.

Example:
    >>> import json
    >>> first = next(replica_pages(1000, seed=0))
    >>> sorted(first) == sorted(KILT_KEYS) and first["text"][0] == first["wikipedia_title"] + "\\n"
    True
    >>> json.dumps(first) == json.dumps(next(replica_pages(1000, seed=0)))
    True
"""

from __future__ import annotations

import gzip
import json
import math
import random
from pathlib import Path
from typing import Iterator
from urllib.parse import quote

from workbench import paths
from workbench.kg.names import OPEN_SYLLABLES
from workbench.kg.sources import RELATION_CUES

KILT_KEYS = ("_id", "wikipedia_id", "wikipedia_title", "text", "anchors", "categories", "history", "wikidata_info")
ANCHOR_KEYS = ("paragraph_id", "start", "end", "text", "href", "wikipedia_title", "wikipedia_id")
REAL_KILT_PAGES = 5_903_530  # KILT README: ks.get_num_pages()
REAL_KILT_BYTES = 34.76 * 2**30  # KILT README: kilt_knowledgesource.json (34.76GiB)

# The replica's shape (ours; see the module docstring for what it aims at).
BODY_PARAGRAPHS_MU, BODY_PARAGRAPHS_SIGMA = 1.7, 0.9  # log-normal body paragraphs a page: median 5.5
WORDS_MU, WORDS_SIGMA = 3.7, 0.7  # log-normal words a paragraph: median 40
ANCHORS_PER_SENTENCE = 0.55  # chance that a sentence ends in a link
CUE_SHARE = 0.5  # share of links introduced by a relation cue phrase ("directed by")
RED_LINK_SHARE = 0.04  # share of links to pages the dump does not hold
HUB_EXPONENT = 2.5  # target = pages * u**HUB_EXPONENT: low ids are linked most (a power law)
YEAR_EVERY, LIST_EVERY = 40, 80  # one year page in 40, one list page in 80
YEARS = 1020  # year pages 1000-2019 at most, as Wikipedia has one per year
SECTION_SHARE, BULLET_SHARE = 0.15, 0.1

_WORDS = ("the of and in to a was is for on as by with from at his her an which that it first also new "
          "after were are one two its city first known later during film river album town family school "
          "season war century party company north south team area between under where built since "
          "became most years other series state group music national early played region second time "
          "work small main old several local often made river's people former public local west east "
          "number system group life including").split()
_SUFFIXES = ("", "", "", "", " River", " (film)", " (album)", " County", " Castle", " Company", " (band)",
             " Island", " (novel)", " Bridge")
_SECTIONS = ("History", "Career", "Early life", "Geography", "Reception", "Personal life", "Legacy",
             "Track listing", "Plot", "Demographics", "See also", "References")
_CATEGORIES = ("Living people", "Populated places", "English-language films", "Rivers", "Albums",
               "Companies established in 1990", "Castles", "Islands", "Novels", "Bridges")
_CUES = tuple(RELATION_CUES)
_CODE_SPACE = len(OPEN_SYLLABLES) ** 4  # 31.6M four-syllable words: room for every KILT page
_SCRAMBLE = 7_368_787  # coprime with _CODE_SPACE (75**4 = 3**4 * 5**8): i -> code is a bijection


def _name(i: int, seed: int) -> str:
    """A distinct invented word for page ``i`` (a scrambled base-75 code of four open syllables)."""
    code = (i * _SCRAMBLE + seed * 1_000_003 + 12_345) % _CODE_SPACE
    out = []
    for _ in range(4):
        code, digit = divmod(code, len(OPEN_SYLLABLES))
        out.append(OPEN_SYLLABLES[digit])
    return "".join(out).capitalize()


def page_title(i: int, pages: int, seed: int = 0) -> str:
    """The title of replica page ``i`` of ``pages``: a year, a "List of ..." page or an entity.

    Example:
        >>> [page_title(i, 1000) for i in (0, 1, 2)]
        ['1000', 'List of Digamigi', 'Nugazilu (album)']
    """
    if not 0 <= i < pages <= _CODE_SPACE:
        raise ValueError(f"page {i}: expected 0 <= i < pages <= {_CODE_SPACE}, got pages={pages}")
    if i % YEAR_EVERY == 0 and i // YEAR_EVERY < YEARS:
        return str(1000 + i // YEAR_EVERY)
    name = _name(i, seed)
    if i % LIST_EVERY == 1:
        return f"List of {name}"
    return name + _SUFFIXES[(i * 31 + seed) % len(_SUFFIXES)]


def page_id(i: int) -> str:
    """Page ``i``'s ``wikipedia_id`` (a string, as in KILT; ours: sparse like real page ids).

    Example:
        >>> page_id(0), page_id(2)
        ('12', '38')
    """
    return str(12 + 13 * i)


def _sentence(rng: random.Random, n_words: int) -> str:
    words = rng.choices(_WORDS, k=max(n_words, 2))
    return " ".join(words).capitalize()


def _target(rng: random.Random, i: int, pages: int) -> int:
    """A link target other than ``i``, power-law over page ids (hubs first)."""
    j = int(pages * rng.random() ** HUB_EXPONENT)
    return j if j != i else (j + 1) % pages


def _paragraph(rng: random.Random, i: int, pages: int, seed: int, title: str, p: int,
               anchors: list) -> str:
    """One body paragraph of sentences, some ending in a link (appended to ``anchors``)."""
    n_words = max(4, int(rng.lognormvariate(WORDS_MU, WORDS_SIGMA)))
    text = ""
    while n_words > 0:
        k = min(n_words, rng.randint(8, 22))
        n_words -= k
        # Half the paragraphs open with the page's own name as the subject, as Wikipedia's do.
        sentence = f"{title} {_sentence(rng, k).lower()}" if not text and rng.random() < 0.5 else _sentence(rng, k)
        if text:
            text += " "
        if rng.random() < ANCHORS_PER_SENTENCE:
            j = _target(rng, i, pages)
            cue = rng.choice(_CUES) if rng.random() < CUE_SHARE else rng.choice(("near", "with", "and"))
            red = rng.random() < RED_LINK_SHARE
            surface = f"{_name(pages + j, seed)} Hall" if red else page_title(j, pages, seed)
            text += f"{sentence} {cue} "
            anchor = {"paragraph_id": p, "start": len(text), "end": len(text) + len(surface), "text": surface,
                      "href": quote(surface)}
            if not red:
                anchor.update(wikipedia_title=surface, wikipedia_id=page_id(j))
            anchors.append(anchor)
            text += surface + "."
        else:
            text += sentence + "."
    return text + "\n"


def replica_page(i: int, pages: int, seed: int = 0) -> dict:
    """Replica page ``i`` of ``pages`` as KILT stores it (a dict of :data:`KILT_KEYS`).

    Example:
        >>> page = replica_page(5, 100)
        >>> all(page["text"][a["paragraph_id"]][a["start"]:a["end"]] == a["text"] for a in page["anchors"])
        True
    """
    rng = random.Random((seed << 40) | i)
    title, wid = page_title(i, pages, seed), page_id(i)
    text, anchors = [title + "\n"], []
    for _ in range(1 + int(rng.lognormvariate(BODY_PARAGRAPHS_MU, BODY_PARAGRAPHS_SIGMA))):
        r = rng.random()
        if r < SECTION_SHARE and len(text) > 1:
            text.append(f"Section::::{rng.choice(_SECTIONS)}.\n")
        elif r < SECTION_SHARE + BULLET_SHARE:
            text.append(f"BULLET::::- {_sentence(rng, rng.randint(3, 9))}.\n")
        text.append(_paragraph(rng, i, pages, seed, title, len(text), anchors))
    revid = 900_000_000 + 7 * i
    return {
        "_id": wid, "wikipedia_id": wid, "wikipedia_title": title, "text": text, "anchors": anchors,
        "categories": ",".join(rng.sample(_CATEGORIES, rng.randint(1, 3))),
        "history": {"pageid": int(wid), "parentid": revid - 3, "revid": revid, "pre_dump": True,
                    "timestamp": f"2019-0{1 + i % 7}-{10 + i % 18}T12:{i % 60:02d}:00Z",
                    "url": f"https://en.wikipedia.org/w/index.php?title={quote(title.replace(' ', '_'))}"
                           f"&oldid={revid}"},
        "wikidata_info": {"wikidata_id": f"Q{100 + 3 * i}", "wikidata_label": title,
                          "description": _sentence(rng, rng.randint(3, 8)).lower(),
                          "enwikiquote_title": "", "wikipedia_title": title,
                          "aliases": {"alias": [title.upper()] if rng.random() < 0.3 else []}},
    }


def replica_pages(pages: int, seed: int = 0) -> Iterator[dict]:
    """Pages ``0 .. pages-1`` of the replica, one at a time (nothing is kept between pages).

    Example:
        >>> [p["wikipedia_title"] for p in replica_pages(3)]
        ['1000', 'List of Digamigi', 'Nugazilu (album)']
    """
    if not isinstance(pages, int) or pages < 2:
        raise ValueError(f"pages: expected an integer >= 2, got {pages!r}")
    for i in range(pages):
        yield replica_page(i, pages, seed)


def write_replica(out: str | Path, pages: int, seed: int = 0, progress: bool = False, force: bool = False) -> dict:
    """Write the replica as KILT JSON lines to ``out`` (``.gz``: gzip, which the importer reads).

    Streams: each page is written as soon as it is made. Returns the pages, anchors, paragraphs,
    bytes of JSON (uncompressed) and bytes per page beside the real dump's.

    Example:
        >>> import os, tempfile
        >>> f = os.path.join(tempfile.mkdtemp(), "r.jsonl")
        >>> s = write_replica(f, 50)
        >>> s["pages"], os.path.getsize(f) == s["bytes"]
        (50, True)
    """
    from tqdm import tqdm

    out = paths.output_file(out, "OUT", force=force)
    opener = (lambda p: gzip.open(p, "wb", compresslevel=3)) if out.suffix == ".gz" else (lambda p: open(p, "wb"))
    n_bytes = n_anchors = n_paragraphs = 0
    with paths.atomic_output(out) as tmp, opener(tmp) as f:
        for page in tqdm(replica_pages(pages, seed), total=pages, unit="page", disable=not progress,
                         mininterval=1.0):
            line = (json.dumps(page, ensure_ascii=False) + "\n").encode("utf-8")
            f.write(line)
            n_bytes += len(line)
            n_anchors += len(page["anchors"])
            n_paragraphs += len(page["text"])
    real = REAL_KILT_BYTES / REAL_KILT_PAGES
    return {"file": str(out), "pages": pages, "seed": seed, "paragraphs": n_paragraphs, "anchors": n_anchors,
            "bytes": n_bytes, "bytes_per_page": round(n_bytes / pages, 1), "real_kilt_bytes_per_page": round(real, 1),
            "anchors_per_page": round(n_anchors / pages, 2),
            "paragraphs_per_page": round(n_paragraphs / pages, 2),
            "pages_for_real_size": math.ceil(REAL_KILT_BYTES / max(n_bytes / pages, 1))}
