"""A client for any Search-R1-compatible retrieval server (``POST /retrieve``), urllib only.

``RemoteRetriever`` has the ``SearchTool`` interface (batched ``search``, cache, ``render``), so
the workbench's solver can search a Search-R1 / veRL E5 server over wiki-18, and those pipelines
can search ``workbench serve-retriever``. The title is the first line of each document's
``contents`` with its wiki-18 double quotes removed; the text is the rest.

Entity ids: ``workbench serve-retriever`` sends each document's ``entity_id``; Search-R1's own
server over wiki-18 sends none. Given the store (``con``), ``RemoteRetriever`` gives such a hit
the entity of its title (:class:`TitleEntities`), so path support (Eq. 8) scores its hits as it
scores the store's own; an id the server sent is kept, a title the store lacks stays None.

Example:
    >>> parse_document({"id": "0", "contents": '"Aaron"\\nAaron is a prophet.'}, 81.2)
    Hit(passage_id=0, entity_id=None, title='Aaron', text='Aaron is a prophet.', score=81.2)
"""

from __future__ import annotations

import dataclasses
import json
import urllib.error
import urllib.request

from workbench.kg.sources import split_contents
from workbench.search.on_disk import read_store
from workbench.search.tool import Hit, Retriever


def parse_document(doc: dict, score: float | None = None) -> Hit:
    """A Search-R1 corpus document (``id``, ``contents``; optional ``entity_id``) as a Hit."""
    if not isinstance(doc, dict) or not isinstance(doc.get("contents"), str):
        raise ValueError(f"expected a document with a 'contents' string, got {str(doc)[:200]!r}")
    title, text = split_contents(doc["contents"])
    raw_id = doc.get("id")
    try:
        pid = int(raw_id)
    except (TypeError, ValueError):
        pid = raw_id
    ent = doc.get("entity_id")
    return Hit(pid, None if ent is None else int(ent), title, text, float(score) if score is not None else 0.0)


def post_results(url: str, body: dict, n: int, timeout: float, what: str) -> list:
    """POST ``body`` as JSON to ``url`` and return its ``result`` list of ``n`` entries; an HTTP
    error, an unreachable server (or a timeout) or another answer is a ValueError naming ``what``
    and the URL."""
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            payload = json.loads(response.read())
    except urllib.error.HTTPError as err:
        raise ValueError(f"{what} {url} answered HTTP {err.code}: {err.read()[:500]!r}") from err
    except (urllib.error.URLError, TimeoutError) as err:
        raise ValueError(f"cannot reach {what} {url}: {getattr(err, 'reason', err)}") from err
    result = payload.get("result") if isinstance(payload, dict) else None
    if not isinstance(result, list) or len(result) != n:
        raise ValueError(f"{what} {url} sent no 'result' list of {n} entries")
    return result


# The rule the store links a wiki-18 passage to its entity by (``kg.sources._Entities.ids``): the
# entity whose title equals the passage's title (``split_contents``: quotes and spaces stripped),
# the smallest id when several share it; no other normalisation (no case folding, no aliases).
_TITLE_IDS_SQL = ("SELECT t.title, min(e.entity_id) FROM (SELECT unnest(?::VARCHAR[]) AS title) t "
                  "JOIN entities e ON e.title = t.title GROUP BY t.title")


class TitleEntities:
    """Title -> entity id from a store's ``entities``, one query per batch of titles.

    Why: Search-R1's server over wiki-18 sends no entity ids, and wiki-18 titles are KILT page
    titles, so the store's entity of a hit's title is the entity its passage has in the store
    (the same join ``import_wiki18`` links passages with). A query per search call, not a dict
    held in memory: over 6M entities (KILT's size; measured on a synthetic store) a dict took ~10 s
    and ~2 GB to build, while the join of a few hundred titles scans them in ~0.13 s on 2 cores
    (DuckDB parallelises it), and runs only when some hit lacks an id. Reads on its own cursor of
    ``con`` (so a server thread never shares the caller's connection), which must stay open while
    the retriever searches (a closed one is a RuntimeError that says so, as in ``StorePassages``).

    Example:
        >>> from workbench import store
        >>> con = store.connect(":memory:")
        >>> _ = con.execute("INSERT INTO entities VALUES (4, 'Aaron', NULL, 'entity', 'kilt')")
        >>> TitleEntities(con).ids(["Aaron", "aaron", "Moses"])
        {'Aaron': 4}
    """

    def __init__(self, con):
        self.cur = con.cursor()

    def ids(self, titles) -> dict[str, int]:
        """The entity id of each of ``titles`` the store knows (the others are left out)."""
        wanted = sorted(set(titles))
        if not wanted:
            return {}
        found = read_store(self.cur, _TITLE_IDS_SQL, [wanted], "search.url reads the entity of each hit's title")
        return {title: int(ent) for title, ent in found}

    def fill(self, rows: list[list[Hit]]) -> list[list[Hit]]:
        """``rows`` with each hit that has no entity id given its title's (unknown titles stay None)."""
        found = self.ids(h.title for row in rows for h in row if h.entity_id is None)
        return [[dataclasses.replace(h, entity_id=found[h.title]) if h.entity_id is None and h.title in found else h
                 for h in row] for row in rows]

    def close(self) -> None:
        self.cur.close()


class RemoteRetriever(Retriever):
    """Search a Search-R1-compatible server at ``url`` (``http://host:port`` or ``.../retrieve``).

    ``con``: the store whose entity ids hits the server sent without one get, by title
    (:class:`TitleEntities`; train and eval pass theirs); None leaves such hits' ids None.

    Example:
        >>> RemoteRetriever("http://127.0.0.1:8000").url
        'http://127.0.0.1:8000/retrieve'
    """

    def __init__(self, url: str, topk: int = 3, timeout: float = 60.0, cache: bool = True, con=None):
        super().__init__(topk=topk, cache=cache)
        url = url.rstrip("/")
        self.url = url if url.endswith("/retrieve") else url + "/retrieve"
        self.timeout = timeout
        self.entities = TitleEntities(con) if con is not None else None

    def close(self) -> None:
        """Release the store cursor titles are looked up on (when given a store)."""
        if self.entities is not None:
            self.entities.close()

    def _search(self, queries: list[str], k: int) -> list[list[Hit]]:
        result = post_results(self.url, {"queries": queries, "topk": k, "return_scores": True}, len(queries),
                              self.timeout, "retrieval server")
        out = []
        for row in result:
            hits = [parse_document(item["document"], item.get("score")) if "document" in item
                    else parse_document(item) for item in row]
            out.append(hits[:k])
        return self.entities.fill(out) if self.entities is not None else out


class RemoteKGSearch:
    """DynaSearcher's KG tool served by ``workbench serve-retriever --kg`` (``POST /kg_search``),
    with ``KGSearch``'s interface (``search(queries, questions, k)``, ``render``). ``max_triples``
    is the ``topk`` a search asks for when given no ``k`` (None: the server's default).

    Example:
        >>> RemoteKGSearch("http://127.0.0.1:8000/retrieve").url
        'http://127.0.0.1:8000/kg_search'
    """

    def __init__(self, url: str, timeout: float = 60.0, max_triples: int | None = None):
        url = url.rstrip("/")
        for tail in ("/retrieve", "/kg_search"):
            url = url[:-len(tail)] if url.endswith(tail) else url
        self.url, self.timeout, self.max_triples = url + "/kg_search", timeout, max_triples

    def checked(self, settings: dict) -> "RemoteKGSearch":
        """This client, once the server's ``GET /health`` shows it serves KG search with
        ``settings`` (``search.kg_search.tool_settings``; the number of triples travels with each
        request, the others are the server's); else a ValueError naming both."""
        health = self.url.removesuffix("/kg_search") + "/health"
        try:
            with urllib.request.urlopen(health, timeout=self.timeout) as response:
                served = json.loads(response.read()).get("kg_search")
        except (urllib.error.URLError, TimeoutError, ValueError) as err:
            raise ValueError(f"search.url: cannot read the KG server's {health}: {getattr(err, 'reason', err)}") from err
        if not isinstance(served, dict):
            raise ValueError(f"search.url: the server at {health} serves no KG search (start it with "
                             "`workbench serve-retriever --kg`)")
        own = served.get("settings") or {}
        differ = [f"{k} (server {own.get(k)!r}, run {v!r})" for k, v in settings.items()
                  if k != "max_triples" and own.get(k) != v]
        if differ:
            raise ValueError(f"search.url: the KG server at {health} differs from method.kg_* in {', '.join(differ)}: "
                             "serve it with `workbench serve-retriever --kg --set method.kg_...=VALUE` to match")
        return self

    def search(self, queries: list[str], questions=None, k: int | None = None):
        """One ``KGHit`` per query, as ``KGSearch.search``."""
        from workbench.search.kg_search import hit_of_json

        body = {"queries": list(queries), "questions": None if questions is None else list(questions),
                "topk": self.max_triples if k is None else k}
        return [hit_of_json(item) for item in post_results(self.url, body, len(queries), self.timeout, "KG server")]

    @staticmethod
    def render(hit) -> str:
        """As ``kg_search.render``."""
        from workbench.search.kg_search import render

        return render(hit)
