"""Verified graph memory: evidence write-back from G_t to G_t+1 (seed 000, section 3.4).

A trajectory is written back when it is correct and path-supported (R_ans = 1 and
S_path >= tau_path). Its retrieved evidence is attached to the matching nodes and edges of

* the ORIGINATING chain (the one its question was generated from), and
* the chain of the entity path it traversed (Eq. 8), deduplicated by
  :func:`workbench.kg.pool.chain_hash` of the lowercased entity sequence: a KNOWN sequence (a chain
  of this run's pool with that hash: G_0 or this run's write-back; usually the originating chain
  itself) only merges new evidence; a NEW sequence becomes a new chain (``origin`` 'writeback',
  ``run``, ``created_round`` = t + 1, the trajectory id) when it passes the paper's chain filters
  (section 3.2: at least two relational hops, no repeated entity, no noise entity;
  ``workbench.kg.filters``), so write-back never adds the single-hop shortcuts or list/year nodes
  that G_0 excludes. The pool's optional filters (``pool.max_hops``, functional-only, unique
  grounding) are not applied to write-back (ours).
  Its relation labels come from the originating chain where the path follows it, else from the
  ``edges`` table, else 'related to'.

Evidence matching (ours): a retrieved passage is attached to a chain's node i when its entity is
that node, and to edge i (node i -> i+1) when its text names both endpoint titles
(case-insensitive whole words). An evidence row (chain, position, target, passage) that the run's
pool already holds is skipped, so replaying a round's write-back changes nothing. Every row records
the run, round t + 1 (it belongs to G_t+1) and the trajectory id; the whole write-back is one
transaction, set-based (Arrow/pandas frames joined in SQL, no row-by-row inserts).

Example:
    >>> from workbench import store
    >>> con = store.connect(":memory:")
    >>> _ = con.execute("INSERT INTO entities VALUES (1,'Ann','person','entity','t'), "
    ...                 "(2,'Rome','city','entity','t'), (3,'Italy','country','entity','t')")
    >>> chain = ChainView(-1, "", [1, 2, 3], ["Ann", "Rome", "Italy"], ["born in", "in"], ["", "", ""])
    >>> item = WriteBackItem(7, chain, 1, 0.9, [1, 2, 3], [RetrievedPassage(10, 1, "Ann was born in Rome.")])
    >>> write_back(con, "r", 0, [item])   # a new 2-hop sequence: a chain; node 0 and edge 0 matched
    {'new_chains': 1, 'merged_evidence': 2, 'skipped_duplicates': 0, 'rejected': 0, 'not_chains': 0}
    >>> write_back(con, "r", 0, [item])
    {'new_chains': 0, 'merged_evidence': 0, 'skipped_duplicates': 2, 'rejected': 0, 'not_chains': 0}
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Sequence

import pandas as pd

from workbench import store
from workbench.config import MethodConfig
from workbench.kg import filters
from workbench.kg.pool import chain_hash
from workbench.method.path_support import word_key

DEFAULT_RELATION = "related to"  # ours: a path step no chain or edge labels


@dataclass(frozen=True)
class ChainView:
    """The chain fields the method reads (Eq. 1): one title and node passage per entity."""

    chain_id: int
    hash: str
    entity_ids: list[int]
    titles: list[str]
    relations: list[str]  # len(titles) - 1 labels, relations[i] links node i to node i + 1
    passages: list[str]


@dataclass(frozen=True)
class RetrievedPassage:
    """One passage a trajectory retrieved."""

    passage_id: int
    entity_id: int
    text: str


@dataclass(frozen=True)
class WriteBackItem:
    """One solver trajectory offered to write-back."""

    trajectory_id: int
    chain: ChainView  # the originating chain (the one its question was generated from)
    r_ans: float
    s_path: float
    path: list[int]  # Eq. 8's entity path, entity ids
    passages: list[RetrievedPassage]


def _is_id(x) -> bool:
    """An integer id (Python or NumPy), not a bool."""
    return isinstance(x, numbers.Integral) and not isinstance(x, bool)


def _validate(i: int, item: WriteBackItem) -> None:
    where = f"write-back item {i} (trajectory {getattr(item, 'trajectory_id', None)!r})"
    if not isinstance(item, WriteBackItem):
        raise ValueError(f"{where}: expected a WriteBackItem, got {type(item).__name__}")
    if not _is_id(item.trajectory_id):
        raise ValueError(f"{where}: trajectory_id must be an int")
    if item.r_ans not in (0, 1):
        raise ValueError(f"{where}: r_ans must be 0 or 1, got {item.r_ans!r}")
    if not all(_is_id(e) for e in item.path):
        raise ValueError(f"{where}: path must be a list of entity ids (ints), got {item.path!r}")
    for p in item.passages:
        if not (isinstance(p, RetrievedPassage) and _is_id(p.passage_id)
                and _is_id(p.entity_id) and isinstance(p.text, str)):
            raise ValueError(f"{where}: bad retrieved passage {p!r} (expected passage_id, entity_id ints and text)")


def _entities(con, ids: set[int]) -> tuple[dict[int, str], set[int]]:
    """Titles of ``ids``, and which of them are noise entities (``filters.noise_codes``)."""
    with store.registered(con, "_wb_ids", pd.DataFrame({"entity_id": sorted(ids)}, dtype="int64")):
        rows = con.execute("SELECT e.entity_id, e.title, e.kind FROM entities e JOIN _wb_ids USING (entity_id)"
                           ).fetchall()
    codes = filters.noise_codes([k for *_, k in rows], [t for _, t, _ in rows])
    return {e: t for e, t, _ in rows}, {e for (e, *_), c in zip(rows, codes) if c}


def is_chain(path: Sequence[int], noise: set[int]) -> bool:
    """Whether an entity path passes the paper's chain filters (section 3.2): at least
    ``filters.MIN_RELATIONAL_HOPS`` hops, no repeated entity, no noise entity.

    Example:
        >>> is_chain([1, 2, 3], set()), is_chain([1, 3], set()), is_chain([1, 2, 1], set()), is_chain([1, 2, 3], {2})
        (True, False, False, False)
    """
    return (len(path) - 1 >= filters.MIN_RELATIONAL_HOPS and len(set(path)) == len(path)
            and not noise.intersection(path))


def _edge_labels(con, pairs: set[tuple[int, int]]) -> dict[tuple[int, int], str]:
    if not pairs:
        return {}
    frame = pd.DataFrame(sorted(pairs), columns=["src", "dst"], dtype="int64")
    with store.registered(con, "_wb_pairs", frame):
        rows = con.execute("SELECT p.src, p.dst, min(e.relation) FROM _wb_pairs p JOIN edges e "
                           "ON e.src = p.src AND e.dst = p.dst GROUP BY p.src, p.dst").fetchall()
    return {(s, d): r for s, d, r in rows}


def write_back(con, run: str, round: int, items: Sequence[WriteBackItem],
               tau_path: float = MethodConfig.tau_path) -> dict:
    """Write the verified evidence of round t's trajectories into G_t+1 (section 3.4).

    Returns counts: ``new_chains`` (new sequences), ``merged_evidence`` (evidence rows written,
    into originating, new or known chains), ``skipped_duplicates`` (rows already in the pool or
    repeated in this batch), ``rejected`` (items failing R_ans = 1 and S_path >= tau_path, or with a
    path of fewer than two entities), ``not_chains`` (accepted items whose new sequence fails the
    chain filters: their evidence still reaches the originating chain, when there is one). ``item.chain.chain_id < 0``
    means no stored originating chain. A malformed item raises ValueError and leaves the store unchanged.
    """
    if not isinstance(run, str) or not run:
        raise ValueError(f"write_back: run must be a non-empty name, got {run!r}")
    if not isinstance(round, int) or round < 0:
        raise ValueError(f"write_back: round must be an int >= 0, got {round!r}")
    for i, item in enumerate(items):
        _validate(i, item)
    accepted = [it for it in items if it.r_ans == 1 and it.s_path >= tau_path and len(it.path) >= 2]
    counts = {"new_chains": 0, "merged_evidence": 0, "skipped_duplicates": 0,
              "rejected": len(items) - len(accepted), "not_chains": 0}
    if not accepted:
        return counts
    with store.transaction(con):
        titles, noise = _entities(con, {e for it in accepted for e in it.path})
        for it in accepted:
            unknown = [e for e in it.path if e not in titles]
            if unknown:
                raise ValueError(f"write-back trajectory {it.trajectory_id}: path entities {unknown} "
                                 "are not in the entities table")
        hashes = [chain_hash([titles[e] for e in it.path]) for it in accepted]
        known = _known_chains(con, run, hashes)
        counts["new_chains"], counts["not_chains"] = _insert_new_chains(con, run, round + 1, accepted, hashes,
                                                                        known, noise)
        rows = _evidence_rows(accepted, hashes, known, titles)
        if rows:
            written = _insert_evidence(con, run, round + 1, rows)
            counts["merged_evidence"] = written
            counts["skipped_duplicates"] = len(rows) - written
    return counts


def _known_chains(con, run: str, hashes: Sequence[str]) -> dict[str, int]:
    """hash -> chain id of the sequences this run's pool already holds (G_0 or its write-back)."""
    with store.registered(con, "_wb_hashes", pd.DataFrame({"hash": sorted(set(hashes))})):
        return dict(con.execute(
            "SELECT c.hash, min(c.chain_id) FROM chains c JOIN _wb_hashes h USING (hash) "
            "WHERE c.run IS NULL OR c.run = ? GROUP BY c.hash", [run]).fetchall())


def _insert_new_chains(con, run: str, out_round: int, accepted: Sequence[WriteBackItem], hashes: Sequence[str],
                       known: dict[str, int], noise: set[int]) -> tuple[int, int]:
    """New sequences that pass the chain filters become chains, one per distinct hash, created by
    its first trajectory (``known`` gains them). Returns (new chains, accepted paths that are not chains)."""
    next_chain = store.next_id(con, "chains", "chain_id")
    new_chains, new_nodes, not_chains = [], [], 0
    label_pairs = {(u, v) for it in accepted for u, v in zip(it.path, it.path[1:])}
    edge_labels: dict | None = None
    for it, h in zip(accepted, hashes):
        if h in known:
            continue
        if not is_chain(it.path, noise):
            not_chains += 1
            continue
        if edge_labels is None:
            edge_labels = _edge_labels(con, label_pairs)
        known[h] = cid = next_chain
        next_chain += 1
        origin = dict(zip(zip(it.chain.entity_ids, it.chain.entity_ids[1:]), it.chain.relations))
        new_chains.append((cid, h, len(it.path) - 1, run, out_round, "writeback", it.trajectory_id))
        for pos, e in enumerate(it.path):
            nxt = it.path[pos + 1] if pos + 1 < len(it.path) else None
            label = None if nxt is None else origin.get((e, nxt)) or edge_labels.get((e, nxt)) or DEFAULT_RELATION
            new_nodes.append((cid, pos, e, label))
    if new_chains:
        chain_frame = pd.DataFrame(new_chains, columns=[
            "chain_id", "hash", "hops", "run", "created_round", "origin", "trajectory_id"])
        with store.registered(con, "_wb_chains", chain_frame):
            con.execute("INSERT INTO chains SELECT * FROM _wb_chains")
        node_frame = pd.DataFrame(new_nodes, columns=["chain_id", "position", "entity_id", "relation"])
        with store.registered(con, "_wb_nodes", node_frame):
            con.execute("INSERT INTO chain_nodes SELECT * FROM _wb_nodes")
    return len(new_chains), not_chains


def _evidence_rows(accepted: Sequence[WriteBackItem], hashes: Sequence[str], known: dict[str, int],
                   titles: dict[int, str]) -> list[tuple]:
    """Candidate evidence rows: every (node | edge) of each target chain (the originating one and
    the path's own) that a retrieved passage matches."""
    rows = []
    for it, h in zip(accepted, hashes):
        targets = {it.chain.chain_id: (it.chain.entity_ids, it.chain.titles)} if it.chain.chain_id >= 0 else {}
        if h in known:
            targets.setdefault(known[h], (it.path, [titles[e] for e in it.path]))
        for cid, (entities, names) in targets.items():
            keys = [word_key(n) for n in names]
            for p in it.passages:
                text = word_key(p.text)
                for pos, e in enumerate(entities):
                    if p.entity_id == e:
                        rows.append((len(rows), cid, pos, "node", p.entity_id, p.passage_id, p.text, it.trajectory_id))
                    if pos + 1 < len(entities) and keys[pos] in text and keys[pos + 1] in text:
                        rows.append((len(rows), cid, pos, "edge", p.entity_id, p.passage_id, p.text, it.trajectory_id))
    return rows


def _insert_evidence(con, run: str, out_round: int, rows: list[tuple]) -> int:
    """Insert the rows the run's pool does not hold yet (first of each duplicate); returns how many."""
    frame = pd.DataFrame(rows, columns=["seq", "chain_id", "position", "target", "entity_id", "passage_id",
                                        "text", "trajectory_id"])
    with store.registered(con, "_wb_rows", frame):
        first = store.next_id(con, "evidence", "evidence_id")
        (written,) = con.execute("""
            INSERT INTO evidence (evidence_id, chain_id, position, target, entity_id, passage_id, text,
                                  source, run, round, trajectory_id)
            WITH firsts AS (
                SELECT * FROM _wb_rows QUALIFY row_number() OVER (
                    PARTITION BY chain_id, position, target, passage_id ORDER BY seq) = 1),
            fresh AS (
                SELECT f.* FROM firsts f WHERE NOT EXISTS (
                    SELECT 1 FROM evidence e WHERE e.chain_id = f.chain_id AND e.position = f.position
                    AND e.target = f.target AND e.passage_id = f.passage_id
                    AND (e.run IS NULL OR e.run = $run)))
            SELECT $first + row_number() OVER (ORDER BY seq) - 1, chain_id, position, target, entity_id,
                   passage_id, text, 'writeback', $run, $round, trajectory_id FROM fresh
            """, {"first": first, "run": run, "round": out_round}).fetchall()[0]
    return int(written)
