"""What a knowledge source and its chain pool G_0 look like, in numbers that compare across sources
(issue 45: the real-text sample beside TinyWorld).

Example:
    >>> from workbench import store
    >>> from workbench.kg.pool import build_pool
    >>> con = store.connect(":memory:")
    >>> _ = con.execute("INSERT INTO entities VALUES (1,'Ada','person','entity','t'), "
    ...     "(2,'Brova','city','entity','t'), (3,'Celand','country','entity','t')")
    >>> _ = con.execute("INSERT INTO edges VALUES (1,2,'born in','t'), (2,3,'links to','t')")
    >>> s = pool_stats(con, build_pool(con, walks=50, seed=0))
    >>> s["chains"], s["hops=2"], s["generic_hop_share"]
    (1, 1, 0.5)
"""

from __future__ import annotations

from workbench.kg.filters import REASONS
from workbench.kg.pool import load_pool
from workbench.kg.sources import GENERIC_LABEL


def source_stats(con) -> dict:
    """Entities, passages, edges, relation labels, the share of edges labelled by a cue or Wikidata
    (not the generic 'links to'), and the out-degree of the entities that have an edge."""
    entities, passages = con.execute("SELECT (SELECT count(*) FROM entities), (SELECT count(*) FROM passages)").fetchone()
    edges, labels, generic, sources, mean_out, max_out = con.execute(
        "SELECT count(*), count(DISTINCT relation), count(*) FILTER (WHERE relation = ?), count(DISTINCT src), "
        "count(*) / greatest(count(DISTINCT src), 1), "
        "(SELECT coalesce(max(n), 0) FROM (SELECT count(*) AS n FROM edges GROUP BY src)) FROM edges",
        [GENERIC_LABEL]).fetchone()
    return {"entities": entities, "passages": passages, "edges": edges, "relation_labels": labels,
            "labelled_edge_share": round(1 - generic / edges, 3) if edges else 0.0,
            "entities_with_edges": sources, "mean_out_degree": round(float(mean_out), 2), "max_out_degree": max_out}


def pool_stats(con, build: dict) -> dict:
    """A G_0 build's walks, chains and rejections by filter (``build_pool``'s result; every reason
    of ``filters.REASONS`` and 'duplicate' listed, 0 when none), its chains by hop count, their
    mean evidence rows and the share of their hops that carry the generic label."""
    chains = load_pool(con)
    hops = [c.hops for c in chains]
    rels = [r for c in chains for r in c.relations]
    out = {"walks": build["walks"], "chains": build["chains"], "rejected": build["rejected"]}
    out.update({f"rejected: {reason}": build["rejections"].get(reason, 0) for reason in (*REASONS, "duplicate")})
    for h in range(min(hops, default=2), max(hops, default=2) + 1):
        out[f"hops={h}"] = hops.count(h)
    out["mean_hops"] = round(sum(hops) / len(hops), 3) if hops else 0.0
    out["distinct_entities_in_chains"] = len({e for c in chains for e in c.entity_ids})
    out["mean_evidence_rows"] = round(sum(len(c.evidence) for c in chains) / len(chains), 2) if chains else 0.0
    out["generic_hop_share"] = round(rels.count(GENERIC_LABEL) / len(rels), 3) if rels else 0.0
    return out
