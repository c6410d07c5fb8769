"""A Search-R1-compatible retrieval server over any ``Retriever`` (standard library only).

``POST /retrieve`` with ``{"queries": [...], "topk": k, "return_scores": true}`` answers
``{"result": [[{"document": {"id": "12", "contents": "\\"Title\\"\\ntext", ...}, "score": s}, ...], ...]}``,
one list per query, as Search-R1's ``retrieval_server.py`` does; with ``return_scores`` false
(its default) each query's list holds the documents alone. ``topk`` missing or null means the
server's default. Documents also carry ``title``, ``text`` and ``entity_id`` (extra keys a
Search-R1 client ignores). ``GET /health`` reports the index. Binds 127.0.0.1 unless told otherwise.

``POST /kg_search`` (DynaSearcher's KG tool, seed 003; served when the server has one, else 404)
takes ``{"queries": [entity, ...], "questions": [question or null, ...], "topk": k}`` and answers
``{"result": [{"query", "entity_id", "title", "score", "triples": [[head, relation, tail, head_id,
tail_id], ...]}, ...]}`` (``search.kg_search.answer_kg``); ``/retrieve`` is unchanged by it.

Under load (a veRL trainer's rollout workers): the listen backlog is 1024 (socketserver's 5
reset bursts of new connections), accepted sockets set TCP_NODELAY and every response leaves with
its Content-Length in as few writes as it can (otherwise Nagle and the client's delayed ACK cost
~40 ms per request on a kept-alive HTTP/1.1 connection), one daemon thread serves each connection.

Against slow and greedy clients (issue 39; every bound is a ``Limits`` field, all ours): a
request's headers and body must arrive within ``timeout`` seconds of its first byte (one deadline,
not per read: a byte a second no longer holds a connection), a connection waits at most
``timeout`` for its next request and a response gets ``timeout`` to be written. At most
``max_connections`` connections are open (lowered to what the open-file limit allows) and
``max_per_client`` from one address; when the server is full, a new connection takes the place of
the one that has waited longest for its request, once that has waited ``evict_after`` seconds
(slow clients make room for real ones), else it waits in the listen backlog until a connection
ends; a client over its own share is answered 503. A request may ask for ``max_results``
passages (queries x topk) and an answer may have ``max_response`` bytes (413 beyond either, before
the answer is built whole); the result cache is bounded in bytes (``Retriever``).

Every answer is JSON, errors as ``{"error": message}`` with one status: 400 malformed body,
JSON nested too deeply, bad field; 404 unknown path; 405 wrong method for a path; 408 a request
whose request line, headers or body did not arrive within ``timeout`` seconds of its first byte;
411 no Content-Length (chunked bodies are not supported); 413 a body over ``max_body`` bytes, more
than ``max_queries`` queries, more than ``max_results`` passages asked for or an answer over
``max_response`` bytes; 500 the retriever failed; 501 an unknown method; 503 a client over its
``max_per_client`` connections. A client that disconnects, stalls or is evicted is not an error:
nothing is logged for it.

Example:
    >>> from workbench import store
    >>> from workbench.search.tool import SearchTool
    >>> from workbench.search.client import RemoteRetriever
    >>> con = store.connect(":memory:")
    >>> _ = con.execute("INSERT INTO passages VALUES (3, NULL, 0, 'Kiwis live in New Zealand.')")
    >>> with running_server(SearchTool(con)) as url:
    ...     RemoteRetriever(url).search(["kiwis"])[0][0].passage_id
    3
"""

from __future__ import annotations

import contextlib
import email.utils
import errno
import io
import json
import math
import os
import re
import socket
import socketserver
import sys
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Iterable, Iterator
from urllib.parse import urlsplit

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
        workbench.search.server.RequestError: "topk" must be an integer from 1 to 1000, got 0
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
        workbench.search.server.RequestError: the JSON body is nested too deeply
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
        workbench.search.server.RequestError: "queries" x "topk" asks for 2048 x 1000 = 2048000 passages; the limit is...
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
        workbench.search.server.RequestError: the answer passes 100 bytes (the server's max_response) at query 2: ...
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


_DIGITS = re.compile(r"[0-9]{1,19}")
_ROUTES = {"/retrieve": ("POST",), "/health": ("GET", "HEAD"), "/kg_search": ("POST",)}


class _DeadlineReader(io.RawIOBase):
    """A socket's reads under one deadline (``deadline``, on ``time.monotonic``): each read waits
    only for what is left of it, so a client trickling a byte at a time cannot stretch a request
    (a per-read timeout restarts with every byte). Past the deadline a read raises TimeoutError."""

    def __init__(self, sock: socket.socket, seconds: float):
        self.sock, self.deadline = sock, time.monotonic() + seconds

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the deadline passed")
        self.sock.settimeout(left)
        return self.sock.recv_into(buffer)


@dataclass(eq=False)
class _Conn:
    """An open connection as the server counts it (``RetrievalServer``)."""

    sock: socket.socket
    client: str
    since: float = field(default_factory=time.monotonic)  # when it began waiting for its next request
    busy: bool = False  # a whole request arrived: it is answered, never evicted
    evicted: bool = False


class _Evicted(ConnectionAbortedError):
    """The server closed this connection to make room (quiet: a ConnectionError)."""


class RetrievalHandler(BaseHTTPRequestHandler):
    """One connection; HTTP/1.1 keep-alive. The server holds ``tool`` and ``limits``."""

    protocol_version = "HTTP/1.1"
    server_version = "workbench-retriever"
    # Nagle holds the small response until the client ACKs, and the client delays that ACK
    # ~40 ms: without this every kept-alive request costs 40+ ms.
    disable_nagle_algorithm = True

    def setup(self) -> None:
        self.timeout = self.server.limits.timeout  # StreamRequestHandler sets it on the socket
        super().setup()
        self.rfile.close()  # reads go through the deadline instead
        self._reader = _DeadlineReader(self.connection, self.timeout)
        self.rfile = io.BufferedReader(self._reader, 1 << 16)
        self._conn = self.server.connection_of(self.request)

    def handle_one_request(self) -> None:
        # BaseHTTPRequestHandler's, with one deadline per request (see _DeadlineReader).
        self._body_done, self.command, self.requestline, self.request_version = False, None, "", self.protocol_version
        self.close_connection = True
        self.server.waiting(self._conn)
        self._reader.deadline = time.monotonic() + self.timeout  # for the next request's first byte
        try:
            if not self.rfile.peek(1):
                return  # the client closed, or was evicted
        except (TimeoutError, OSError):
            return  # idle past the timeout, or reset: nobody waits for an answer
        self._reader.deadline = time.monotonic() + self.timeout  # the whole request from its first byte
        try:
            self.raw_requestline = self.rfile.readline(65537)
        except TimeoutError:
            return self._error(408, f"the request line and headers did not arrive within {self.timeout:g} s",
                               close=True)
        if len(self.raw_requestline) > 65536:
            return self.send_error(414, "URI Too Long")
        if not self.raw_requestline.endswith(b"\n"):
            return  # the client closed mid-line
        self.close_connection = False
        if not self.parse_request():
            return  # answered
        handler = getattr(self, "do_" + self.command, None)
        if handler is None:
            return self.send_error(501, f"Unsupported method ({self.command!r})")
        try:
            handler()
        except TimeoutError:  # a response the client does not read: its connection goes
            self.close_connection = True

    def parse_request(self) -> bool:
        try:
            return super().parse_request()
        except TimeoutError:  # the request line came, its headers stalled
            self._error(408, f"the request line and headers did not arrive within {self.timeout:g} s", close=True)
            return False

    def handle_expect_100(self) -> bool:
        # Refuse an oversized body before the client sends it.
        length = self.headers.get("Content-Length", "")
        if _DIGITS.fullmatch(length.strip()) and int(length) > self.server.limits.max_body:
            self._error(413, f"the body has {int(length)} bytes; the limit is {self.server.limits.max_body}",
                        close=True)
            return False
        return super().handle_expect_100()

    def _busy(self) -> None:
        """From here the request is answered; raises _Evicted when the server took it back first."""
        if not self.server.busy(self._conn):
            raise _Evicted("evicted to make room")

    def _reply(self, status: int, payload: dict | list[bytes], close: bool = False, headers: dict | None = None) -> None:
        # Status line, headers and a small body in one write (see disable_nagle_algorithm); a
        # large one (encode_result's pieces) follows in its pieces, never joined into a copy.
        self._busy()
        parts = payload if isinstance(payload, list) else [encode_json(payload)]
        length = sum(map(len, parts))
        if status >= 400 and not self._body_done and self._has_body():
            close = True  # the unread body would be taken for the next request
        self.log_request(status, length)
        lines = [f"{self.protocol_version} {status} {self.responses.get(status, ('',))[0]}",
                 f"Server: {self.version_string()}", f"Date: {email.utils.formatdate(usegmt=True)}",
                 "Content-Type: application/json", f"Content-Length: {length}"]
        lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
        if close:
            lines.append("Connection: close")
            self.close_connection = True
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1", "replace")
        if self.command == "HEAD":
            parts = []
        elif length < 1 << 16:
            head, parts = head + b"".join(parts), []
        self.connection.settimeout(self.timeout)  # sendall: the whole response within it
        self.connection.sendall(head)
        for part in parts:
            self.connection.sendall(part)

    def _error(self, status: int, message: str, close: bool = False, headers: dict | None = None) -> None:
        self._reply(status, {"error": message}, close=close, headers=headers)

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        # http.server's own refusals (bad request line 400, 431, unknown method 501) in JSON.
        self._error(code, message or self.responses.get(code, ("error",))[0], close=True)

    def _has_body(self) -> bool:
        headers = getattr(self, "headers", None)
        if headers is None:
            return False
        return bool(headers.get("Transfer-Encoding")) or headers.get("Content-Length", "0").strip() not in ("", "0")

    def _route(self, method: str) -> str | None:
        """The path when ``method`` serves it; otherwise answers 404/405 and returns None."""
        path = urlsplit(self.path).path.rstrip("/") or "/"
        allowed = _ROUTES.get(path)
        if path == "/kg_search" and self.server.kg is None:  # no KG tool served: as an unknown path
            allowed = None
        if allowed is None:
            self._error(404, f"no such endpoint {path!r}; POST /retrieve or GET /health")
            return None
        if method not in allowed:
            self._error(405, f"{self.command} is not allowed on {path}; use {' or '.join(allowed)}",
                        headers={"Allow": ", ".join(allowed)})
            return None
        return path

    def _read_body(self) -> bytes | None:
        """The request body, or None when an error was answered (or the client left)."""
        limits = self.server.limits
        if self.headers.get("Transfer-Encoding"):
            self._error(411, "chunked bodies are not supported: send Content-Length", close=True)
            return None
        values = self.headers.get_all("Content-Length") or []
        if not values:
            self._error(411, "a POST needs a Content-Length header", close=True)
            return None
        if len(set(v.strip() for v in values)) > 1 or not _DIGITS.fullmatch(values[0].strip()):
            self._error(400, f"bad Content-Length {values[0][:40]!r}", close=True)
            return None
        length = int(values[0])
        if length > limits.max_body:
            self._error(413, f"the body has {length} bytes; the limit is {limits.max_body}", close=True)
            return None
        try:  # under the request's deadline (_DeadlineReader)
            raw = self.rfile.read(length)
        except TimeoutError:
            self._error(408, f"the body ({length} bytes announced) did not arrive within {limits.timeout:g} s "
                             "of the request's first byte", close=True)
            return None
        if len(raw) < length:  # the client closed mid-body: nobody to answer
            self.close_connection = True
            return None
        self._body_done = True
        return raw

    def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
        path = self._route("POST")
        if path is None:
            return
        raw = self._read_body()
        if raw is None:
            return
        self._busy()
        if path == "/kg_search":
            return self._kg_search(raw)
        limits = self.server.limits
        try:
            request = parse_body(raw, limits)
            check_results(len(request.queries), request.topk or self.server.tool.topk, limits)
        except RequestError as err:
            return self._error(err.status, str(err))
        try:
            parts = encode_result(answer_rows(self.server.tool, request), limits.max_response)
        except RequestError as err:
            return self._error(err.status, str(err))
        except Exception as err:  # noqa: BLE001 (a retriever bug must not drop the connection)
            self.log_error("retrieval failed: %s: %s", type(err).__name__, str(err)[:300])
            return self._error(500, f"retrieval failed: {type(err).__name__}: {str(err)[:300]}")
        self._reply(200, parts)

    def _kg_search(self, raw: bytes) -> None:
        from workbench.search.kg_search import hit_json, parse_kg_body

        kg, limits = self.server.kg, self.server.limits
        try:
            queries, questions, topk = parse_kg_body(raw, limits)
            check_results(len(queries), topk or kg.max_triples, limits)
        except RequestError as err:
            return self._error(err.status, str(err))
        try:
            parts = encode_result(map(hit_json, kg.search(queries, questions, topk)), limits.max_response)
        except RequestError as err:
            return self._error(err.status, str(err))
        except Exception as err:  # noqa: BLE001 (as /retrieve: a tool bug must not drop the connection)
            self.log_error("retrieval failed: %s: %s", type(err).__name__, str(err)[:300])
            return self._error(500, f"KG search failed: {type(err).__name__}: {str(err)[:300]}")
        self._reply(200, parts)

    def do_GET(self) -> None:  # noqa: N802
        if self._route("GET") is None:
            return
        tool = self.server.tool
        corpus = getattr(tool, "corpus", None)
        kg = self.server.kg  # listed only when served, so /health is unchanged without it
        self._reply(200, {"status": "ok", "index": getattr(tool, "kind", None), "topk": tool.topk,
                          "passages": len(corpus) if corpus is not None else None,
                          **({"kg_search": {"entities": len(kg.titles), "edges": kg.n_edges,
                                            "settings": kg.settings}} if kg is not None else {})})

    def do_HEAD(self) -> None:  # noqa: N802 (_reply leaves the body out)
        if self._route("HEAD") is not None:
            self.do_GET()

    def _not_allowed(self) -> None:
        self._route(self.command)

    do_PUT = do_DELETE = do_PATCH = do_OPTIONS = do_TRACE = do_CONNECT = _not_allowed

    def log_message(self, format, *args) -> None:  # keep notebook and test output clean
        pass

    def log_error(self, format, *args) -> None:
        # One line for what the operator should see (a failing retriever), none per request.
        if format.startswith("retrieval failed"):
            sys.stderr.write(f"retrieval server: {format % args}\n")


_FD_RESERVE = 64  # ours: descriptors kept free beyond the connections (index files, the store, evictions)


def _open_fds() -> int:
    """Descriptors this process has open (Linux: /proc; elsewhere a guess)."""
    try:
        return len(os.listdir("/proc/self/fd"))
    except OSError:
        return 64


def connection_room(wanted: int) -> int:
    """How many of ``wanted`` connections the open-file limit allows, after raising the soft limit
    toward the hard one where it is lower (as Go's runtime does); at least 0.

    Example:
        >>> 0 < connection_room(8) <= 8
        True
    """
    try:
        import resource
    except ImportError:  # not Unix: no limit to read
        return wanted
    need = _open_fds() + wanted + _FD_RESERVE
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < need:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (need if hard == resource.RLIM_INFINITY else min(need, hard),
                                                        hard))
        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if soft == resource.RLIM_INFINITY:
        return wanted
    return max(0, min(wanted, soft - _open_fds() - _FD_RESERVE))


class RetrievalServer(ThreadingHTTPServer):
    """``ThreadingHTTPServer`` with a deep listen backlog, daemon threads, quiet disconnects and a
    bounded set of connections (module doc: slow and greedy clients).

    ``max_connections`` is the limit in force (``limits.max_connections``, or fewer when the
    open-file limit allows fewer); ``evicted`` and ``refused`` count connections closed to make
    room and connections answered 503.
    """

    daemon_threads = True
    # socketserver's default backlog of 5 makes the kernel reset a burst of 50 new connections.
    # Linux caps it at net.core.somaxconn (4096 on current kernels).
    request_queue_size = 1024

    def __init__(self, tool: Retriever, host: str, port: int, limits: Limits, kg=None):
        self.tool, self.limits, self.kg = tool, limits, kg
        self.max_connections = connection_room(limits.max_connections)
        if self.max_connections < 1:
            raise LimitError("max_connections", "room for at least one connection under the open-file limit",
                             limits.max_connections, "raise the limit (ulimit -n) and start the server again")
        self._conns: dict[socket.socket, _Conn] = {}
        self._room = threading.Condition()
        self.evicted = self.refused = 0
        self.address_family = socket.AF_INET6 if ":" in host else socket.AF_INET
        super().__init__((host, port), RetrievalHandler)

    def server_bind(self) -> None:
        # HTTPServer.server_bind resolves the host's FQDN (a reverse DNS lookup that can hang
        # offline); only the CGI variables it feeds need it.
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = self.server_address[:2]

    # --- the connections: counted, evicted when the server is full -------------------------

    @property
    def open_connections(self) -> int:
        """Connections open now (evicted ones are no longer counted)."""
        with self._room:
            return len(self._conns)

    def connection_of(self, sock: socket.socket) -> _Conn:
        with self._room:
            return self._conns.get(sock) or _Conn(sock, "", evicted=True)

    def waiting(self, conn: _Conn) -> None:
        """``conn`` waits for its next request from now."""
        with self._room:
            conn.busy, conn.since = False, time.monotonic()

    def busy(self, conn: _Conn) -> bool:
        """``conn`` has its whole request and is answered (no longer evictable); False when it was
        evicted first."""
        with self._room:
            conn.busy = not conn.evicted
            return conn.busy

    def _evict_longest_waiting(self, client: str | None = None, min_wait: float = 0.0) -> bool:
        """Close the connection (of ``client``, or any) that has waited longest for its request,
        when it has waited ``min_wait`` seconds; True when one was closed. Holds ``_room``."""
        now = time.monotonic()
        waiting = [c for c in self._conns.values() if not c.busy and (client is None or c.client == client)]
        victim = min(waiting, key=lambda c: c.since, default=None)
        if victim is None or now - victim.since < min_wait:
            return False
        victim.evicted = True
        del self._conns[victim.sock]
        self.evicted += 1
        with contextlib.suppress(OSError):  # its thread's next read sees the end and closes it
            victim.sock.shutdown(socket.SHUT_RDWR)
        return True

    def get_request(self):
        # Accept only with room: a full server evicts its longest-waiting connection, else leaves
        # the new one in the listen backlog a moment (the OSError makes serve_forever poll again).
        with self._room:
            if len(self._conns) >= self.max_connections and not self._evict_longest_waiting(
                    min_wait=self.limits.evict_after):
                self._room.wait(0.05)
                if len(self._conns) >= self.max_connections:
                    raise BlockingIOError(errno.EAGAIN, "at max_connections")
        try:
            return self.socket.accept()
        except OSError as err:
            if err.errno in (errno.EMFILE, errno.ENFILE):  # other descriptors took the room: make some
                with self._room:
                    self._evict_longest_waiting()
                time.sleep(0.01)
            raise

    def process_request(self, request, client_address) -> None:
        client = client_address[0]
        with self._room:
            mine = sum(c.client == client for c in self._conns.values())
            if mine >= self.limits.max_per_client and not self._evict_longest_waiting(
                    client, self.limits.evict_after):
                self.refused += 1
                refuse = f"{client} has {mine} connections open; the limit is {self.limits.max_per_client} " \
                         "(the server's max_per_client): reuse a kept-alive connection or close idle ones"
            else:
                refuse = None
                self._conns[request] = _Conn(request, client)
        if refuse:
            return self._refuse(request, refuse)
        super().process_request(request, client_address)

    def _refuse(self, sock: socket.socket, message: str) -> None:
        """Answer 503 without reading the request, and close (best effort: never blocks)."""
        body = encode_json({"error": message})
        head = (f"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\nRetry-After: 1\r\nConnection: close\r\n\r\n").encode()
        with contextlib.suppress(OSError):
            sock.setblocking(False)
            sock.send(head + body)
        self.shutdown_request(sock)

    def shutdown_request(self, request) -> None:
        with self._room:
            if self._conns.pop(request, None) is not None:
                self._room.notify()
        super().shutdown_request(request)

    def server_close(self) -> None:
        # Close every connection first: server_close waits for their threads, and a kept-alive
        # or slow connection would hold it for up to its timeout.
        with self._room:
            for conn in list(self._conns.values()):
                if not conn.busy:
                    conn.evicted = True
                    with contextlib.suppress(OSError):
                        conn.sock.shutdown(socket.SHUT_RDWR)
        super().server_close()

    def handle_error(self, request, client_address) -> None:
        err = sys.exc_info()[1]
        if isinstance(err, (ConnectionError, TimeoutError)):
            return  # the client went away, stalled or was evicted: its business, not a server fault
        sys.stderr.write(f"retrieval server: {type(err).__name__} serving {client_address[0]}: {err}\n")


def make_server(tool: Retriever, host: str = "127.0.0.1", port: int = 8000, kg=None, **limits) -> RetrievalServer:
    """An HTTP server (not yet serving) answering ``/retrieve`` from ``tool``; port 0 picks a free one.

    ``limits`` are ``Limits`` fields (``max_body``, ``max_queries``, ``max_topk``, ``max_results``,
    ``max_response``, ``timeout``, ``max_connections``, ``max_per_client``, ``evict_after``).
    ``kg`` (a ``search.kg_search.KGSearch``) also serves ``POST /kg_search``.

    Example:
        >>> from workbench import store
        >>> from workbench.search.tool import SearchTool
        >>> con = store.connect(":memory:")
        >>> _ = con.execute("INSERT INTO passages VALUES (1, NULL, 0, 'Tea.')")
        >>> server = make_server(SearchTool(con), port=0, max_queries=64)
        >>> server.limits.max_queries, url_of(server).startswith("http://127.0.0.1:")
        (64, True)
        >>> server.server_close()
    """
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
        raise LimitError("port", "a TCP port from 0 to 65535 (0 picks a free one)", port, "pick a port in that range")
    return RetrievalServer(tool, host, port, Limits(**limits), kg)


def url_of(server: ThreadingHTTPServer) -> str:
    """The ``/retrieve`` URL a server listens on."""
    host, port = server.server_address[:2]
    return f"http://[{host}]:{port}/retrieve" if ":" in host else f"http://{host}:{port}/retrieve"


@contextlib.contextmanager
def running_server(tool: Retriever, host: str = "127.0.0.1", port: int = 0, kg=None, **limits) -> Iterator[str]:
    """Serve ``tool`` (and ``kg`` on ``/kg_search``) in a background thread for the duration of a
    ``with`` block; yields the ``/retrieve`` URL."""
    server = make_server(tool, host, port, kg, **limits)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield url_of(server)
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
