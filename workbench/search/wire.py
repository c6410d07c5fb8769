"""The retrieval server's wire format (``search.server``, ``search.client``): its limits, request
bodies parsed and checked, and answers encoded, for ``POST /retrieve`` (Search-R1's protocol) and
``POST /kg_search`` (DynaSearcher's KG tool, seed 003). Standard library only, so the CLI reads
``Limits`` without loading numpy.

Example:
    >>> parse_body(b'{"queries": ["Oslo"], "topk": 2}')
    Request(queries=['Oslo'], topk=2, return_scores=False)
    >>> parse_kg_body(b'{"queries": ["Oslo"], "questions": ["Where is Oslo?"]}', Limits())
    (['Oslo'], ['Where is Oslo?'], None)
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable, Iterator

if TYPE_CHECKING:  # annotations only: the CLI imports Limits without loading numpy
    from workbench.search.tool import Hit, Retriever


class LimitError(ValueError):
    """A bad ``Limits`` value; ``field`` names it (the CLI turns it into its flag, ``--max-body``)."""

    def __init__(self, field: str, expected: str, got, todo: str):
        self.field, self.expected, self.got, self.todo = field, expected, got, todo
        super().__init__(self.message(field))

    def message(self, name: str) -> str:
        """The one-line error with the field called ``name``."""
        return f"{name}: expected {self.expected}, got {self.got!r}; {self.todo}"


@dataclass(frozen=True)
class Limits:
    """What one request and one client may take (all ours: Search-R1's server has no limits).

    ``max_body`` bytes of JSON (8 MiB holds thousands of long queries); ``max_queries`` per request;
    ``max_topk`` passages per query; ``max_results`` passages per request (queries x topk: 2,048 x
    1,000 made a 1 GB answer and a 4.9 GB peak); ``max_response`` bytes of one answer.
    ``timeout`` seconds: the deadline for a request's headers and body from its first byte, the
    longest wait for a connection's next request and for a response's write. ``max_connections``
    open at once and ``max_per_client`` from one address; ``evict_after`` seconds a connection must
    have waited for its request before a new one may take its place on a full server.
    """

    max_body: int = 8 * 1024 * 1024
    max_queries: int = 4096
    max_topk: int = 1000
    max_results: int = 100_000
    max_response: int = 128 * 1024 * 1024
    timeout: float = 30.0
    max_connections: int = 512
    max_per_client: int = 512
    evict_after: float = 1.0

    def __post_init__(self):
        for name in ("max_body", "max_queries", "max_topk", "max_results", "max_response", "max_connections",
                     "max_per_client"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise LimitError(name, "a positive integer", value, "give a whole number of at least 1")
        for name, low in (("timeout", 0.01), ("evict_after", 0.0)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= _DAY:
                raise LimitError(name, f"a number of seconds from {low:g} to {_DAY} (one day)", value,
                                 "give a finite number in that range (with inf a stalled client is never cut)")


_DAY = 86_400  # ours: the longest timeout taken; beyond it a stalled client would hold on for good


class RequestError(ValueError):
    """A request the server refuses: ``status`` is the HTTP status, the message says why."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Request:
    """A parsed ``/retrieve`` body."""

    queries: list[str]
    topk: int | None
    return_scores: bool


def _describe(value) -> str:
    """A short, safe description of a JSON value for an error message (never a deep repr)."""
    if isinstance(value, (dict, list)):
        return f"a JSON {'object' if isinstance(value, dict) else 'array'}"
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


_TRUE, _FALSE = ("true", "1", "yes", "on"), ("false", "0", "no", "off")


def parse_request(body, limits: Limits = Limits()) -> Request:
    """Check a parsed ``/retrieve`` body; raises RequestError (400, or 413 for too many queries).

    ``return_scores`` takes what Search-R1's (pydantic) server takes: a boolean, null, 0/1 or
    "true"/"false". Extra keys are ignored.

    Example:
        >>> parse_request({"queries": ["Oslo"], "topk": 2})
        Request(queries=['Oslo'], topk=2, return_scores=False)
        >>> parse_request({"queries": ["Oslo"], "topk": 0})
        Traceback (most recent call last):
        ...
        workbench.search.wire.RequestError: "topk" must be an integer from 1 to 1000, got 0
    """
    queries = body.get("queries") if isinstance(body, dict) else None
    if not isinstance(queries, list):
        raise RequestError(400, 'body must be a JSON object with "queries": a list of strings')
    if len(queries) > limits.max_queries:
        raise RequestError(413, f"{len(queries)} queries in one request; the limit is {limits.max_queries}")
    for i, query in enumerate(queries):
        if not isinstance(query, str):
            raise RequestError(400, f'"queries" must be a list of strings; item {i} is {_describe(query)}')
        try:
            query.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate escape such as "\ud800": no text has one
            raise RequestError(400, f'"queries" item {i} is not valid Unicode (a lone surrogate)') from None
    topk = body.get("topk")
    if topk is not None and (isinstance(topk, bool) or not isinstance(topk, int) or not 1 <= topk <= limits.max_topk):
        raise RequestError(400, f'"topk" must be an integer from 1 to {limits.max_topk}, got {_describe(topk)}')
    scores = body.get("return_scores", False)
    if isinstance(scores, str) and scores.strip().lower() in _TRUE + _FALSE:
        scores = scores.strip().lower() in _TRUE
    elif scores is None or (isinstance(scores, int) and scores in (0, 1)):
        scores = bool(scores)
    if not isinstance(scores, bool):
        raise RequestError(400, f'"return_scores" must be true or false, got {_describe(scores)}')
    return Request(queries, topk, scores)


def parse_body(raw: bytes, limits: Limits = Limits()) -> Request:
    """Parse and check the raw bytes of a ``/retrieve`` body; only ever raises RequestError.

    Example:
        >>> parse_body(b'{"queries": ["tea"], "return_scores": true}')
        Request(queries=['tea'], topk=None, return_scores=True)
        >>> parse_body(b"[" * 100_000)
        Traceback (most recent call last):
        ...
        workbench.search.wire.RequestError: the JSON body is nested too deeply
    """
    if len(raw) > limits.max_body:
        raise RequestError(413, f"the body has {len(raw)} bytes; the limit is {limits.max_body}")
    if not raw.strip():
        raise RequestError(400, 'the body is empty: send a JSON object with "queries"')
    try:
        body = json.loads(raw)
    except RecursionError:
        raise RequestError(400, "the JSON body is nested too deeply") from None
    except ValueError as err:  # JSONDecodeError, bad UTF-8, an integer of over 4300 digits
        raise RequestError(400, f"the body is not valid JSON: {str(err)[:200]}") from None
    return parse_request(body, limits)


def check_results(n_queries: int, topk: int, limits: Limits = Limits()) -> None:
    """RequestError 413 when ``n_queries`` x ``topk`` passages pass ``max_results``.

    Example:
        >>> check_results(2048, 1000)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        workbench.search.wire.RequestError: "queries" x "topk" asks for 2048 x 1000 = 2048000 passages; the limit is...
    """
    if n_queries * topk > limits.max_results:
        raise RequestError(413, f'"queries" x "topk" asks for {n_queries} x {topk} = {n_queries * topk} passages; '
                                f"the limit is {limits.max_results} (the server's max_results): send fewer queries "
                                'or a smaller "topk"')


def document(hit: Hit) -> dict:
    """A hit as a Search-R1 corpus document."""
    return {"id": str(hit.passage_id), "contents": hit.contents, "title": hit.title, "text": hit.text,
            "entity_id": hit.entity_id}


def answer_rows(tool: Retriever, request: Request) -> Iterator[list]:
    """The ``/retrieve`` result, one query's list at a time (encoded as they come: see
    ``encode_result``)."""
    hits = tool.search(request.queries, request.topk)
    for row in hits:
        yield [{"document": document(h), "score": h.score} for h in row] if request.return_scores \
            else [document(h) for h in row]


def answer(tool: Retriever, request: Request) -> dict:
    """The ``/retrieve`` response to a parsed request."""
    return {"result": list(answer_rows(tool, request))}


def encode_json(payload) -> bytes:
    """UTF-8 JSON; falls back to ASCII escapes for text UTF-8 cannot hold (lone surrogates).

    Example:
        >>> encode_json({"error": "\\ud800"})
        b'{"error": "\\\\ud800"}'
    """
    try:
        return json.dumps(payload, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(payload).encode("ascii")


def encode_result(rows: Iterable, limit: int) -> list[bytes]:
    """``{"result": [row, ...]}`` as JSON (the bytes ``encode_json`` gives), in pieces, encoded a row
    at a time: RequestError 413 as soon as the pieces pass ``limit`` bytes, so an oversized answer
    is never built whole.

    Example:
        >>> b"".join(encode_result([[1], [2]], 100))
        b'{"result": [[1], [2]]}'
        >>> encode_result([["x" * 50], ["y" * 50]], 100)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        workbench.search.wire.RequestError: the answer passes 100 bytes (the server's max_response) at query 2: ...
    """
    parts, size = [b'{"result": ['], len(b'{"result": [') + len(b"]}")
    for i, row in enumerate(rows):
        part = (b", " if i else b"") + encode_json(row)
        size += len(part)
        if size > limit:
            raise RequestError(413, f"the answer passes {limit} bytes (the server's max_response) at query {i + 1}: "
                                    'send fewer queries or a smaller "topk"')
        parts.append(part)
    parts.append(b"]}")
    return parts


def parse_kg_body(raw: bytes, limits) -> tuple[list[str], list | None, int | None]:
    """(queries, questions, topk) of a ``/kg_search`` body, checked as ``/retrieve``'s is (the
    server's ``parse_body``: size, JSON, query strings, topk bounds) plus ``questions``: null or one
    string (or null) per query. Raises RequestError.

    Example:
        >>> parse_kg_body(b'{"queries": ["Oslo"], "questions": [1]}', Limits())
        Traceback (most recent call last):
        ...
        workbench.search.wire.RequestError: "questions" must be null or a list of 1 strings or nulls (one per query)
    """
    request = parse_body(raw, limits)
    body = json.loads(raw)
    questions = body.get("questions")
    if questions is not None and (not isinstance(questions, list) or len(questions) != len(request.queries)
                                  or not all(q is None or isinstance(q, str) for q in questions)):
        raise RequestError(400, f'"questions" must be null or a list of {len(request.queries)} strings or nulls '
                                "(one per query)")
    return request.queries, questions, request.topk
