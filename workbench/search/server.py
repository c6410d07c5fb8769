"""A Search-R1-compatible retrieval server over any ``Retriever`` (standard library only).

``POST /retrieve`` with ``{"queries": [...], "topk": k, "return_scores": true}`` answers
``{"result": [[{"document": {"id": "12", "contents": "\\"Title\\"\\ntext", ...}, "score": s}, ...], ...]}``,
one list per query, as Search-R1's ``retrieval_server.py`` does; with ``return_scores`` false
(its default) each query's list holds the documents alone. ``topk`` missing or null means the
server's default. Documents also carry ``title``, ``text`` and ``entity_id`` (extra keys a
Search-R1 client ignores). ``GET /health`` reports the index. Bad requests get HTTP 400 with
``{"error": message}``. Binds 127.0.0.1 unless told otherwise.

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
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Iterator

from workbench.search.tool import Hit, Retriever


def document(hit: Hit) -> dict:
    """A hit as a Search-R1 corpus document."""
    return {"id": str(hit.passage_id), "contents": hit.contents, "title": hit.title, "text": hit.text,
            "entity_id": hit.entity_id}


def retrieve(tool: Retriever, body: dict) -> dict:
    """Answer one ``/retrieve`` request body (a parsed JSON object). Raises ValueError on bad input.

    Example:
        >>> retrieve(None, {"topk": 3})
        Traceback (most recent call last):
        ...
        ValueError: body must be a JSON object with "queries": a list of strings
    """
    queries = body.get("queries") if isinstance(body, dict) else None
    if not isinstance(queries, list) or not all(isinstance(q, str) for q in queries):
        raise ValueError('body must be a JSON object with "queries": a list of strings')
    topk = body.get("topk")
    if topk is not None and (isinstance(topk, bool) or not isinstance(topk, int) or topk < 1):
        raise ValueError(f'"topk" must be a positive integer, got {topk!r}')
    hits = tool.search(queries, topk)
    if body.get("return_scores", False):
        return {"result": [[{"document": document(h), "score": h.score} for h in row] for row in hits]}
    return {"result": [[document(h) for h in row] for row in hits]}


def make_server(tool: Retriever, host: str = "127.0.0.1", port: int = 8000) -> ThreadingHTTPServer:
    """An HTTP server (not yet serving) answering ``/retrieve`` from ``tool``; port 0 picks a free one."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _send(self, status: int, payload: dict) -> None:
            data = json.dumps(payload, ensure_ascii=False).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
            if self.path.rstrip("/") != "/retrieve":
                return self._send(404, {"error": f"no such endpoint {self.path!r}; POST /retrieve"})
            try:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"null")
                return self._send(200, retrieve(tool, body))
            except (ValueError, json.JSONDecodeError) as err:
                return self._send(400, {"error": str(err)})

        def do_GET(self) -> None:  # noqa: N802
            if self.path.rstrip("/") != "/health":
                return self._send(404, {"error": f"no such endpoint {self.path!r}; GET /health"})
            corpus = getattr(tool, "corpus", None)
            self._send(200, {"status": "ok", "index": getattr(tool, "kind", None), "topk": tool.topk,
                             "passages": len(corpus) if corpus is not None else None})

        def log_message(self, format, *args) -> None:  # keep notebook and test output clean
            pass

    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    return server


def url_of(server: ThreadingHTTPServer) -> str:
    host, port = server.server_address[:2]
    return f"http://{host}:{port}/retrieve"


@contextlib.contextmanager
def running_server(tool: Retriever, host: str = "127.0.0.1", port: int = 0) -> Iterator[str]:
    """Serve ``tool`` in a background thread for the duration of a ``with`` block; yields the URL."""
    server = make_server(tool, host, port)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield url_of(server)
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
