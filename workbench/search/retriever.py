"""The solver's tools of a run or an evaluation: the search tool (:func:`make_retriever`),
DynaSearcher's KG tool (:func:`make_kg_tool`) and EoG's graph tools (:func:`make_graph_tools`).

The search tool comes from the run's ``SearchConfig``: the store in-process
(``SearchTool``: BM25 or dense) or a Search-R1-compatible retrieval server (``search.url``:
``RemoteRetriever``; ``workbench serve-retriever`` or Search-R1's own). Both give the same ``Hit``
rows; a workbench server's hits carry the entity ids path support (Eq. 8) needs, and a hit a
server sends without one (Search-R1's over wiki-18) gets the entity of its title in ``con``
(``client.TitleEntities``), None when the store has no such title (no process reward from it).

Example:
    >>> from workbench import store
    >>> from workbench.config import SearchConfig
    >>> con = store.connect(":memory:")
    >>> _ = con.execute("INSERT INTO passages VALUES (1, NULL, 0, 'Tea grows in Assam.')")
    >>> type(make_retriever(con, SearchConfig())).__name__
    'SearchTool'
    >>> make_retriever(con, SearchConfig(url="http://127.0.0.1:8000")).url
    'http://127.0.0.1:8000/retrieve'
"""

from __future__ import annotations

import logging

from workbench import paths


def make_retriever(con, search_cfg, index: str | None = None):
    """``RemoteRetriever(search.url)`` when a URL is set (its hits' missing entity ids looked up
    by title in ``con`` when given), else ``SearchTool`` over ``con`` with
    ``index`` (default ``search.index``), ``search.dense_model`` (``paths.local_model``) and
    ``search.device`` (:func:`search_device`), ``search.rrf_k``, ``search.hybrid_depth``, ``search.fusion`` and ``search.fusion_weight`` (hybrid), memory-mapped with passages read from the store when ``search.mmap``."""
    if search_cfg.url:
        from workbench.search.client import RemoteRetriever

        return RemoteRetriever(search_cfg.url, topk=search_cfg.topk, con=con)
    from workbench.search.tool import SearchTool

    return SearchTool(con, index=index or search_cfg.index, topk=search_cfg.topk,
                      device=search_device(search_cfg.device),
                      model=paths.local_model(search_cfg.dense_model) if search_cfg.dense_model else None,
                      mmap=search_cfg.mmap, rrf_k=search_cfg.rrf_k, hybrid_depth=search_cfg.hybrid_depth,
                      fusion=search_cfg.fusion, fusion_weight=search_cfg.fusion_weight)


def pool_retriever(con):
    """The retriever Dr. Free's retrieval verification searches with while G_0 is built
    (``kg.pool.build_pool(retrieval_verify=True)``, seed 002 Fig. 5): BM25 over the store's
    passages, top 3, uncached (ours: the tiny tier's retrieval, whatever the run searches with).

    Example:
        >>> from workbench import store
        >>> con = store.connect(":memory:")
        >>> _ = con.execute("INSERT INTO passages VALUES (1, NULL, 0, 'Tea grows in Assam.')")
        >>> pool_retriever(con).topk
        3
    """
    from workbench.search.tool import SearchTool

    return SearchTool(con, index="bm25", topk=3, cache=False)


def search_device(device: str) -> str:
    """``search.device`` made concrete: 'auto' is 'cuda' when torch sees a GPU, else 'cpu'.

    Example:
        >>> search_device("cpu"), search_device("cuda:1")
        ('cpu', 'cuda:1')
    """
    if device != "auto":
        return device
    from workbench.limits import default_device

    found = default_device()
    logging.getLogger(__name__).info("search.device auto: %s", found)  # the run's config keeps 'auto'
    return found


def make_kg_tool(con, method_cfg, policy=None, url: str = ""):
    """DynaSearcher's KG search tool with the settings of ``method_cfg`` (``method.kg_*``,
    ``search.kg_search.tool_settings``): over the store, or, with ``url`` (``search.url``), the
    same retrieval server's ``POST /kg_search`` (``serve-retriever --kg``), its settings checked
    against these first. The 'llm' filter has ``policy`` judge greedily (a capable backbone).

    Example:
        >>> from workbench import store
        >>> from workbench.config import MethodConfig
        >>> make_kg_tool(store.connect(":memory:"), MethodConfig()).filter
        'overlap'
    """
    from workbench.search.kg_search import KGSearch, tool_settings

    settings = tool_settings(method_cfg)
    if url:
        from workbench.search.client import RemoteKGSearch

        return RemoteKGSearch(url, max_triples=settings["max_triples"]).checked(settings)
    judge = None
    if method_cfg.kg_filter == "llm":
        if policy is None:
            raise ValueError("method.kg_filter='llm' needs the policy to judge the triples")

        def judge(prompts: list[str]) -> list[str]:
            outs = policy.generate([policy.chat_prompt(p) for p in prompts], max_new_tokens=32, temperature=0.0,
                                   top_p=1.0)
            return [o.text for o in outs]
    return KGSearch(con, judge=judge, **settings)


def make_graph_tools(con, method_cfg):
    """EoG's graph tools (``search.graph_tools.GraphTools``) over the store ``con``, with the settings of
    ``method_cfg`` (``method.graph_max_neighbors``, ``method.kg_min_similarity``); refused without a
    store (a rank other than 0).

    Example:
        >>> from workbench import store
        >>> from workbench.config import MethodConfig
        >>> make_graph_tools(store.connect(":memory:"), MethodConfig()).max_neighbors
        20
    """
    from workbench.search.graph_tools import GraphTools, tool_settings

    if con is None:
        raise ValueError("method.graph_tools: the graph tools read the store, which only rank 0 holds; "
                         "train EoG's rows in one process (no --gpus)")
    return GraphTools(con, **tool_settings(method_cfg))
