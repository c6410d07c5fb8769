"""The search tool a run or an evaluation uses, from its ``SearchConfig``: the store in-process
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


def search_device(device: str) -> str:
    """``search.device`` made concrete: 'auto' is 'cuda' when torch sees a GPU, else 'cpu'.

    Example:
        >>> search_device("cpu"), search_device("cuda:1")
        ('cpu', 'cuda:1')
    """
    if device != "auto":
        return device
    from workbench.policy.model import default_device

    found = default_device()
    logging.getLogger(__name__).info("search.device auto: %s", found)  # the run's config keeps 'auto'
    return found
