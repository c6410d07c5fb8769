"""Train and eval search a retrieval server as they search the store (issue 16, search.url)."""

from __future__ import annotations

import pytest
from test_evaluate import _store_with_questions, tiny_model_dir  # noqa: F401 (fixture)
from test_rollout import EASY, HARD, _kw, con, policy, tool  # noqa: F401 (fixtures)
from test_sources import KILT, write_lines
from workbench import store
from workbench.cli import main
from workbench.config import preset
from workbench.evaluate import outcomes
from workbench.method.score import score_trajectory
from workbench.method.path_support import EvidenceGraph, PathSupportParams
from workbench.kg.sources import import_kilt, import_wiki18
from workbench.policy.rollout import rollout
from workbench.search import wire
from workbench.search.client import RemoteRetriever
from workbench.search.retriever import make_retriever
from workbench.search.server import running_server
from workbench.search.tool import Hit, Retriever, SearchTool


@pytest.fixture
def search_r1_wire(monkeypatch):
    """Make ``running_server`` answer as Search-R1's server over wiki-18 does: each document is the
    corpus line alone, ``{"id", "contents"}``, with no ``entity_id`` (nor ``title``/``text``)."""
    monkeypatch.setattr(wire, "document", lambda h: {"id": str(h.passage_id), "contents": h.contents})


class Documents(Retriever):
    """A server's index reduced to one answer: every query gets ``docs``."""

    def __init__(self, docs: list[Hit]):
        super().__init__(topk=len(docs), cache=False)
        self.docs = docs  # not ``hits``: that is the cache's counter

    def _search(self, queries, k):
        return [self.docs[:k] for _ in queries]


def _remote(url: str, con, topk: int):  # noqa: F811 (con: a store, not the fixture)
    """The retriever train and eval build for ``search.url`` = ``url`` over ``con``."""
    return make_retriever(con, preset("smoke", **{"search.url": url.removesuffix("/retrieve"),
                                                  "search.topk": topk}).search)


@pytest.fixture
def kilt_store(tmp_path):
    """A KILT store with wiki-18 passages imported after it, as ``workbench data paper`` builds one."""
    con = store.connect(tmp_path / "kilt.duckdb")  # noqa: F811
    import_kilt(con, write_lines(tmp_path / "kilt.jsonl", KILT), progress=False)
    import_wiki18(con, write_lines(tmp_path / "psgs.jsonl", [
        {"id": "0", "contents": '"Alba"\nAlba premiered in 1990.'},
        {"id": "1", "contents": '"Café Noir"\nCafé Noir lies on a river.'},
        {"id": "2", "contents": '"Zed River"\nThe Zed flows north.'}]), progress=False)
    yield con
    con.close()


def test_make_retriever_follows_search_url(con):  # noqa: F811 (the imported fixture)
    assert isinstance(make_retriever(con, preset("smoke").search), SearchTool)
    remote = make_retriever(con, preset("smoke", **{"search.url": "http://127.0.0.1:9"}).search)
    assert isinstance(remote, RemoteRetriever) and remote.url == "http://127.0.0.1:9/retrieve"


def test_rollouts_through_the_server_equal_local_ones_entity_ids_included(policy, tool):  # noqa: F811
    local = rollout(policy, tool, [EASY, HARD], 2, temperature=0, **_kw())
    with running_server(tool) as url:
        remote_tool = make_retriever(None, preset("smoke", **{"search.url": url.removesuffix("/retrieve"),
                                                              "search.topk": 2}).search)
        remote = rollout(policy, remote_tool, [EASY, HARD], 2, temperature=0, **_kw())
    assert [t.response_ids for t in remote] == [t.response_ids for t in local]
    assert [t.entity_ids for t in remote] == [t.entity_ids for t in local]
    assert remote[2].entity_ids[0] == 1 and remote[2].passage_ids[0] == 11
    # path support scores the remote trajectory exactly as the local one (Eqs. 8-9)
    titles = {1: "Kavimo Rutel", 2: "Dagiju", 3: "Lorentia"}
    graph = EvidenceGraph({(1, 2): 1.0, (2, 3): 1.0}, PathSupportParams())
    got = score_trajectory(remote[2], ["Lorentia"], titles, graph)
    assert got == score_trajectory(local[2], ["Lorentia"], titles, graph)
    assert got.path == [1, 2, 3] and got.passed


def test_eval_takes_set_overrides(tmp_path, tiny_model_dir, capsys):  # noqa: F811
    db = str(tmp_path / "s.duckdb")
    _store_with_questions(db).close()
    base = ["eval", "--db", db, "--model", str(tiny_model_dir), "--dataset", "tinyworld", "--preset", "smoke"]
    assert main(base + ["--set", "rollout.max_turns=1"]) == 0
    eval_id = capsys.readouterr().out.strip().splitlines()[-1]
    con = store.connect(db, read_only=True)  # noqa: F811
    assert (outcomes(con, eval_id).turns == 1).all()  # smoke allows 4: the override reached the rollouts
    con.close()
    assert main(base + ["--set", "rollout.max_turns=0"]) == 2
    assert "config field 'rollout.max_turns'" in capsys.readouterr().err


def test_search_r1_hits_get_the_entity_their_passage_has_in_the_store(kilt_store, search_r1_wire):
    con = kilt_store  # noqa: F811
    titles = dict(con.execute("SELECT title, entity_id FROM entities").fetchall())
    in_store = dict(con.execute("SELECT text, entity_id FROM passages").fetchall())
    served = Documents([Hit(0, None, "Alba", "Alba premiered in 1990.", 9.0),
                        Hit(1, None, "Café Noir", "Café Noir lies on a river.", 8.0),
                        Hit(2, None, "Zed River", "The Zed flows north.", 7.0),
                        Hit(3, None, "Nowhere Land", "A page KILT links to but lacks.", 6.0)])
    with running_server(served) as url:
        assert "entity_id" not in wire.answer(served, wire.parse_request({"queries": ["x"]}))["result"][0][0]
        assert [h.entity_id for h in RemoteRetriever(url).search(["x"], 4)[0]] == [None] * 4  # no store: as before
        hits = _remote(url, con, 4).search(["Where did Alba premiere?", "x"])
    # each wiki-18 hit gets the entity its passage was linked to by the import: KILT's page for a
    # KILT title, the entity the wiki-18 import made for one KILT lacks; an unknown title stays None
    assert [h.entity_id for h in hits[0]] == [in_store[h.text] for h in hits[0][:3]] + [None]
    assert [h.entity_id for h in hits[0]] == [titles["Alba"], titles["Café Noir"], titles["Zed River"], None]
    assert hits[1] == hits[0] and [h.passage_id for h in hits[0]] == [0, 1, 2, 3]
    source = con.execute("SELECT source FROM entities WHERE entity_id = ?", [titles["Zed River"]]).fetchone()
    assert source == ("wiki18",)


def test_entity_ids_the_server_sends_are_kept(kilt_store):
    con = kilt_store  # noqa: F811
    alba = con.execute("SELECT entity_id FROM entities WHERE title = 'Alba'").fetchone()[0]
    served = Documents([Hit(5, 77, "Alba", "Alba, as the server knows it.", 2.0),
                        Hit(6, None, "Alba", "Alba, with no id sent.", 1.0)])
    with running_server(served) as url:  # the workbench's own server: entity_id in each document
        hits = _remote(url, con, 2).search(["Alba"])[0]
    assert [h.entity_id for h in hits] == [77, alba]


def test_a_retriever_whose_store_was_closed_says_so(search_r1_wire):
    con = store.connect(":memory:")  # noqa: F811
    con.execute("INSERT INTO entities VALUES (4, 'Alba', NULL, 'entity', 'kilt')")
    served = Documents([Hit(0, None, "Alba", "Alba premiered in 1990.", 9.0)])
    with running_server(served) as url:
        remote = _remote(url, con, 1)
        assert remote.search(["Alba"])[0][0].entity_id == 4
        con.close()
        with pytest.raises(RuntimeError, match="search.url reads the entity of each hit's title from the store, but "
                                               "the store connection the search tool was opened on is closed"):
            remote.search(["Alba again"])  # a new query: not the cache's answer


def test_rollouts_through_search_r1s_server_get_the_local_entity_ids(policy, tool, con, search_r1_wire):  # noqa: F811
    local = rollout(policy, tool, [EASY, HARD], 2, temperature=0, **_kw())
    with running_server(tool) as url:
        remote = rollout(policy, _remote(url, con, 2), [EASY, HARD], 2, temperature=0, **_kw())
    assert [t.entity_ids for t in remote] == [t.entity_ids for t in local]
    assert remote[2].entity_ids[0] == 1 and remote[2].passage_ids[0] == 11
