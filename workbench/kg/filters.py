"""Chain filters for G_0 (seed 000, section 3.2; optional Dr. Free filters, seed 002 appendix).

Walks come as arrays ``nodes`` (n, MAX+1) and ``rels`` (n, MAX) with -1 past a walk's end (see
``walks.random_walks``). Each filter returns a boolean mask of the chains it rejects; ``apply``
runs them in the order of ``REASONS`` and counts every rejected chain once, under the first
reason that rejects it.

- ``hops``: fewer than two relational hops (paper: L - 1 >= 2, "to exclude single hop shortcuts").
- ``cycle``: an entity repeats (acyclic chains; Dr. Free filters for acyclicity too).
- ``list``, ``year``, ``short``, ``nationality``: the chain holds an entity that would surface in
  a question (paper: "list pages, bare years, very short tokens, nationality adjectives"). The
  paper names *terminal* entities; since the proposer may pick any chain entity as the answer
  (Eq. 2), every entity of the chain is a potential terminal, so every position is checked (ours).
- ``unknown``: an edge endpoint with no row in ``entities`` (no title to phrase or hash).
- ``non_functional`` (optional, Dr. Free): a hop whose relation is not on the functional /
  near-functional whitelist (``relations.functional``).
- ``not_unique`` (optional, Dr. Free "unique entity grounding"): a hop (e, r, e') where e' is not
  the only object of (e, r) in the graph, so the question could not pin down the next entity.

Example:
    >>> import numpy as np
    >>> nodes = np.array([[0, 1, 2], [0, 1, -1], [0, 1, 0]])
    >>> rels = np.array([[0, 0], [0, -1], [0, 0]])
    >>> keep, counts = apply(nodes, rels, noise=np.zeros(3, dtype=np.int8))
    >>> keep.tolist(), counts
    ([True, False, False], {'hops': 1, 'cycle': 1})
"""

from __future__ import annotations

import re

import numpy as np

NOISE_KINDS = ("list", "year", "short", "nationality", "unknown")  # code i + 1 in ``noise`` arrays
REASONS = ("hops", "cycle") + NOISE_KINDS + ("non_functional", "not_unique")
MIN_RELATIONAL_HOPS = 2  # paper, section 3.2: L - 1 >= 2
SHORT_TITLE_CHARS = 2  # ours: a title of at most this many characters is a "very short token"

_LIST = re.compile(r"^\s*lists?\s+of\s", re.IGNORECASE)
# Bare years and decades as Wikipedia titles them: "1987", "44 BC", "AD 79", "1990s".
_YEAR = re.compile(r"^\s*((ad\s+)?\d{1,4}(\s*(bc|bce|ad|ce))?|\d{1,3}0s)\s*$", re.IGNORECASE)
# Demonyms that are also Wikipedia titles (redirects to peoples/languages); imported sources
# have no ``kind`` column, so these catch the common ones (ours; TinyWorld marks its own).
NATIONALITIES = frozenset("""
afghan albanian algerian american andorran angolan argentine argentinian armenian australian
austrian azerbaijani bahamian bahraini bangladeshi barbadian belarusian belgian belizean beninese
bhutanese bolivian bosnian brazilian british bruneian bulgarian burmese burundian cambodian
cameroonian canadian chadian chilean chinese colombian congolese croatian cuban cypriot czech
danish dominican dutch ecuadorian egyptian emirati english eritrean estonian ethiopian european
fijian filipino finnish french gabonese gambian georgian german ghanaian greek grenadian
guatemalan guinean guyanese haitian honduran hungarian icelandic indian indonesian iranian iraqi
irish israeli italian ivorian jamaican japanese jordanian kazakh kenyan korean kosovar kuwaiti
kyrgyz lao latvian lebanese liberian libyan lithuanian luxembourgish macedonian malagasy malawian
malaysian maldivian malian maltese mauritanian mauritian mexican moldovan monegasque mongolian
montenegrin moroccan mozambican namibian nepalese nigerian nigerien norwegian omani pakistani
palestinian panamanian paraguayan persian peruvian polish portuguese qatari romanian russian
rwandan salvadoran samoan saudi scottish senegalese serbian singaporean slovak slovenian somali
spanish sudanese surinamese swazi swedish swiss syrian taiwanese tajik tanzanian thai togolese
tongan trinidadian tunisian turkish turkmen ugandan ukrainian uruguayan uzbek venezuelan
vietnamese welsh yemeni zambian zimbabwean
""".split())


def classify_title(title: str | None, short_chars: int = SHORT_TITLE_CHARS) -> str | None:
    """The noise kind a title reveals ('list', 'year', 'short', 'nationality'), else None.

    Example:
        >>> [classify_title(t) for t in ["List of rivers", "1987", "Ox", "Italian", "Ravenna"]]
        ['list', 'year', 'short', 'nationality', None]
    """
    if title is None:
        return "unknown"
    if _LIST.match(title):
        return "list"
    if _YEAR.match(title):
        return "year"
    if len(title.strip()) <= short_chars:
        return "short"
    if title.strip().lower() in NATIONALITIES:
        return "nationality"
    return None


def noise_codes(kinds, titles, short_chars: int = SHORT_TITLE_CHARS) -> np.ndarray:
    """Per node: 0 for a clean entity, else 1 + index in ``NOISE_KINDS``.

    The store's ``entities.kind`` wins when it names a noise kind; otherwise the title decides
    (imported sources carry kind 'entity' or NULL). A missing title (None) is 'unknown'.

    Example:
        >>> noise_codes(["entity", "year", None], ["Ravenna", "Zorbu", "List of lakes"]).tolist()
        [0, 2, 1]
    """
    out = np.zeros(len(titles), dtype=np.int8)
    for i, (kind, title) in enumerate(zip(kinds, titles)):
        found = kind if kind in NOISE_KINDS else classify_title(title, short_chars)
        if found is not None:
            out[i] = NOISE_KINDS.index(found) + 1
    return out


def hop_counts(rels: np.ndarray) -> np.ndarray:
    """Relational hops of each walk (L - 1): the relations before the first -1."""
    valid = rels >= 0
    return np.where(valid.all(axis=1), rels.shape[1], np.argmin(valid, axis=1))


def too_few_hops(rels: np.ndarray, min_hops: int = MIN_RELATIONAL_HOPS) -> np.ndarray:
    """Walks with fewer than ``min_hops`` relational hops (dead ends included)."""
    return hop_counts(rels) < min_hops


def cyclic(nodes: np.ndarray) -> np.ndarray:
    """Walks that visit an entity twice (-1 padding ignored)."""
    ordered = np.sort(nodes, axis=1)
    return ((ordered[:, 1:] == ordered[:, :-1]) & (ordered[:, 1:] >= 0)).any(axis=1)


def noisy(nodes: np.ndarray, noise: np.ndarray) -> np.ndarray:
    """Per walk: the noise code of its first noisy entity (0 when clean)."""
    codes = np.where(nodes >= 0, noise[np.maximum(nodes, 0)], 0)
    first = np.argmax(codes > 0, axis=1)
    return codes[np.arange(len(nodes)), first]


def non_functional(rels: np.ndarray, functional: np.ndarray) -> np.ndarray:
    """Walks using a relation id whose ``functional[rid]`` is False (Dr. Free whitelist)."""
    return ((rels >= 0) & ~functional[np.maximum(rels, 0)]).any(axis=1)


def not_uniquely_grounded(nodes: np.ndarray, rels: np.ndarray, graph) -> np.ndarray:
    """Walks with a hop (e, r, e') where (e, r) has more than one object in ``graph``
    (Dr. Free "unique entity grounding")."""
    n_rels = max(len(graph.labels), 1)
    src = np.repeat(np.arange(graph.n_nodes, dtype=np.int64), graph.degree())
    keys, counts = np.unique(src * n_rels + graph.rels[:graph.n_edges], return_counts=True)
    hop = rels >= 0
    query = np.where(hop, nodes[:, :-1] * n_rels + rels, -1)
    pos = np.clip(np.searchsorted(keys, query), 0, len(keys) - 1)
    return (hop & (counts[pos] > 1)).any(axis=1)


def apply(nodes: np.ndarray, rels: np.ndarray, noise: np.ndarray, min_hops: int = MIN_RELATIONAL_HOPS,
          functional: np.ndarray | None = None, unique_graph=None) -> tuple[np.ndarray, dict]:
    """Run the filters; returns (keep mask, {reason: rejected count}) with reasons in ``REASONS``
    order, each rejected chain counted once under its first reason (zero counts left out).

    ``functional`` (a bool per relation id) turns the whitelist on; ``unique_graph`` (the
    ``CSRGraph`` walked) turns unique grounding on.

    Example:
        >>> import numpy as np
        >>> keep, counts = apply(np.array([[0, 1, 2]]), np.array([[0, 1]]), noise=np.array([0, 0, 2], dtype=np.int8))
        >>> keep.tolist(), counts
        ([False], {'year': 1})
    """
    keep = np.ones(len(nodes), dtype=bool)
    counts: dict[str, int] = {}

    def reject(reason: str, mask: np.ndarray) -> None:
        hit = mask & keep
        if hit.any():
            counts[reason] = int(hit.sum())
            keep[hit] = False

    reject("hops", too_few_hops(rels, min_hops))
    reject("cycle", cyclic(nodes))
    code = noisy(nodes, noise)
    for i, kind in enumerate(NOISE_KINDS):
        reject(kind, code == i + 1)
    if functional is not None:
        reject("non_functional", non_functional(rels, functional))
    if unique_graph is not None:
        reject("not_unique", not_uniquely_grounded(nodes, rels, unique_graph))
    return keep, counts
