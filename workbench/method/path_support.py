"""Path support verification (seed 000, section 3.3, Eqs. 8-9).

Eq. 8: the entity path a trajectory traversed, :func:`extract_path` (deterministic, ours) or any
callable of the same signature (an LLM judge, for capable models: ``PathExtractor``), over the
entities :func:`grounded` in the trajectory's retrieved passages only.

Relation consistency M(u, v) against the current evidence graph G_t (:class:`EvidenceGraph`):

    M_direct(u, v) = max over records d mentioning both of  alpha*order_d + beta*text_d + gamma*co_d
    M_bridge(u, v) = eta * max_z min(M_direct(u, z), M_direct(z, v))
    M(u, v)        = max(M_direct(u, v), M_bridge(u, v))

A *record* d is one chain of G_t with its evidence rows. The entities it *mentions* are its chain
nodes plus the entities owning its evidence passages. For an ordered pair (u, v), ours:

* order_d = 1 if u immediately precedes v in d's entity sequence (the relation runs u -> v),
  0.5 if v immediately precedes u (traversed against the relation), else 0.
* text_d = mutual mention fraction = (1[a passage of u in d names v] + 1[a passage of v in d names
  u]) / 2, where "a passage of u" is an evidence passage of d whose entity is u and "names" is a
  case-insensitive whole-word match of the title.
* co_d = 1 if one evidence passage of d names both titles, else 0.

Then Eq. 9 (:func:`workbench.method.rewards.path_score`) turns the step supports into S_path, and a
trajectory passes when S_path >= tau_path. Pair scores are precomputed once per round (dicts); the
bridge is computed on first use and cached, so scoring is dictionary lookups.

Example:
    >>> g = EvidenceGraph.from_records(
    ...     [Record([1, 2, 3], [(1, "Ann was born in Rome."), (2, "Rome is in Italy.")])],
    ...     {1: "Ann", 2: "Rome", 3: "Italy"})
    >>> g.support(1, 2)   # order 1, text 1/2, co 1: 0.5*1 + 0.25*0.5 + 0.25*1
    0.875
    >>> round(g.path_support([1, 2, 3]).s_path, 4)   # exp(mean(log(0.875 + 0.01))) twice
    0.885
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from typing import Callable, Mapping, NamedTuple, Sequence

from workbench import store
from workbench.config import MethodConfig
from workbench.kg.pool import visible
from workbench.method.rewards import path_score
from workbench.scoring import normalize_answer


@dataclass(frozen=True)
class PathSupportParams:
    """Weights and thresholds of Eqs. 8-9. All ours: the paper's appendix values are unavailable.

    alpha + beta + gamma = 1 keeps M_direct in [0, 1]; order weighs most because a record's relation
    sequence is the graph's own claim that u leads to v; eta < 1 makes an indirect (one-bridge)
    association count for less than a direct one; eps smooths log(0) in Eq. 9 so one unsupported
    hop scores near 0 rather than -inf. The defaults are ``MethodConfig``'s (``method.path_*`` and
    ``method.tau_path``, where each is documented); :meth:`of` reads a run's.
    """

    alpha: float = MethodConfig.path_order  # weight of order_d
    beta: float = MethodConfig.path_text  # weight of text_d (not Eq. 7's beta)
    gamma: float = MethodConfig.path_cooccur  # weight of co_d
    eta: float = MethodConfig.path_eta  # bridge discount
    eps: float = MethodConfig.path_eps  # Eq. 9 smoothing
    tau_path: float = MethodConfig.tau_path  # pass threshold (section 3.3)

    @classmethod
    def of(cls, m: MethodConfig) -> "PathSupportParams":
        """The path-support parameters of a method configuration.

        Example:
            >>> PathSupportParams.of(MethodConfig(tau_path=0.7)).tau_path
            0.7
        """
        return cls(m.path_order, m.path_text, m.path_cooccur, m.path_eta, m.path_eps, m.tau_path)

    def __post_init__(self):
        for name in ("alpha", "beta", "gamma", "eta", "eps", "tau_path"):
            if getattr(self, name) < 0:
                raise ValueError(f"PathSupportParams.{name} must be >= 0, got {getattr(self, name)!r}")
        if self.alpha + self.beta + self.gamma > 1.0 + 1e-9 or self.eta > 1.0:
            raise ValueError("PathSupportParams: alpha + beta + gamma and eta must be <= 1 (M stays in [0, 1])")


@dataclass(frozen=True)
class Record:
    """One G_t record: a chain's entity sequence and its evidence (owner entity id, text) pairs."""

    entity_ids: list[int]
    passages: list[tuple[int | None, str]] = field(default_factory=list)


class PathSupport(NamedTuple):
    """The verdict of Eq. 9 on one path: S_path, the step supports M and the pass flag."""

    s_path: float
    steps: tuple[float, ...]
    passed: bool


_WORD = re.compile(r"\w+")


def word_key(text: str) -> str:
    """Lowercase words joined by single spaces and padded, so ' title ' is a whole-word match."""
    return " " + " ".join(_WORD.findall(text.lower())) + " "


# Titles recur across every trajectory of a round: cache their match key and normalised form.
_title_key = functools.lru_cache(maxsize=1 << 18)(word_key)
_title_norm = functools.lru_cache(maxsize=1 << 18)(normalize_answer)


class EvidenceGraph:
    """The relation-consistency index M(u, v) over the records of G_t (see the module docstring)."""

    def __init__(self, direct: dict[tuple[int, int], float], params: PathSupportParams):
        self.params = params
        self._direct = direct
        self._out: dict[int, dict[int, float]] = {}
        self._in: dict[int, dict[int, float]] = {}
        for (u, v), m in direct.items():
            self._out.setdefault(u, {})[v] = m
            self._in.setdefault(v, {})[u] = m
        self._bridge: dict[tuple[int, int], float] = {}
        self._support: dict[tuple[int, int], float] = {}

    @classmethod
    def from_records(cls, records: Sequence[Record], titles: Mapping[int, str],
                     params: PathSupportParams = PathSupportParams()) -> "EvidenceGraph":
        """Precompute M_direct for every ordered pair of entities some record mentions.

        ``titles`` maps entity id -> title for every entity the records mention.
        """
        a, b, c = params.alpha, params.beta, params.gamma
        keys = {e: word_key(t) for e, t in titles.items()}
        direct: dict[tuple[int, int], float] = {}
        for rec in records:
            seq = list(rec.entity_ids)
            ents = list(dict.fromkeys(seq + [o for o, _ in rec.passages if o is not None]))
            missing = [e for e in ents if e not in keys]
            if missing:
                raise ValueError(f"record {seq}: no title for entities {missing}")
            forward = set(zip(seq, seq[1:]))
            named_by: dict[int, set[int]] = {}  # owner -> entities its passages name
            co: set[tuple[int, int]] = set()
            for owner, text in rec.passages:
                words = word_key(text)
                names = [e for e in ents if keys[e] != "  " and keys[e] in words]
                if owner is not None:
                    named_by.setdefault(owner, set()).update(names)
                co.update((u, v) for u in names for v in names if u != v)
            for u in ents:
                for v in ents:
                    if u == v:
                        continue
                    order = 1.0 if (u, v) in forward else 0.5 if (v, u) in forward else 0.0
                    text = ((v in named_by.get(u, ())) + (u in named_by.get(v, ()))) / 2.0
                    score = a * order + b * text + c * ((u, v) in co)
                    if score > direct.get((u, v), 0.0):
                        direct[(u, v)] = score
        return cls(direct, params)

    @classmethod
    def from_store(cls, con, run: str | None = None, round: int | None = None,
                   params: PathSupportParams = PathSupportParams()) -> "EvidenceGraph":
        """The index of G_t: chains and evidence with run NULL (G_0) or ``run``, and round <= ``round``.

        ``run=None`` reads G_0 only; ``round=None`` reads every round.

        Example:
            >>> from workbench import store
            >>> con = store.connect(":memory:")
            >>> EvidenceGraph.from_store(con).support(1, 2)
            0.0
        """
        where_c, where_v, scope = visible(run, round)
        nodes = con.execute(
            f"SELECT n.chain_id, n.entity_id FROM chain_nodes n JOIN chains c USING (chain_id) WHERE {where_c} "
            "ORDER BY n.chain_id, n.position", scope).fetchall()
        evidence = con.execute(
            f"SELECT v.chain_id, v.entity_id, v.text FROM evidence v JOIN chains c USING (chain_id) "
            f"WHERE {where_c} AND {where_v} ORDER BY v.chain_id, v.evidence_id", scope).fetchall()
        seqs: dict[int, list[int]] = {}
        for chain_id, entity_id in nodes:
            seqs.setdefault(chain_id, []).append(int(entity_id))
        texts: dict[int, list[tuple[int | None, str]]] = {}
        for chain_id, entity_id, text in evidence:
            texts.setdefault(chain_id, []).append((None if entity_id is None else int(entity_id), text or ""))
        records = [Record(seq, texts.get(cid, [])) for cid, seq in seqs.items()]
        ids = sorted({e for r in records for e in r.entity_ids} | {o for r in records for o, _ in r.passages
                                                                   if o is not None})
        titles: dict[int, str] = {}
        if ids:
            import pandas as pd

            with store.registered(con, "_ps_ids", pd.DataFrame({"entity_id": ids})):
                titles = dict(con.execute("SELECT e.entity_id, e.title FROM entities e "
                                          "JOIN _ps_ids i USING (entity_id)").fetchall())
        return cls.from_records(records, titles, params)

    def direct(self, u: int, v: int) -> float:
        """M_direct(u, v); 0 when no record mentions both."""
        return self._direct.get((u, v), 0.0)

    def bridge(self, u: int, v: int) -> float:
        """M_bridge(u, v) = eta * max_z min(M_direct(u, z), M_direct(z, v)), z not u or v (cached)."""
        key = (u, v)
        hit = self._bridge.get(key)
        if hit is not None:
            return hit
        out, inn = self._out.get(u, {}), self._in.get(v, {})
        if len(out) > len(inn):
            out, inn = inn, out  # iterate the smaller side; min() is symmetric in its two terms
        best = 0.0
        for z, m in out.items():
            other = inn.get(z)
            if other is not None and z != u and z != v:
                best = max(best, min(m, other))
        self._bridge[key] = value = self.params.eta * best
        return value

    def support(self, u: int, v: int) -> float:
        """M(u, v) = max(M_direct, M_bridge) (cached: scoring a round is dictionary lookups)."""
        m = self._support.get((u, v))
        if m is None:
            m = self._support[(u, v)] = max(self._direct.get((u, v), 0.0), self.bridge(u, v))
        return m

    def path_support(self, path: Sequence[int]) -> PathSupport:
        """Eq. 9 on a path of entity ids: S_path and whether it reaches tau_path.

        Example:
            >>> g = EvidenceGraph({(1, 2): 1.0}, PathSupportParams())
            >>> g.path_support([1, 2])
            PathSupport(s_path=1.0, steps=(1.0,), passed=True)
        """
        steps = tuple(self.support(u, v) for u, v in zip(path, path[1:]))
        s = path_score(steps, self.params.eps)
        return PathSupport(s, steps, len(steps) > 0 and s >= self.params.tau_path)

    def __len__(self) -> int:
        return len(self._direct)


def extract_path(queries: Sequence[str], retrieved_entity_ids: Sequence[int],
                 entity_titles: Mapping[int, str], answer: str | None) -> list[int]:
    """Eq. 8, the deterministic extractor (ours): the entity path a trajectory traversed.

    Rule: an entity is on the path when it is *grounded* (the entity of a passage the trajectory
    retrieved) and *named* by one of the solver's queries (case-insensitive whole-word title match),
    so distractor passages that came back but were never followed are not on the path. Entities are
    ordered by the first query that names them (ties: retrieval order). The path ends at the answer
    entity when the final answer equals (normalised, SQuAD style) the title of an entity in
    ``entity_titles``; an answer entity found earlier on the path is moved to the end.

    ``entity_titles`` maps id -> title for at least the retrieved entities and the candidate answer
    entities (e.g. the originating chain's). A capable model's LLM judge replaces this function
    through the ``PathExtractor`` slot (same signature).

    Example:
        >>> titles = {1: "Kavimo Rutel", 2: "Dagiju", 3: "Pelora", 9: "Noise"}
        >>> extract_path(["Kavimo Rutel birthplace", "Dagiju country"], [1, 9, 2], titles, "Pelora")
        [1, 2, 3]
    """
    qwords = [word_key(q) for q in queries]
    first: dict[int, tuple[int, int]] = {}
    for r, e in enumerate(retrieved_entity_ids):
        if e in first or e not in entity_titles:
            continue
        key = _title_key(entity_titles[e])
        if key == "  ":
            continue
        q = next((i for i, w in enumerate(qwords) if key in w), None)
        if q is not None:
            first[e] = (q, r)
    path = sorted(first, key=first.__getitem__)
    if answer:
        target = normalize_answer(answer)
        match = next((e for e, t in entity_titles.items() if target and _title_norm(t) == target), None)
        if match is not None:
            path = [e for e in path if e != match] + [match]
    return path


def grounded(retrieved_entity_ids: Sequence, retrieved_texts: Sequence[str], candidates: Mapping[int, str]
             ) -> dict[int, str]:
    """The entities of ``candidates`` (id -> title) that appear in a trajectory's retrieved
    passages, the only ones Eq. 8's path may use (section 3.3: "the extracted entities are already
    grounded in the retrieved passages"; path support never grants process reward for what the
    search did not find): the entity of a passage it retrieved (``retrieved_entity_ids``), or one
    whose title a retrieved text names (``retrieved_texts``, the inserted ``<information>`` blocks;
    case-insensitive whole-word match, as :func:`extract_path`'s). Retrieval order, then the rest
    in ``candidates``' order.

    Example:
        >>> grounded([1], ["Ann was born in Rome."], {1: "Ann", 2: "Rome", 3: "Italy"})
        {1: 'Ann', 2: 'Rome'}
    """
    out = {e: candidates[e] for e in retrieved_entity_ids if e in candidates}
    texts = [word_key(t) for t in retrieved_texts]
    for e, title in candidates.items():
        if e not in out and (key := _title_key(title)) != "  " and any(key in t for t in texts):
            out[e] = title
    return out


# The slot for an LLM-judge extractor: same arguments as extract_path, returns entity ids.
PathExtractor = Callable[[Sequence[str], Sequence[int], Mapping[int, str], "str | None"], list[int]]
