"""Property-based tests of the retrieval server's request parsing (issue 12, "Proof").

No input crashes the parser or the server with anything but a clear error: ``parse_body`` only
ever returns a well-formed ``Request`` or raises ``RequestError`` (400 or 413, one line), and a
live server answers every request, valid or not, with JSON and a status from the documented set.
"""

from __future__ import annotations

import http.client
import json
import socket
import urllib.parse
from dataclasses import asdict

import pytest

hypothesis = pytest.importorskip(
    "hypothesis", reason="hypothesis is not installed: add hypothesis to pyproject.toml's pins to run these")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from test_search import make_store  # noqa: E402
from workbench.search.server import running_server  # noqa: E402
from workbench.search.tool import SearchTool  # noqa: E402
from workbench.search.wire import Limits, Request, RequestError, parse_body, parse_request  # noqa: E402

LIMITS = Limits(max_body=4096, max_queries=8, max_topk=50, timeout=2.0)

json_scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20)
json_values = st.recursive(json_scalars, lambda inner: st.lists(inner, max_size=5)
                           | st.dictionaries(st.text(max_size=8), inner, max_size=5), max_leaves=20)
# Bodies that look like Search-R1 requests, each field sometimes wrong.
queries = st.lists(st.text(max_size=30), max_size=12) | json_values
bodies = st.fixed_dictionaries({}, optional={"queries": queries, "topk": st.integers(-3, 60) | json_values,
                                             "return_scores": json_values, "extra": json_values}) | json_values


def check_outcome(parse, raw) -> Request | RequestError:
    """Call ``parse``; a Request must be well-formed, any error a one-line RequestError."""
    try:
        request = parse(raw)
    except RequestError as err:
        assert err.status in (400, 413)
        message = str(err)
        assert message and "\n" not in message and len(message) < 400
        return err
    assert isinstance(request, Request)
    assert isinstance(request.queries, list) and len(request.queries) <= LIMITS.max_queries
    assert all(isinstance(q, str) and q.encode("utf-8") is not None for q in request.queries)
    assert request.topk is None or (type(request.topk) is int and 1 <= request.topk <= LIMITS.max_topk)
    assert type(request.return_scores) is bool
    return request


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=600))
def test_any_bytes_parse_or_fail_clearly(raw):
    check_outcome(lambda r: parse_body(r, LIMITS), raw)


@settings(max_examples=300, deadline=None)
@given(bodies)
def test_any_json_body_parses_or_fails_clearly(body):
    raw = json.dumps(body).encode()
    outcome = check_outcome(lambda r: parse_body(r, LIMITS), raw)
    if isinstance(outcome, RequestError) and outcome.status == 413:
        assert len(raw) > LIMITS.max_body or len(body["queries"]) > LIMITS.max_queries


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(st.characters(blacklist_categories=("Cs",)), max_size=40), max_size=8),
       st.none() | st.integers(1, 50), st.booleans())
def test_valid_requests_round_trip(qs, topk, scores):
    body = {"queries": qs, "return_scores": scores} | ({} if topk is None else {"topk": topk})
    assert parse_request(body, LIMITS) == Request(qs, topk, scores)
    assert parse_body(json.dumps(body, ensure_ascii=False).encode(), LIMITS) == Request(qs, topk, scores)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 20_000), st.sampled_from(["[", "{\"a\":"]))
def test_nesting_at_any_depth_is_a_400(depth, opener):
    closer = "]" if opener == "[" else "}"
    raw = ('{"queries": ["x"], "topk": ' + opener * depth + "1" + closer * depth + "}").encode()
    outcome = check_outcome(lambda r: parse_body(r, Limits(max_body=1 << 20)), raw)
    assert isinstance(outcome, RequestError) and outcome.status == 400


@pytest.fixture(scope="module")
def url(tmp_path_factory):
    path = tmp_path_factory.mktemp("props") / "world.duckdb"
    make_store(path).close()
    with running_server(SearchTool(path, index="bm25"), **asdict(LIMITS)) as served:
        yield served


tokens = st.text(st.sampled_from("ABCDEFGHIJKLMNOPQRSTUVWXYZ"), min_size=1, max_size=8)
methods = st.sampled_from(["GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS"]) | tokens
paths = st.sampled_from(["/retrieve", "/retrieve/", "/health", "/", "/retrieve?x=1"]) | st.text(
    st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=1, max_size=30).map(lambda p: "/" + p)
wire_bodies = st.binary(max_size=300) | bodies.map(lambda b: json.dumps(b).encode())


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(method=methods, path=paths, body=wire_bodies)
def test_the_server_answers_every_request_with_json(url, method, path, body):
    parts = urllib.parse.urlsplit(url)
    data = (f"{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n\r\n").encode() + body
    with socket.create_connection((parts.hostname, parts.port), timeout=10) as sock:
        sock.sendall(data)
        response = http.client.HTTPResponse(sock, method=method)
        response.begin()
        payload = response.read()
    assert response.status in (200, 400, 404, 405, 411, 413, 501)
    assert response.getheader("Content-Type") == "application/json"
    if method == "HEAD":
        assert payload == b""
    else:
        answer = json.loads(payload)
        assert ("result" in answer or "status" in answer) if response.status == 200 else "error" in answer
