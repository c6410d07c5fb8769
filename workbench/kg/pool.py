"""The chain pool G_t: build G_0 from random walks, reconstruct G_t, sample, export
(seed 000, sections 3.1, 3.2 and 3.4).

A chain ``c = (e_1, r_1, ..., r_{L-1}, e_L)`` (Eq. 1) is a ``chains`` row, its ``chain_nodes``
(entity and the relation to the next node) and its ``evidence`` rows: each node's passage d_i
(``target='node'``: the entity's first passage by paragraph, one that is more than its title preferred,
since a KILT page's paragraph 0 is the title alone) and, for each edge, the source entity's paragraph that links to the next entity
(``target='edge'``, the KILT anchor's paragraph). G_0 has ``run`` NULL and round 0; a run's
write-back adds chains and evidence with ``run`` = its name and the round they were written in.

Rebuilding G_0 replaces every chain with ``run`` NULL (and its nodes and evidence) in one
transaction. Write-back chains (``run`` set) are never touched. If a run has already attached
evidence or candidates to G_0 chains, the rebuild refuses (ValueError naming the runs) unless
``force=True``, which also deletes that run evidence, since its chain ids would dangle.

Example:
    >>> from workbench import store
    >>> con = store.connect(":memory:")
    >>> _ = con.execute("INSERT INTO entities VALUES (1,'Ada','person','entity','t'), "
    ...     "(2,'Brova','city','entity','t'), (3,'Celand','country','entity','t')")
    >>> _ = con.execute("INSERT INTO edges VALUES (1,2,'born in','t'), (2,3,'located in','t')")
    >>> build_pool(con, walks=50, seed=0)["chains"]
    1
    >>> [(c.titles, c.relations) for c in load_pool(con)]
    [(['Ada', 'Brova', 'Celand'], ['born in', 'located in'])]
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from workbench import paths, store
from workbench.kg import chain_checks, filters
from workbench.kg.walks import CSRGraph, check_walk_memory, hop_range, random_walks
from workbench.limits import check_seed


def chain_hash(titles) -> str:
    """The deduplication key: SHA-1 over the lowercased entity-title sequence (section 3.4).

    Case-insensitive, order-sensitive. Titles are joined with the ASCII unit separator, which
    no Wikipedia or TinyWorld title contains, so different sequences never share a digest input.

    Example:
        >>> chain_hash(["Ada", "Brova"]) == chain_hash(["ADA", "brova"]) != chain_hash(["Brova", "Ada"])
        True
    """
    return _digest([t.lower() for t in titles])


def _digest(lowered: list[str]) -> str:
    return hashlib.sha1("\x1f".join(lowered).encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Evidence:
    """One evidence row of a chain: a node passage or the passage supporting an edge."""

    position: int
    target: str  # 'node' or 'edge' (the edge from ``position`` to ``position + 1``)
    entity_id: int | None
    passage_id: int | None
    text: str | None
    source: str  # 'walk' or 'writeback'
    run: str | None
    round: int
    trajectory_id: int | None = None


@dataclass
class Chain:
    """A chain of G_t with the evidence visible at that round (Eq. 1)."""

    chain_id: int
    hash: str
    hops: int
    run: str | None
    created_round: int
    origin: str
    entity_ids: list[int]
    titles: list[str]
    relations: list[str]
    evidence: list[Evidence] = field(default_factory=list)

    def to_json(self, n_evidence: int | None = None) -> dict:
        """The export record: entities (titles), relations (labels), hash, chain_id, hops and the
        evidence count (``n_evidence``, default ``len(self.evidence)``)."""
        return {"chain_id": self.chain_id, "hash": self.hash, "hops": self.hops, "entities": self.titles,
                "relations": self.relations, "evidence": len(self.evidence) if n_evidence is None else n_evidence,
                "run": self.run,
                "created_round": self.created_round, "origin": self.origin}


def _node_noise(con, graph: CSRGraph) -> tuple[np.ndarray, list]:
    """Noise code and title of every graph node (None for an endpoint with no entity row)."""
    con.register("_graph_nodes", {"entity_id": graph.node_ids, "i": np.arange(graph.n_nodes)})
    try:
        rows = con.execute("""SELECT e.kind, e.title FROM _graph_nodes g
                              LEFT JOIN entities e USING (entity_id) ORDER BY g.i""").fetchall()
    finally:
        con.unregister("_graph_nodes")
    kinds = [r[0] for r in rows]
    titles = [r[1] for r in rows]
    return filters.noise_codes(kinds, titles), titles


def functional_relations(con) -> dict[str, bool]:
    """``relations.functional`` by label (one object per subject); a label not listed there is not
    functional (read it with ``.get(label, False)``).

    Example:
        >>> from workbench import store
        >>> con = store.connect(":memory:")
        >>> _ = con.execute("INSERT INTO relations VALUES ('born in', 'person', 'city', true), "
        ...                 "('birthplace of', 'city', 'person', NULL)")
        >>> functional_relations(con)
        {'birthplace of': False, 'born in': True}
    """
    return dict(con.execute("SELECT label, coalesce(functional, false) FROM relations ORDER BY label").fetchall())


def _functional_mask(con, graph: CSRGraph) -> np.ndarray:
    """``relations.functional`` per relation id; labels missing from ``relations`` are not functional."""
    flags = functional_relations(con)
    return np.array([bool(flags.get(label, False)) for label in graph.labels], dtype=bool)


def pool_filters(settings: dict) -> dict:
    """The chain filters of a pool build (``build_pool``'s ``pool_builds.params``) or of
    ``config.PoolConfig``, off where not recorded: what decides which walks G_0 keeps, beyond the
    walk count and seed.

    Example:
        >>> pool_filters({"functional_only": True, "walks": 500})
        {'functional_only': True, 'unique_grounding': False, 'retrieval_verify': False, 'hop_ratio': ''}
    """
    return {"functional_only": bool(settings.get("functional_only", False)),
            "unique_grounding": bool(settings.get("unique_grounding", False)),
            "retrieval_verify": bool(settings.get("retrieval_verify", False)),
            "hop_ratio": str(settings.get("hop_ratio", "") or "")}


def _runs_on_g0(con) -> list[str]:
    rows = con.execute("""
        SELECT DISTINCT run FROM (
            SELECT e.run FROM evidence e JOIN chains c USING (chain_id) WHERE c.run IS NULL AND e.run IS NOT NULL
            UNION ALL
            SELECT k.run FROM candidates k JOIN chains c USING (chain_id) WHERE c.run IS NULL)
        ORDER BY run""").fetchall()
    return [r for (r,) in rows]


def _delete_g0(con) -> None:
    """Delete G_0's chains, nodes and all evidence on them (runs' included: callers check first)."""
    g0 = "SELECT chain_id FROM chains WHERE run IS NULL"
    con.execute(f"DELETE FROM evidence WHERE chain_id IN ({g0})")
    con.execute(f"DELETE FROM chain_nodes WHERE chain_id IN ({g0})")
    con.execute("DELETE FROM chains WHERE run IS NULL")


_EVIDENCE_SQL = """
INSERT INTO evidence (evidence_id, chain_id, position, target, entity_id, passage_id, text, source, run, round)
WITH first_passage AS (  -- a KILT page's paragraph 0 is its title alone: a passage with text is preferred
    SELECT DISTINCT ON (p.entity_id) p.entity_id, p.passage_id, p.text
    FROM passages p LEFT JOIN entities e USING (entity_id)
    ORDER BY p.entity_id, coalesce(trim(p.text, ' ' || chr(9) || chr(10) || chr(13)) = e.title, false),
             p.paragraph, p.passage_id),
edge_paragraph AS (
    SELECT src_entity, dst_entity, min(paragraph) AS paragraph FROM anchors GROUP BY ALL),
nodes AS (SELECT * FROM chain_nodes WHERE chain_id >= $first),
rows AS (
    SELECT n.chain_id, n.position, 'node' AS target, n.entity_id, p.passage_id, p.text
    FROM nodes n JOIN first_passage p USING (entity_id)
    UNION ALL
    SELECT n.chain_id, n.position, 'edge', n.entity_id, p.passage_id, p.text
    FROM nodes n
    JOIN nodes m ON m.chain_id = n.chain_id AND m.position = n.position + 1
    JOIN edge_paragraph a ON a.src_entity = n.entity_id AND a.dst_entity = m.entity_id
    JOIN (SELECT DISTINCT ON (entity_id, paragraph) * FROM passages ORDER BY entity_id, paragraph, passage_id) p
      ON p.entity_id = n.entity_id AND p.paragraph = a.paragraph)
SELECT $base + row_number() OVER (ORDER BY chain_id, position, target DESC) - 1,
       chain_id, position, target, entity_id, passage_id, text, 'walk', NULL, 0
FROM rows
"""


def build_pool(con, walks: int, min_hops: int = 2, max_hops: int = 3, seed: int = 0,
               functional_only: bool = False, unique_grounding: bool = False, force: bool = False,
               retrieval_verify: bool = False, hop_ratio: str = "", search=None) -> dict:
    """Build G_0 (section 3.2): ``walks`` random walks of ``min_hops``-``max_hops`` hops over the
    store's ``edges``, filtered (``filters.apply``) and deduplicated by ``chain_hash``, written in
    one transaction with evidence and a ``pool_builds`` row.

    A walk that dead-ends early is kept as its realised prefix when that still has at least
    ``max(2, min_hops)`` hops (ours). Returns counts: walks, chains, rejected, rejections
    ({reason: count}, 'duplicate' included), evidence, build_id.

    Dr. Free's checks (seed 002; ``kg.chain_checks``), off by default: ``retrieval_verify`` (Fig. 5;
    ``search``, default BM25 over the store's passages, is the retriever) and ``hop_ratio`` (Table 7,
    e.g. "1:1:1" over min..max hops). Each is recorded in ``pool_builds.params`` only when on, so the
    default pool and its build record are the same as before them.

    Example:
        >>> from workbench import store
        >>> con = store.connect(":memory:")
        >>> _ = con.execute("INSERT INTO edges VALUES (1,2,'r','t'), (2,3,'r','t')")
        >>> sorted(build_pool(con, walks=10)["rejections"])  # no entity rows: titles unknown
        ['hops', 'unknown']
    """
    lo, hi = _checked_hops(min_hops, max_hops)
    if isinstance(walks, bool) or not isinstance(walks, (int, np.integer)) or walks < 1:
        raise ValueError(f"walks: expected a positive number of walks, got {walks!r}")
    check_seed(seed, "--seed / pool.seed")
    check_walk_memory(walks, hi)  # before the graph is loaded: an absurd --walks fails at once
    graph = CSRGraph.from_store(con)
    if graph.n_edges == 0:
        raise ValueError("the store has no edges: build a world (`workbench world`) or import a source first")
    noise, titles = _node_noise(con, graph)
    nodes, rels = random_walks(graph, walks, (lo, hi), seed)
    keep, rejections = filters.apply(
        nodes, rels, noise, min_hops=lo,
        functional=_functional_mask(con, graph) if functional_only else None,
        unique_graph=graph if unique_grounding else None)
    hashes, chosen = _first_walk_per_hash(nodes, np.flatnonzero(keep), titles, rejections)
    params = {"functional_only": functional_only, "unique_grounding": unique_grounding,
              "min_relational_hops": filters.MIN_RELATIONAL_HOPS, "short_title_chars": filters.SHORT_TITLE_CHARS}
    if retrieval_verify:
        ok = _retrieval_verified(con, graph, nodes[chosen], rels[chosen], titles, rejections, search)
        hashes, chosen = [h for h, k in zip(hashes, ok) if k], chosen[ok]
        params["retrieval_verify"] = True
    shares = chain_checks.parse_hop_ratio(hop_ratio, lo, hi)
    if shares is not None:
        kept = chain_checks.hop_ratio_keep(filters.hop_counts(rels[chosen]), shares, seed)
        if len(kept) < len(chosen):
            rejections["hop_ratio"] = len(chosen) - len(kept)
        hashes, chosen = [hashes[i] for i in kept], chosen[kept]
        params["hop_ratio"] = hop_ratio
    build = [seed, walks, lo, hi, json.dumps(params), json.dumps(rejections)]
    build_id, n_evidence = _write_g0(con, *_chain_frames(graph, nodes[chosen], rels[chosen], hashes), build, force)
    return {"build_id": build_id, "walks": walks, "chains": len(hashes),
            "rejected": walks - len(hashes), "rejections": rejections, "evidence": n_evidence}


def _retrieval_verified(con, graph: CSRGraph, path: np.ndarray, rels: np.ndarray, titles: list, rejections: dict,
                        search=None) -> np.ndarray:
    """Mask of the walks ``path`` that pass Dr. Free's retrieval verification (``chain_checks``);
    the others are counted in ``rejections`` by reason."""
    if search is None:
        from workbench.search.tool import SearchTool

        search = SearchTool(con, index="bm25", topk=3, cache=False)
    node_ids = [[int(graph.node_ids[i]) for i in row if i >= 0] for row in path.tolist()]
    first = dict(con.execute("SELECT entity_id, arg_min(text, paragraph) FROM passages WHERE entity_id IN "
                             "(SELECT unnest(?)) GROUP BY entity_id", [sorted({r[0] for r in node_ids})]).fetchall())
    verdicts = chain_checks.retrieval_verdicts(
        node_ids, [[titles[i] for i in row if i >= 0] for row in path.tolist()],
        [[graph.labels[r] for r in row if r >= 0] for row in rels.tolist()],
        [first.get(r[0]) for r in node_ids], search, topk=getattr(search, "topk", 3))
    for reason in chain_checks.RETRIEVAL_REASONS:
        n = sum(v == reason for v in verdicts)
        if n:
            rejections[reason] = n
    return np.array([v is None for v in verdicts], dtype=bool)


def _checked_hops(min_hops: int, max_hops: int) -> tuple[int, int]:
    lo, hi = hop_range((min_hops, max_hops))
    if lo < filters.MIN_RELATIONAL_HOPS:
        raise ValueError(f"min_hops: the paper requires at least {filters.MIN_RELATIONAL_HOPS} relational hops "
                         f"(L - 1 >= 2), got {min_hops}")
    return lo, hi


def _first_walk_per_hash(nodes: np.ndarray, kept: np.ndarray, titles: list, rejections: dict):
    """Dedup (section 3.4): the first kept walk with each ``chain_hash`` becomes a chain; later ones
    are counted in ``rejections['duplicate']``. Returns (hashes, their walks' rows in ``nodes``)."""
    lower = [t.lower() if t is not None else "" for t in titles]
    firsts: dict[str, int] = {}
    for j, row in enumerate(nodes[kept].tolist()):
        firsts.setdefault(_digest([lower[i] for i in row if i >= 0]), j)
    if len(firsts) < len(kept):
        rejections["duplicate"] = len(kept) - len(firsts)
    return list(firsts), kept[list(firsts.values())]


def _chain_frames(graph: CSRGraph, path: np.ndarray, rels: np.ndarray, hashes: list[str]):
    """The new chains and chain_nodes rows, their chain ids as offsets (``idx``) from 0."""
    rel = np.concatenate([rels, np.full((len(path), 1), -1, np.int32)], axis=1)
    on = path >= 0
    idx, position = np.nonzero(on)
    node_labels = np.array(list(graph.labels) + [None], dtype=object)  # rel id -1 -> None (last node)
    chains = pd.DataFrame({"idx": np.arange(len(hashes), dtype=np.int64), "hash": pd.Series(hashes, dtype=object),
                           "hops": filters.hop_counts(rels).astype(np.int32)})
    nodes = pd.DataFrame({"idx": idx.astype(np.int64), "position": position.astype(np.int32),
                          "entity_id": graph.node_ids[path[on]], "relation": node_labels[rel[on]]})
    return chains, nodes


def _same_g0(con, chains: pd.DataFrame, build: list) -> tuple[int, int] | None:
    """(build id, G_0's evidence rows) when the store's latest build had the same settings and G_0
    holds exactly these chains; else None."""
    last = con.execute("SELECT build_id, seed, walks, min_hops, max_hops, params FROM pool_builds "
                       "ORDER BY build_id DESC LIMIT 1").fetchall()
    if not last or list(last[0][1:5]) != build[:4] or json.loads(last[0][5]) != json.loads(build[4]):
        return None
    stored = [h for (h,) in con.execute("SELECT hash FROM chains WHERE run IS NULL ORDER BY hash").fetchall()]
    if stored != sorted(chains["hash"]):
        return None
    (n,) = con.execute("SELECT count(*) FROM evidence WHERE run IS NULL").fetchall()[0]
    return int(last[0][0]), int(n)


def _write_g0(con, chains: pd.DataFrame, nodes: pd.DataFrame, build: list, force: bool) -> tuple[int, int]:
    """Replace G_0 with ``chains`` and ``nodes``, add their evidence and the ``pool_builds`` row
    (``build``: seed, walks, min_hops, max_hops, params, rejections) in one transaction; returns
    (build_id, evidence rows written)."""
    # Registered before the transaction: DuckDB refuses ``register`` while a DELETE's row-count
    # result is pending on the connection. Ids are offsets, made absolute inside the transaction.
    con.register("_new_chains", chains)
    con.register("_new_nodes", nodes)
    try:
        with store.transaction(con):
            same = _same_g0(con, chains, build)
            if same is not None:
                return same  # the same build on the same world: G_0 (and the runs on it) stay as they are
            runs = _runs_on_g0(con)
            if runs and not force:
                raise ValueError(f"G_0 is in use by run(s) {runs} (write-back evidence or candidates on G_0 "
                                 "chains); rebuilding would orphan them: pass force=True (--force) to rebuild anyway")
            _delete_g0(con)
            first = store.next_id(con, "chains", "chain_id")
            con.execute("""INSERT INTO chains (chain_id, hash, hops, run, created_round, origin)
                           SELECT $first + idx, hash, hops, NULL, 0, 'walk' FROM _new_chains""", {"first": first})
            con.execute("""INSERT INTO chain_nodes SELECT $first + idx, position, entity_id, relation
                           FROM _new_nodes""", {"first": first})
            n_before = con.execute("SELECT count(*) FROM evidence").fetchone()[0]
            con.execute(_EVIDENCE_SQL, {"first": first, "base": store.next_id(con, "evidence", "evidence_id")})
            n_evidence = con.execute("SELECT count(*) FROM evidence").fetchone()[0] - n_before
            build_id = store.next_id(con, "pool_builds", "build_id")
            con.execute("INSERT INTO pool_builds (build_id, seed, walks, min_hops, max_hops, params, rejections) "
                        "VALUES (?, ?, ?, ?, ?, ?, ?)", [build_id, *build])
    finally:
        con.unregister("_new_chains")
        con.unregister("_new_nodes")
    return build_id, int(n_evidence)


def visible(run: str | None, round: int | None) -> tuple[str, str, dict]:
    """WHERE clauses for the chains (alias ``c``) and the evidence (alias ``v``) of G_t, and their
    params: rows of G_0 (run NULL) or of ``run``, from rounds <= ``round`` (None: every round).

    Example:
        >>> visible("r1", 2)[2]
        {'run': 'r1', 'round': 2}
    """
    chains = "(c.run IS NULL OR c.run = $run) AND ($round IS NULL OR c.created_round <= $round)"
    evidence = "(v.run IS NULL OR v.run = $run) AND ($round IS NULL OR v.round <= $round)"
    return chains, evidence, {"run": run, "round": round}


def _check_round(round) -> None:
    if round is not None and (not isinstance(round, (int, np.integer)) or round < 0):
        raise ValueError(f"round: expected a round number t >= 0, got {round!r}")


def load_pool(con, run: str | None = None, round: int | None = None, chain_ids=None,
              evidence: bool = True) -> list[Chain]:
    """Reconstruct G_t: chains with ``run`` NULL or ``run``, created in a round <= ``round``,
    with the evidence (``run`` NULL or ``run``, round <= ``round``) they carry at that round.

    ``run=None`` is G_0 alone; ``round=None`` means every round. ``chain_ids`` restricts (and
    orders) the result. Ordered by chain_id otherwise. ``evidence=False`` skips loading evidence.

    Example:
        >>> from workbench import store
        >>> con = store.connect(":memory:")
        >>> load_pool(con, run="r1", round=2)
        []
    """
    _check_round(round)
    where_c, where_v, params = visible(run, round)
    if chain_ids is not None:
        chain_ids = [int(i) for i in chain_ids]
        where_c += " AND c.chain_id IN (SELECT unnest($ids::BIGINT[]))"
        params["ids"] = chain_ids
    chains = con.execute(f"""SELECT chain_id, hash, hops, run, created_round, origin FROM chains c
                             WHERE {where_c} ORDER BY chain_id""", params).fetchall()
    if chain_ids is not None:
        by_id = {c[0]: c for c in chains}
        missing = [i for i in chain_ids if i not in by_id]
        if missing:
            raise ValueError(f"chain_ids: not in this pool (run={run!r}, round={round!r}): {missing[:5]}")
        chains = [by_id[i] for i in chain_ids]
    out = {c[0]: Chain(c[0], c[1], c[2], c[3], c[4], c[5], [], [], []) for c in chains}
    if not out:
        return []
    for cid, eids, titles, rels in con.execute(f"""
            SELECT n.chain_id, list(n.entity_id ORDER BY n.position), list(e.title ORDER BY n.position),
                   list(n.relation ORDER BY n.position) FILTER (WHERE n.relation IS NOT NULL)
            FROM chain_nodes n JOIN chains c USING (chain_id) LEFT JOIN entities e USING (entity_id)
            WHERE {where_c} GROUP BY n.chain_id""", params).fetchall():
        chain = out[cid]
        chain.entity_ids, chain.titles, chain.relations = eids, titles, rels or []
    for row in [] if not evidence else con.execute(f"""
            SELECT v.chain_id, v.position, v.target, v.entity_id, v.passage_id, v.text, v.source, v.run,
                   v.round, v.trajectory_id
            FROM evidence v JOIN chains c USING (chain_id)
            WHERE {where_c} AND {where_v} ORDER BY v.chain_id, v.evidence_id""", params).fetchall():
        if row[0] in out:
            out[row[0]].evidence.append(Evidence(*row[1:]))
    return [out[c[0]] for c in chains]


def evidence_counts(con, run: str | None = None, round: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(chain ids of G_t in id order, evidence rows each carries at that round)."""
    _check_round(round)
    where_c, where_v, params = visible(run, round)
    res = con.execute(f"""
        SELECT c.chain_id, count(v.evidence_id) AS n FROM chains c
        LEFT JOIN evidence v ON v.chain_id = c.chain_id AND {where_v}
        WHERE {where_c} GROUP BY c.chain_id ORDER BY c.chain_id""", params).fetchnumpy()
    return np.asarray(res["chain_id"], dtype=np.int64), np.asarray(res["n"], dtype=np.int64)


def sample_chains(con, k: int, seed: int = 0, run: str | None = None, round: int | None = None,
                  weighted: bool = False) -> list[Chain]:
    """Draw ``k`` distinct chains of G_t, uniformly or (``weighted``) with probability proportional
    to their evidence count at round t, so chains enriched by write-back come up more often
    (ours: the paper samples "directly from the current pool" without naming a distribution).
    The same store, arguments and seed give the same chains in the same order.

    Example:
        >>> from workbench import store
        >>> sample_chains(store.connect(":memory:"), k=0)
        []
    """
    if k < 0:
        raise ValueError(f"k: expected a number of chains >= 0, got {k}")
    ids, counts = evidence_counts(con, run, round)
    if k > len(ids):
        raise ValueError(f"k: the pool (run={run!r}, round={round!r}) holds {len(ids)} chains, asked for {k}")
    if k == 0:
        return []
    p = None
    if weighted:
        w = counts.astype(np.float64)
        if w.sum() == 0 or np.count_nonzero(w) < k:
            raise ValueError(f"weighted: fewer than k={k} chains carry evidence in this pool")
        p = w / w.sum()
    picked = np.random.default_rng(seed).choice(ids, size=k, replace=False, p=p)
    return load_pool(con, run, round, chain_ids=[int(i) for i in picked])


def export_pool(con, path, run: str | None = None, round: int | None = None, passages: bool = True,
                force: bool = False) -> int:
    """Write G_t as JSON lines, one chain a line (``Chain.to_json``: entities, relations, hash, hops,
    the evidence count), with, by default, its evidence as ``passages`` -- what ``load_pool`` gives:
    each node passage and edge passage with its position, target ('node' or 'edge'), entity and
    passage ids, text, source ('walk' or 'writeback'), run and round. Sorted by hash then chain_id,
    so two pools diff line by line. Returns the number of chains written. ``path`` is never the
    store itself, nor a file already there unless ``force`` (``paths.output_file``); it is written
    whole under a temporary name and renamed into place.

    Example:
        >>> import tempfile, os
        >>> from workbench import store
        >>> export_pool(store.connect(":memory:"), os.path.join(tempfile.mkdtemp(), "pool.jsonl"))
        0
    """
    from dataclasses import asdict

    chains = sorted(load_pool(con, run, round, evidence=passages), key=lambda c: (c.hash, c.chain_id))
    counts = dict(zip(*(a.tolist() for a in evidence_counts(con, run, round))))
    path = paths.output_file(path, "FILE", inputs=[store.file_of(con)], force=force)
    with paths.atomic_output(path) as tmp, tmp.open("w", encoding="utf-8") as f:
        for chain in chains:
            record = chain.to_json(counts[chain.chain_id])
            if passages:
                record["passages"] = [asdict(e) for e in chain.evidence]
            f.write(json.dumps(record, ensure_ascii=False, sort_keys=True) + "\n")
    return len(chains)
