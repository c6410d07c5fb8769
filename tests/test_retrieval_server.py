"""The Search-R1-compatible retrieval server and client, on loopback with real indexes."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request

import pytest

from test_search import make_store
from workbench.search.client import RemoteRetriever, parse_document
from workbench.search.server import make_server, running_server, url_of
from workbench.search.tool import SearchTool

QUERIES = ["Who directed Grey Tide?", "capital of Kolomo", "violinist born in a river port", "zzzq"]


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    path = tmp_path_factory.mktemp("srv") / "world.duckdb"
    make_store(path).close()
    return path


def post(url: str, body) -> tuple[int, dict]:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


@pytest.mark.parametrize("kind", ["bm25", "dense"])
def test_remote_hits_equal_local_hits(db, kind):
    local = SearchTool(db, index=kind, topk=3, cache=False)
    expected = local.search(QUERIES)
    local.use_cache = True  # the server's cache starts empty: every remote query is searched afresh
    with running_server(local) as url:
        assert url.startswith("http://127.0.0.1:") and url.endswith("/retrieve")
        remote = RemoteRetriever(url.removesuffix("/retrieve"), topk=3)
        got = remote.search(QUERIES)
        assert got == expected  # ids, entity ids, titles, texts and scores, exactly
        assert [remote.render(r) for r in got] == [local.render(r) for r in expected]
        assert remote.search(QUERIES, k=1) == [r[:1] for r in expected]
        assert remote.cache_stats()["misses"] == 8


def test_wire_format_is_search_r1s(db):
    tool = SearchTool(db, index="bm25", topk=3)
    with running_server(tool) as url:
        status, body = post(url, {"queries": ["Grey Tide", "Mirrel"], "topk": 2, "return_scores": True})
        assert status == 200 and len(body["result"]) == 2
        item = body["result"][0][0]
        assert set(item) == {"document", "score"} and isinstance(item["score"], float)
        assert item["document"]["contents"].startswith('"Grey Tide"\nGrey Tide is a drama film')
        assert item["document"]["id"] == str(item["document"]["id"]) and len(body["result"][0]) == 2
        # Without scores (Search-R1's default) each query gets a plain list of documents.
        status, plain = post(url, {"queries": ["Grey Tide"], "topk": 2})
        assert status == 200 and plain["result"][0] == [r["document"] for r in body["result"][0]]
        status, default_k = post(url, {"queries": ["capital"], "topk": None, "return_scores": False})
        assert status == 200 and len(default_k["result"][0]) == 3
        # Another Search-R1-style client reads titles exactly as the local tool renders them.
        hits = [parse_document(r["document"], r["score"]) for r in body["result"][1]]
        assert hits == tool.search(["Mirrel"], k=2)[0]


def test_bad_requests_get_400_and_the_server_keeps_serving(db):
    with running_server(SearchTool(db, index="bm25")) as url:
        assert post(url, b"{not json")[0] == 400
        code, err = post(url, {"queries": "Grey Tide"})
        assert code == 400 and "list of strings" in err["error"]
        assert post(url, {"queries": ["x"], "topk": 0})[0] == 400
        assert post(url, {"queries": ["x"], "topk": "3"})[0] == 400
        assert post(url.replace("/retrieve", "/search"), {"queries": ["x"]})[0] == 404
        with urllib.request.urlopen(url.replace("/retrieve", "/health"), timeout=10) as r:
            assert json.loads(r.read()) == {"status": "ok", "index": "bm25", "topk": 3, "passages": 15}
        assert post(url, {"queries": ["Grey Tide"], "topk": 1})[0] == 200


def test_concurrent_clients_get_the_same_answers(db):
    tool = SearchTool(db, index="bm25")
    expected = SearchTool(db, index="bm25").search(QUERIES)
    server = make_server(tool, "127.0.0.1", 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    results = [None] * 6

    def ask(i):
        results[i] = RemoteRetriever(url_of(server), cache=False).search(QUERIES)

    workers = [threading.Thread(target=ask, args=(i,)) for i in range(6)]
    try:
        for w in workers:
            w.start()
        for w in workers:
            w.join(timeout=20)
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
    assert results == [expected] * 6


def test_client_errors_are_clear():
    server = make_server(SearchTool(make_store(":memory:")), "127.0.0.1", 0)
    url = url_of(server)
    server.server_close()  # nothing listens there any more
    with pytest.raises(ValueError, match="cannot reach retrieval server"):
        RemoteRetriever(url, timeout=5).search(["x"])
    with pytest.raises(ValueError, match="'contents'"):
        parse_document({"id": "1"})
    assert parse_document({"id": "wiki-7", "contents": "no quotes\nbody\nmore"}).title == "no quotes"
