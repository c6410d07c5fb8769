"""EoG's graph tools (seed 004): the solver explores the KG itself, relation by relation.

Seed 004 says its solver "calls the graph tools" (its Table 1: ReAct, the untrained start of
Table 3, is a frozen LLM with them) and contrasts them with a reranker that reads the triples near
the anchors once; it names no tool. Ours, two tools in the knowledge-graph agents' usual form (the
relations of an entity; the entities one relation reaches):

* ``<relations> entity </relations>``: the entity's outgoing relation labels, each with how many
  entities it reaches;
* ``<neighbors> entity | relation </neighbors>``: every entity the relation reaches from the entity
  (Table 6's ``1p`` query r(e, x) executed, ``kg.topology.follow``), at most ``max_neighbors`` of
  them; several entities separated by ``;`` give one line each (one hop of a query whose
  intermediate variable has several values, in one call).

Why these and not DynaSearcher's ``<kg_search>`` (``search.kg_search``): EoG's tasks are queries with
complete answer sets (up to ``method.topology_max_answers`` entities), and its metrics score the
set. ``<kg_search>`` returns at most ``method.kg_max_triples`` (4) triples of one entity after a
relevance filter, so a set of five cannot be read from it; ``<neighbors>`` returns the whole set a
relation reaches, which is how SVTS computed the answers (the same ``follow`` over the same edges).

Entity names are linked as DynaSearcher's tool links them (``kg_search.EntityMatcher``: titles and
aliases, exact or fuzzy from ``min_similarity``); a relation label matches after normalisation,
else the entity's closest label by difflib's ratio from ``min_similarity`` (ours). Everything is
deterministic: entities are listed in id order, labels alphabetically.

Example:
    >>> from workbench import store
    >>> con = store.connect(":memory:")
    >>> _ = con.execute("INSERT INTO entities VALUES (1, 'Ann', 'person', 'entity', 't'), "
    ...                 "(2, 'Rome', 'city', 'entity', 't'), (3, 'Oslo', 'city', 'entity', 't'), "
    ...                 "(4, 'Italy', 'country', 'entity', 't')")
    >>> _ = con.execute("INSERT INTO edges VALUES (1, 2, 'lived in', 't'), (1, 3, 'lived in', 't'), "
    ...                 "(2, 4, 'located in', 't')")
    >>> tools = GraphTools(con)
    >>> print(tools.render(tools.call("relations", "Ann")))
    Ann: lived in (2)
    <BLANKLINE>
    >>> print(tools.render(tools.call("neighbors", "Ann | lived in")))
    Ann --lived in--> Rome; Oslo
    <BLANKLINE>
    >>> print(tools.render(tools.call("neighbors", "Rome; Oslo | located in")))
    Rome --located in--> Italy
    Oslo has no relation "located in"
    <BLANKLINE>
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from workbench.kg import topology
from workbench.scoring import normalize_answer
from workbench.search.kg_search import EntityMatcher, config_of, settings_of

KINDS = ("relations", "neighbors")  # the tools, as the protocol's tags name them
SEPARATOR = ";"  # between entities of one call (and between the answers of an answer set: protocol)
RELATION_MARK = "|"  # between the entities and the relation of a <neighbors> call
# The tools' settings, mapped once: GraphTools keyword -> (MethodConfig field, type); a run's
# workbench.json, `workbench eval`'s rebuilt tools and the warm start's key go through it.
SETTINGS = {"max_neighbors": ("graph_max_neighbors", int), "min_similarity": ("kg_min_similarity", float)}


@dataclass(frozen=True)
class GraphHit:
    """One tool call as executed: its kind and text, the entities it linked (None: a name no entity
    matched), the relation label it matched (None: none), the entities it returned, and the text the
    solver reads."""

    kind: str
    query: str
    entity_ids: tuple[int | None, ...]
    relation: str | None
    found: tuple[int, ...]
    text: str

    @property
    def entity_id(self) -> int | None:
        """The first linked entity (what ``Trajectory.kg_entity_ids`` records per call)."""
        return next((e for e in self.entity_ids if e is not None), None)


def tool_settings(method_cfg) -> dict:
    """The graph tools' settings (``GraphTools`` keywords) of a ``MethodConfig``.

    Example:
        >>> from workbench.config import MethodConfig
        >>> tool_settings(MethodConfig(graph_max_neighbors=5))
        {'max_neighbors': 5, 'min_similarity': 0.75}
    """
    return settings_of(method_cfg, SETTINGS)


def settings_config(settings: dict):
    """A ``MethodConfig`` with the graph tools' ``settings`` (a run's ``workbench.json``); an unknown
    setting is refused.

    Example:
        >>> settings_config({"max_neighbors": "7"}).graph_max_neighbors
        7
    """
    return config_of(settings, SETTINGS, "graph tool")


def split_call(text: str) -> tuple[list[str], str | None]:
    """A call's entity names and, for ``<neighbors>``, its relation: ``"A; B | born in"`` ->
    (['A', 'B'], 'born in'); no ``|`` gives (names, None).

    Example:
        >>> split_call(" Ann ;Bo| born in "), split_call("Ann")
        ((['Ann', 'Bo'], 'born in'), (['Ann'], None))
    """
    names, mark, relation = text.partition(RELATION_MARK)
    entities = [n.strip() for n in names.split(SEPARATOR) if n.strip()]
    return entities, (relation.strip() or None) if mark else None


class GraphTools:
    """The two graph tools over a store's entities, aliases and edges (loaded once, in memory).

    ``max_neighbors`` (``method.graph_max_neighbors``, ours) bounds the entities one line lists
    (the rest are counted); ``min_similarity`` (``method.kg_min_similarity``) is the linking's.
    """

    def __init__(self, db_or_con, max_neighbors: int = topology.MAX_ANSWERS, min_similarity: float = 0.75):
        if int(max_neighbors) < 1:
            raise ValueError(f"method.graph_max_neighbors must be >= 1, got {max_neighbors!r}")
        self.max_neighbors, self.min_similarity = int(max_neighbors), float(min_similarity)
        own = isinstance(db_or_con, (str, Path))
        if own and not Path(db_or_con).exists():
            raise FileNotFoundError(f"no store at {db_or_con}")
        from workbench import store

        con = store.connect(db_or_con, read_only=True) if own else db_or_con
        try:
            self.titles = dict(con.execute("SELECT entity_id, title FROM entities").fetchall())
            aliases = con.execute("SELECT entity_id, alias FROM aliases WHERE alias IS NOT NULL").fetchall()
            self.graph = topology.TopologyGraph.from_store(con)
        finally:
            if own:
                con.close()
        self.matcher = EntityMatcher([(e, t, True) for e, t in self.titles.items()]
                                     + [(e, a, False) for e, a in aliases if e in self.titles], self.min_similarity)
        self._norm_labels = {normalize_answer(label): i for i, label in enumerate(self.graph.labels)}

    @property
    def settings(self) -> dict:
        """This tool's settings, as :func:`tool_settings` names them."""
        return {key: getattr(self, key) for key in SETTINGS}

    def _title(self, entity_id: int) -> str:
        return self.titles.get(int(entity_id), str(entity_id))

    def relation_counts(self, entity_id: int) -> dict[str, int]:
        """The entity's outgoing relation labels -> how many distinct entities each reaches.

        Example:
            >>> # GraphTools(con).relation_counts(1) == {'lived in': 2}
        """
        node = self.graph.node(int(entity_id))
        if node < 0:
            return {}
        out = self.graph.out
        lo, hi = out.node_ptr[node], out.node_ptr[node + 1]
        rels = out.keys[lo:hi] - node * out.n_rels
        ids, counts = np.unique(rels, return_counts=True)  # the index holds distinct (src, dst, rel) edges
        return dict(sorted((self.graph.labels[int(r)], int(c)) for r, c in zip(ids, counts)))

    def neighbors(self, entity_id: int, relation: str) -> list[int]:
        """Every entity ``relation`` reaches from ``entity_id`` (store ids, ascending): r(e, x) executed.

        Example:
            >>> # GraphTools(con).neighbors(1, "lived in") == [2, 3]
        """
        node = self.graph.node(int(entity_id))
        found = topology.follow(self.graph, np.array([node] if node >= 0 else [], dtype=np.int64),
                                self.graph.rel(relation))
        return [int(e) for e in self.graph.node_ids[found]]

    def _relation(self, query: str, entities: list[int]) -> str | None:
        """The label ``query`` names: exact after normalisation, else the closest label of the linked
        entities by difflib's ratio from ``min_similarity``; None when none is close enough."""
        q = normalize_answer(query)
        if q in self._norm_labels:
            return self.graph.labels[self._norm_labels[q]]
        own = sorted({label for e in entities for label in self.relation_counts(e)})
        scored = [(difflib.SequenceMatcher(None, normalize_answer(label), q, autojunk=False).ratio(), label)
                  for label in own]
        best = max(scored, key=lambda s: (s[0], [-ord(c) for c in s[1]]), default=(0.0, None))
        return best[1] if best[0] >= self.min_similarity else None

    def call(self, kind: str, text: str) -> GraphHit:
        """Run one tool call (``kind`` in :data:`KINDS`, ``text`` what the solver wrote inside the tags)."""
        if kind not in KINDS:
            raise ValueError(f"graph tool {kind!r}: expected one of {list(KINDS)}")
        names, relation = split_call(text)
        linked = [self.matcher.match(n) for n in names]
        ids = tuple(None if m is None else m[0] for m in linked)
        known = [e for e in ids if e is not None]
        lines = [f'No entity matches "{n}".' for n, e in zip(names, ids) if e is None]
        if not names:
            return GraphHit(kind, text, (), None, (), f"Write <{kind}> entity{' | relation' * (kind == 'neighbors')} "
                                                     f"</{kind}>.\n")
        if kind == "relations":
            for e in known:
                counts = self.relation_counts(e)
                lines.append(f"{self._title(e)}: " + ("; ".join(f"{r} ({n})" for r, n in counts.items())
                                                      if counts else "no relations"))
            return GraphHit(kind, text, ids, None, (), "".join(f"{line}\n" for line in lines))
        if relation is None:
            lines.append("Name a relation: <neighbors> entity | relation </neighbors>.")
            return GraphHit(kind, text, ids, None, (), "".join(f"{line}\n" for line in lines))
        label = self._relation(relation, known)
        found: list[int] = []
        for e in known:
            reached = self.neighbors(e, label) if label is not None else []
            if not reached:
                lines.append(f'{self._title(e)} has no relation "{relation}"')
                continue
            shown = reached[:self.max_neighbors]
            more = f" (and {len(reached) - len(shown)} more)" if len(reached) > len(shown) else ""
            lines.append(f"{self._title(e)} --{label}--> " + "; ".join(self._title(x) for x in shown) + more)
            found += [x for x in shown if x not in found]
        return GraphHit(kind, text, ids, label, tuple(found), "".join(f"{line}\n" for line in lines))

    def run(self, calls: list[tuple[str, str]]) -> list[GraphHit]:
        """One :class:`GraphHit` per ``(kind, text)`` call, in order (a rollout turn's calls)."""
        return [self.call(kind, text) for kind, text in calls]

    @staticmethod
    def render(hit: GraphHit) -> str:
        """What the solver reads inside ``<information>``."""
        return hit.text
