"""The synthetic KILT replica (issue 16): KILT's layout, deterministic by seed, imported into a walkable graph."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest

from workbench.cli import main
from workbench.kg.kilt_replica import ANCHOR_KEYS, KILT_KEYS, replica_pages, write_replica
from workbench.kg.sources import import_kilt
from workbench.kg.walks import CSRGraph, random_walks

# Field -> type of a real KILT page (KILT README, "Structure of each record"; the sub-fields' types
# from the Hugging Face kilt_wikipedia card).
PAGE_TYPES = {"_id": str, "wikipedia_id": str, "wikipedia_title": str, "text": list, "anchors": list,
              "categories": str, "history": dict, "wikidata_info": dict}
HISTORY_TYPES = {"pageid": int, "parentid": int, "revid": int, "pre_dump": bool, "timestamp": str, "url": str}
WIKIDATA_TYPES = {"wikidata_id": str, "wikidata_label": str, "description": str, "enwikiquote_title": str,
                  "wikipedia_title": str, "aliases": dict}
ANCHOR_TYPES = {"paragraph_id": int, "start": int, "end": int, "text": str, "href": str, "wikipedia_title": str,
                "wikipedia_id": str}


def test_lines_have_kilts_keys_types_and_offsets(tmp_path):
    path = tmp_path / "r.jsonl.gz"
    stats = write_replica(path, 400, seed=3)
    with gzip.open(path, "rt", encoding="utf-8") as f:
        pages = [json.loads(line) for line in f]
    assert len(pages) == stats["pages"] == 400 and sum(len(p["anchors"]) for p in pages) == stats["anchors"]
    red = 0
    for page in pages:
        assert set(page) == set(KILT_KEYS) == set(PAGE_TYPES)
        assert {k: type(v) for k, v in page.items()} == PAGE_TYPES
        assert {k: type(page["history"][k]) for k in HISTORY_TYPES} == HISTORY_TYPES
        assert {k: type(page["wikidata_info"][k]) for k in WIKIDATA_TYPES} == WIKIDATA_TYPES
        assert page["_id"] == page["wikipedia_id"] == str(page["history"]["pageid"])
        assert page["text"][0] == page["wikipedia_title"] + "\n" and all(t.endswith("\n") for t in page["text"])
        for a in page["anchors"]:
            assert set(a) <= set(ANCHOR_KEYS) and all(type(a[k]) is ANCHOR_TYPES[k] for k in a)
            assert page["text"][a["paragraph_id"]][a["start"]:a["end"]] == a["text"]
            red += "wikipedia_id" not in a
    titles = [p["wikipedia_title"] for p in pages]
    assert len(set(titles)) == len(titles) and len({p["wikipedia_id"] for p in pages}) == len(pages)
    # Real-dump proportions, loosely: ~6.3 KB and ~17 anchors a page, a few red links, noise pages.
    assert 4_500 < stats["bytes_per_page"] < 8_500 and 12 < stats["anchors_per_page"] < 24
    assert 0 < red < 0.1 * stats["anchors"]
    assert any(t.isdigit() for t in titles) and any(t.startswith("List of ") for t in titles)
    assert any(t.startswith("Section::::") for p in pages for t in p["text"])


def test_same_seed_same_bytes_other_seed_other_pages(tmp_path):
    a, b, c = tmp_path / "a.jsonl", tmp_path / "b.jsonl", tmp_path / "c.jsonl"
    write_replica(a, 200, seed=7)
    write_replica(b, 200, seed=7)
    write_replica(c, 200, seed=8)
    assert a.read_bytes() == b.read_bytes() != c.read_bytes()
    assert next(replica_pages(200, seed=7)) == json.loads(a.read_text().splitlines()[0])


def test_bad_arguments_are_named(tmp_path):
    with pytest.raises(ValueError, match="pages: expected an integer >= 2"):
        write_replica(tmp_path / "x.jsonl", 1)
    with pytest.raises(ValueError, match="OUT .* is a folder"):
        write_replica(tmp_path, 10)


def test_500_pages_import_into_a_graph_with_chains(con, tmp_path):
    path = tmp_path / "r.jsonl"
    stats = write_replica(path, 500, seed=0)
    result = import_kilt(con, path, progress=False)
    assert result["lines"] == result["entities"] == 500 and result["skipped"] == 0
    assert result["passages"] == stats["paragraphs"] and result["anchors"] == stats["anchors"]
    # Every link but the red ones resolves; edges carry cue labels as well as the generic one.
    assert 0.9 * result["anchors"] < result["resolved_anchors"] < result["anchors"]
    assert result["edges"] > 5 * 500 and result["edges_by_rule"]["sentence"] > 0.3 * result["edges"]
    kinds = dict(con.execute("SELECT kind, count(*) FROM entities GROUP BY kind").fetchall())
    assert kinds["year"] > 0 and kinds["list"] > 0 and kinds["entity"] > 400
    graph = CSRGraph.from_store(con)
    nodes, rels = random_walks(graph, 1000, hops=3, seed=0)
    assert (nodes[:, 3] >= 0).mean() > 0.95  # almost every 3-hop walk completes (few dead ends)
    assert len(np.unique(nodes[:, 3])) > 100


def test_cli_writes_a_replica_the_importer_reads(tmp_path, capsys):
    out, db = tmp_path / "r.jsonl.gz", str(tmp_path / "s.duckdb")
    assert main(["kilt-replica", str(out), "--pages", "120", "--seed", "2", "--no-progress"]) == 0
    assert json.loads(capsys.readouterr().out)["pages"] == 120
    assert main(["import", "kilt", str(out), "--db", db, "--no-progress"]) == 0
    assert json.loads(capsys.readouterr().out)["entities"] == 120
