"""``workbench search`` (print rendered hits) and ``workbench serve-retriever`` (Search-R1 API)."""

from __future__ import annotations

import argparse
import sys
from dataclasses import asdict

from workbench.commands import add_set, add_store, db_path, existing_db, overrides
from workbench.search.server import LimitError, Limits


def _add_index(p: argparse.ArgumentParser) -> None:
    add_store(p)
    p.add_argument("--index", choices=["bm25", "dense", "hybrid"], default="bm25",
                   help="retrieval index (default: bm25; hybrid: both fused, search.index.fuse at its defaults)")
    p.add_argument("--model", default=None,
                   help="dense encoder: a sentence-transformers or E5 path (default: packaged all-MiniLM-L6-v2)")
    p.add_argument("--e5", action=argparse.BooleanOptionalAction, default=None,
                   help="force E5 'query: '/'passage: ' prefixes on or off (default: detect from the model name)")
    p.add_argument("--mmap", action="store_true",
                   help="search the persisted index memory-mapped, each hit's passage read from the store "
                        "(search.mmap: one page-cache copy of a wiki-18 index per machine)")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("search", help="search the store's passages; print hits as the solver sees them")
    _add_index(p)
    p.add_argument("query", help="the search query")
    p.add_argument("-k", type=int, default=3, help="passages to return (paper: 3)")
    p.add_argument("--url", default=None, help="query a Search-R1-compatible retrieval server instead of the store")
    p.set_defaults(func=_search)

    p = sub.add_parser("serve-retriever", help="serve the store's index on Search-R1's POST /retrieve API")
    _add_index(p)
    p.add_argument("--host", default="127.0.0.1", help="bind address (default: loopback only)")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--topk", type=int, default=3, help="default top-k when a request gives none")
    p.add_argument("--max-body", dest="max_body", type=int, default=Limits.max_body,
                   help=f"largest request body in bytes, else HTTP 413 (default {Limits.max_body})")
    p.add_argument("--max-queries", dest="max_queries", type=int, default=Limits.max_queries,
                   help=f"most queries in one request, else HTTP 413 (default {Limits.max_queries})")
    p.add_argument("--max-topk", dest="max_topk", type=int, default=Limits.max_topk,
                   help=f"largest topk a request may ask for, else HTTP 400 (default {Limits.max_topk})")
    p.add_argument("--max-results", dest="max_results", type=int, default=Limits.max_results,
                   help=f"most passages one request may ask for (queries x topk), else HTTP 413 "
                        f"(default {Limits.max_results})")
    p.add_argument("--max-response", dest="max_response", type=int, default=Limits.max_response,
                   help=f"largest answer in bytes, else HTTP 413 (default {Limits.max_response})")
    p.add_argument("--timeout", type=float, default=Limits.timeout,
                   help=f"seconds for a request's headers and body from its first byte (else HTTP 408), for an "
                        f"idle connection and for writing a response (default {Limits.timeout:g})")
    p.add_argument("--max-connections", dest="max_connections", type=int, default=Limits.max_connections,
                   help=f"connections open at once; a full server evicts the one waiting longest for its request "
                        f"(default {Limits.max_connections}, fewer when ulimit -n allows fewer)")
    p.add_argument("--max-per-client", dest="max_per_client", type=int, default=Limits.max_per_client,
                   help=f"connections open at once from one address, else HTTP 503 (default {Limits.max_per_client}; "
                        "lower it when serving beyond loopback)")
    p.add_argument("--evict-after", dest="evict_after", type=float, default=Limits.evict_after,
                   help=f"seconds a connection must have waited for its request before a full server may close it "
                        f"for a new one (default {Limits.evict_after:g})")
    p.add_argument("--cache-bytes", dest="cache_bytes", type=int, default=None,
                   help="bytes of search results kept in memory, the least recently used out first "
                        "(default: search.tool.CACHE_BYTES, 256 MiB)")
    p.add_argument("--kg", action="store_true",
                   help="also serve DynaSearcher's KG search on POST /kg_search (the store's entities, aliases, edges)")
    p.add_argument("--kg-max-triples", dest="kg_max_triples", type=int, default=None,
                   help="triples a KG search returns when a request names none (default: method.kg_max_triples)")
    add_set(p)  # method.kg_* settings of the served KG tool (a client checks its run's against them)
    p.set_defaults(func=_serve)


def _tool(args: argparse.Namespace, topk: int):
    """The search tool over the store, which is opened read-only: searching never writes to it,
    and other readers may have it open meanwhile."""
    from workbench import store
    from workbench.search.tool import SearchTool

    path = existing_db(args, "build a world or import a source first")
    given = getattr(args, "cache_bytes", None)  # serve-retriever's --cache-bytes; else the tool's default
    cache = {} if given is None else {"cache_bytes": given}
    if args.mmap:  # the tool opens the store read-only itself and keeps it open: it reads passages per search
        return SearchTool(path, index=args.index, topk=topk, model=args.model, e5=args.e5, mmap=True, **cache)
    con = store.connect(path, read_only=True)
    try:
        return SearchTool(con, index=args.index, topk=topk, model=args.model, e5=args.e5, **cache)
    finally:
        con.close()


def _search(args: argparse.Namespace) -> int:
    if args.k < 1:
        raise ValueError(f"-k must be at least 1, got {args.k}")
    if args.url:
        from workbench.search.client import RemoteRetriever

        tool = RemoteRetriever(args.url, topk=args.k)
    else:
        tool = _tool(args, args.k)
    with tool:
        print(tool.render(tool.search([args.query])[0]) or "(no passage matches)", end="")
    return 0


_LIMIT_FIELDS = ("max_body", "max_queries", "max_topk", "max_results", "max_response", "timeout", "max_connections",
                 "max_per_client", "evict_after")


def flag(field: str) -> str:
    """The serve-retriever flag of a ``Limits`` field (or of ``port``).

    Example:
        >>> flag("max_per_client")
        '--max-per-client'
    """
    return "--" + field.replace("_", "-")


def serve_settings(args: argparse.Namespace) -> dict:
    """``serve-retriever``'s flags checked before any index is loaded: the ``Limits`` fields, or a
    ValueError of one line naming the flag, what it takes and what to do."""
    if not 0 <= args.port <= 65535:
        raise ValueError(f"--port: expected a TCP port from 0 to 65535 (0 picks a free one), got {args.port}; "
                         "pick a port in that range")
    try:
        limits = asdict(Limits(**{f: getattr(args, f) for f in _LIMIT_FIELDS}))
    except LimitError as err:
        raise ValueError(err.message(flag(err.field))) from None
    if not 1 <= args.topk <= args.max_topk:
        raise ValueError(f"--topk: expected a default top-k from 1 to --max-topk ({args.max_topk}), got {args.topk}; "
                         "give one in that range (or raise --max-topk)")
    if args.kg_max_triples is not None and not 1 <= args.kg_max_triples <= args.max_topk:
        raise ValueError(f"--kg-max-triples: expected 1 to --max-topk ({args.max_topk}), got {args.kg_max_triples}; "
                         "give one in that range (or raise --max-topk)")
    if args.cache_bytes is not None and args.cache_bytes < 1:
        raise ValueError(f"--cache-bytes: expected a positive number of bytes, got {args.cache_bytes}; "
                         "give at least 1, or leave it out for the default")
    return limits


def _serve(args: argparse.Namespace) -> int:
    from workbench.search.server import make_server, url_of

    if args.host not in ("127.0.0.1", "localhost", "::1"):
        print(f"warning: serving on {args.host}, reachable beyond this machine", file=sys.stderr)
    # Flags first: a bad one is one clear line before any index is loaded.
    limits = serve_settings(args)
    sets = overrides(args)
    unused = sorted(k for k in sets if not (args.kg and k.startswith("method.kg_")))
    if unused:  # the server's other settings are its own flags (--topk, --index, ...)
        raise ValueError(f"--set {', '.join(unused)}: serve-retriever takes only method.kg_* settings, with --kg")
    kg = None
    if args.kg:
        from workbench.config import preset
        from workbench.search.kg_search import KGSearch, tool_settings

        settings = tool_settings(preset("tiny", **sets).method)  # kg_* are the same in every preset
        if args.kg_max_triples is not None:
            settings["max_triples"] = args.kg_max_triples
        kg = KGSearch(existing_db(args, "build a world or import a source first"), **settings)
    tool = _tool(args, args.topk)
    try:
        server = make_server(tool, args.host, args.port, kg=kg, **limits)
    except LimitError as err:  # the open-file limit leaves no room for a connection
        raise ValueError(err.message(flag(err.field))) from None
    except OSError as err:  # port taken, address not on this machine, a port below 1024 without root
        raise ValueError(f"--host {args.host} --port {args.port}: cannot listen there ({err.strerror or err}); "
                         "pick a free port (--port 0 picks one) on an address of this machine") from None
    if server.max_connections < args.max_connections:
        print(f"warning: --max-connections {args.max_connections} lowered to {server.max_connections}: the open-file "
              "limit allows no more (raise ulimit -n to serve more at once)", file=sys.stderr)
    print(f"serving {args.index} retrieval over {db_path(args)} at {url_of(server)}"
          + (" and KG search at /kg_search" if kg else "") + " (Ctrl-C stops)", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0
