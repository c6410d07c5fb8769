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
reset bursts of new connections), accepted sockets set TCP_NODELAY and every response leaves in
one write with its Content-Length (otherwise Nagle and the client's delayed ACK cost ~40 ms per
request on a kept-alive HTTP/1.1 connection), one daemon thread serves each connection.

Every answer is JSON, errors as ``{"error": message}`` with one status: 400 malformed body,
JSON nested too deeply, bad field; 404 unknown path; 405 wrong method for a path; 408 a request
whose headers or body stall past ``timeout`` seconds (the whole body must arrive within it);
411 no Content-Length (chunked bodies are not supported); 413 a body over ``max_body`` bytes or
more than ``max_queries`` queries; 500 the retriever failed; 501 an unknown method. A client
that disconnects is not an error: nothing is logged for it.

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
import json
import re
import socket
import socketserver
import sys
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Iterator
from urllib.parse import urlsplit

if TYPE_CHECKING:  # annotations only: the CLI imports Limits without loading numpy
    from workbench.search.tool import Hit, Retriever


@dataclass(frozen=True)
class Limits:
    """What one request may ask for (all ours: Search-R1's server has no limits).

    ``max_body`` bytes of JSON (8 MiB holds thousands of long queries), ``max_queries`` per
    request, ``max_topk`` passages per query, ``timeout`` seconds for a request's headers and for
    its whole body (and for an idle kept-alive connection).
    """

    max_body: int = 8 * 1024 * 1024
    max_queries: int = 4096
    max_topk: int = 1000
    timeout: float = 30.0

    def __post_init__(self):
        for name in ("max_body", "max_queries", "max_topk"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if not self.timeout > 0:
            raise ValueError(f"timeout must be a positive number of seconds, got {self.timeout!r}")


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


def document(hit: Hit) -> dict:
    """A hit as a Search-R1 corpus document."""
    return {"id": str(hit.passage_id), "contents": hit.contents, "title": hit.title, "text": hit.text,
            "entity_id": hit.entity_id}


def answer(tool: Retriever, request: Request) -> dict:
    """The ``/retrieve`` response to a parsed request."""
    hits = tool.search(request.queries, request.topk)
    if request.return_scores:
        return {"result": [[{"document": document(h), "score": h.score} for h in row] for row in hits]}
    return {"result": [[document(h) for h in row] for row in hits]}


def encode_json(payload: dict) -> bytes:
    """UTF-8 JSON; falls back to ASCII escapes for text UTF-8 cannot hold (lone surrogates).

    Example:
        >>> encode_json({"error": "\\ud800"})
        b'{"error": "\\\\ud800"}'
    """
    try:
        return json.dumps(payload, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(payload).encode("ascii")


_DIGITS = re.compile(r"[0-9]{1,19}")
_ROUTES = {"/retrieve": ("POST",), "/health": ("GET", "HEAD"), "/kg_search": ("POST",)}


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

    def parse_request(self) -> bool:
        self._body_done = False
        try:
            return super().parse_request()
        except TimeoutError:  # the request line came, its headers stalled
            self._error(408, f"request headers not received within {self.timeout:g} s", close=True)
            return False

    def handle_expect_100(self) -> bool:
        # Refuse an oversized body before the client sends it.
        length = self.headers.get("Content-Length", "")
        if _DIGITS.fullmatch(length.strip()) and int(length) > self.server.limits.max_body:
            self._error(413, f"the body has {int(length)} bytes; the limit is {self.server.limits.max_body}",
                        close=True)
            return False
        return super().handle_expect_100()

    def _reply(self, status: int, payload: dict, close: bool = False, headers: dict | None = None) -> None:
        # Status line, headers and body in one write (see disable_nagle_algorithm).
        body = encode_json(payload)
        if status >= 400 and not self._body_done and self._has_body():
            close = True  # the unread body would be taken for the next request
        self.log_request(status, len(body))
        lines = [f"{self.protocol_version} {status} {self.responses.get(status, ('',))[0]}",
                 f"Server: {self.version_string()}", f"Date: {email.utils.formatdate(usegmt=True)}",
                 "Content-Type: application/json", f"Content-Length: {len(body)}"]
        lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
        if close:
            lines.append("Connection: close")
            self.close_connection = True
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1", "replace")
        self.wfile.write(head if getattr(self, "command", None) == "HEAD" else head + body)

    def _error(self, status: int, message: str, close: bool = False, headers: dict | None = None) -> None:
        self._reply(status, {"error": message}, close=close, headers=headers)

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        # http.server's own refusals (bad request line 400, 414, 431, unknown method 501) in JSON.
        if not hasattr(self, "_body_done"):
            self._body_done = False
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
        # One deadline for the whole body, not per recv: a client trickling a byte at a time
        # would otherwise hold its thread forever.
        deadline = time.monotonic() + limits.timeout
        chunks, remaining = [], length
        try:
            while remaining:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError
                self.connection.settimeout(left)
                chunk = self.rfile.read1(min(remaining, 1 << 16))
                if not chunk:  # the client closed mid-body: nobody to answer
                    self.close_connection = True
                    return None
                chunks.append(chunk)
                remaining -= len(chunk)
        except TimeoutError:
            self._error(408, f"the body ({length} bytes announced) did not arrive within {limits.timeout:g} s",
                        close=True)
            return None
        self.connection.settimeout(limits.timeout)
        self._body_done = True
        return b"".join(chunks)

    def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
        path = self._route("POST")
        if path is None:
            return
        raw = self._read_body()
        if raw is None:
            return
        if path == "/kg_search":
            return self._kg_search(raw)
        try:
            request = parse_body(raw, self.server.limits)
        except RequestError as err:
            return self._error(err.status, str(err))
        try:
            payload = answer(self.server.tool, request)
        except Exception as err:  # noqa: BLE001 (a retriever bug must not drop the connection)
            self.log_error("retrieval failed: %s: %s", type(err).__name__, str(err)[:300])
            return self._error(500, f"retrieval failed: {type(err).__name__}: {str(err)[:300]}")
        self._reply(200, payload)

    def _kg_search(self, raw: bytes) -> None:
        from workbench.search.kg_search import answer_kg, parse_kg_body

        try:
            queries, questions, topk = parse_kg_body(raw, self.server.limits)
        except RequestError as err:
            return self._error(err.status, str(err))
        try:
            payload = answer_kg(self.server.kg, queries, questions, topk)
        except Exception as err:  # noqa: BLE001 (as /retrieve: a tool bug must not drop the connection)
            self.log_error("retrieval failed: %s: %s", type(err).__name__, str(err)[:300])
            return self._error(500, f"KG search failed: {type(err).__name__}: {str(err)[:300]}")
        self._reply(200, payload)

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


class RetrievalServer(ThreadingHTTPServer):
    """``ThreadingHTTPServer`` with a deep listen backlog, daemon threads and quiet disconnects."""

    daemon_threads = True
    # socketserver's default backlog of 5 makes the kernel reset a burst of 50 new connections.
    # Linux caps it at net.core.somaxconn (4096 on current kernels).
    request_queue_size = 1024

    def __init__(self, tool: Retriever, host: str, port: int, limits: Limits, kg=None):
        self.tool, self.limits, self.kg = tool, limits, kg
        self.address_family = socket.AF_INET6 if ":" in host else socket.AF_INET
        super().__init__((host, port), RetrievalHandler)

    def server_bind(self) -> None:
        # HTTPServer.server_bind resolves the host's FQDN (a reverse DNS lookup that can hang
        # offline); only the CGI variables it feeds need it.
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = self.server_address[:2]

    def handle_error(self, request, client_address) -> None:
        err = sys.exc_info()[1]
        if isinstance(err, (ConnectionError, TimeoutError)):
            return  # the client went away or stalled: its business, not a server fault
        sys.stderr.write(f"retrieval server: {type(err).__name__} serving {client_address[0]}: {err}\n")


def make_server(tool: Retriever, host: str = "127.0.0.1", port: int = 8000, kg=None, **limits) -> RetrievalServer:
    """An HTTP server (not yet serving) answering ``/retrieve`` from ``tool``; port 0 picks a free one.

    ``limits`` are ``Limits`` fields (``max_body``, ``max_queries``, ``max_topk``, ``timeout``).
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
