"""``workbench search`` (print rendered hits) and ``workbench serve-retriever`` (Search-R1 API)."""

from __future__ import annotations

import argparse
import sys
from dataclasses import asdict

from workbench.commands import add_db, add_set, db_path, existing_db, overrides
from workbench.search.server import Limits


def _add_index(p: argparse.ArgumentParser) -> None:
    add_db(p)
    p.add_argument("--index", choices=["bm25", "dense", "hybrid"], default="bm25",
                   help="retrieval index (default: bm25; hybrid: both fused by reciprocal rank fusion)")
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
    p.add_argument("--timeout", type=float, default=Limits.timeout,
                   help=f"seconds for a request's headers, for its whole body (else HTTP 408) and for an "
                        f"idle connection (default {Limits.timeout:g})")
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
    if args.mmap:  # the tool opens the store read-only itself and keeps it open: it reads passages per search
        return SearchTool(path, index=args.index, topk=topk, model=args.model, e5=args.e5, mmap=True)
    con = store.connect(path, read_only=True)
    try:
        return SearchTool(con, index=args.index, topk=topk, model=args.model, e5=args.e5)
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


def _serve(args: argparse.Namespace) -> int:
    from workbench.search.server import make_server, url_of

    if args.host not in ("127.0.0.1", "localhost", "::1"):
        print(f"warning: serving on {args.host}, reachable beyond this machine", file=sys.stderr)
    # Limits first: a bad flag is one clear line before any index is loaded.
    limits = asdict(Limits(max_body=args.max_body, max_queries=args.max_queries, max_topk=args.max_topk,
                           timeout=args.timeout))
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
    server = make_server(_tool(args, args.topk), args.host, args.port, kg=kg, **limits)
    print(f"serving {args.index} retrieval over {db_path(args)} at {url_of(server)}"
          + (" and KG search at /kg_search" if kg else "") + " (Ctrl-C stops)", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0
