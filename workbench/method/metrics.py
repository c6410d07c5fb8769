"""A round's per-round metrics (the ``run_metrics`` rows), read off its :class:`round.RoundResult`:
the solver's rewards and path support, the gate's verdicts, seed fallback, hops and p_s of
generated vs seed questions (seed 001), the answers' entity types (issue 15), the update's KL,
entropy and loss, and the keys a task source or a multi-term reward adds (``RoundResult.
source_metrics``, ``reward_metrics``) and a method's own (``RoundResult.extra``).

Example:
    >>> tool_use_metrics([], kg_tool=False)
    {}
"""

from __future__ import annotations

from collections import Counter
from types import SimpleNamespace

import numpy as np

from workbench.method.gate import answer_position
from workbench.method.round import Rollout, RoundResult, Slot, gold_entities


def round_metrics(result: RoundResult, tau_path: float) -> dict:
    """The round's per-round metrics (``run_metrics``), less what the store adds (validation EM,
    write-back counts, pool size)."""
    scores = [r.score for r in result.rollouts]
    s_path = np.asarray([s.s_path for s in scores]) if scores else np.zeros(1)
    gen = [s for s in result.slots if s.source == "generated"]
    seed = [s for s in result.slots if s.source == "seed"]
    candidates = result.candidates
    proposer = [c.reward for c in candidates if c.reward is not None]

    def mean(values):
        return float(np.mean(values)) if values else None

    return {
        "round": result.round,
        "solver_reward": float(np.mean([s.reward for s in scores])), "r_ans": float(np.mean([s.r_ans for s in scores])),
        "s_path_mean": float(s_path.mean()), "s_path_p50": float(np.median(s_path)),
        "s_path_pass_rate": float((s_path >= tau_path).mean()),
        "s_path_correct_mean": float(np.mean([s.s_path for s in scores if s.r_ans] or [0.0])),
        "proposer_reward": float(np.mean(proposer)) if proposer else 0.0,
        "admitted_rate": (sum(c.verdict.admitted for c in candidates) / len(candidates)) if candidates else 0.0,
        "passed_rate": (sum(c.verdict.passed for c in candidates) / len(candidates)) if candidates else 0.0,
        "rejections": dict(sorted(Counter(c.verdict.reason.split(":")[0] for c in candidates
                                          if not c.verdict.passed).items())),
        "seed_fallback_rate": len(seed) / len(result.slots) if result.slots else 0.0,
        "avg_hops_generated": mean([s.hops for s in gen]), "avg_hops_seed": mean([s.hops for s in seed]),
        "p_s_generated": mean([s.p_s for s in gen]), "p_s_seed": mean([s.p_s for s in seed]),
        **({"answer_types_generated": answer_type_counts(gen, result.entities),
            "answer_types_seed": answer_type_counts(seed, result.entities)} if result.entities is not None else {}),
        "kl": result.update["kl"], "kl_coef": result.update["kl_coef"], "entropy": result.update["entropy"],
        "loss": result.update["loss"], "clip_fraction": result.update.get("clip_fraction", 0.0),
        "skipped_update": result.update["skipped"],
        "response_length": float(np.mean([r.trajectory.n_generated for r in result.rollouts])),
        "search_cache_hit_rate": result.search_cache_hit_rate,
        **result.source_metrics,  # EoG's Fig. 7 counts; nothing for the core's task sources
        **tool_use_metrics(result.rollouts, result.kg_tool, result.reward_metrics),
        **result.extra,
    }


# An answer's type where it names no chain entity (an imported question stored without a chain, a
# "yes" or a date answer), and where its entity has no ``entities.type`` (imported stores): ours.
LITERAL_ANSWER, UNTYPED_ANSWER = "literal", "untyped"


def answer_entity(slot: Slot, titles: dict[int, str]) -> int | None:
    """The chain entity a slot's answer names: for the first gold answer that normalises to a chain
    entity's title (``titles``), that entity (the gate's ``answer_position`` rule); None when no
    answer does. Not always the chain's last entity: a comparison's answer is either subject, and a
    generated question may ask for any entity of its chain (Eq. 2).

    Example:
        >>> answer_entity(Slot("Which is older?", ["Ann"], 2, "seed", gold_chain=[1, 2]), {1: "Ann", 2: "Bo"})
        1
        >>> answer_entity(Slot("Is it?", ["yes"], 2, "seed", gold_chain=[1, 2]), {1: "Ann", 2: "Bo"}) is None
        True
    """
    ids = gold_entities(slot)
    chain = SimpleNamespace(titles=[titles.get(e, "") for e in ids])
    return next((ids[i] for a in slot.answers if (i := answer_position(chain, a)) is not None), None)


def answer_type_counts(slots: list[Slot], entities: dict[int, tuple[str, str | None]]) -> dict[str, int]:
    """Slots by their answer's type (``answer_types_generated`` / ``answer_types_seed``, issue 15,
    beside seed 001's hops and p_s of generated vs seed questions): the ``entities.type`` of the
    entity the answer names (:func:`answer_entity`), ``literal`` where it names none, ``untyped``
    where that entity has no type; sorted by type. ``entities`` maps an id to its (title, type).

    Example:
        >>> ents = {1: ("Ann", "person"), 2: ("Rome", "city"), 3: ("1932", None)}
        >>> answer_type_counts([Slot("q?", ["Rome"], 1, "seed", gold_chain=[1, 2]),
        ...                     Slot("q?", ["1932"], 1, "seed", gold_chain=[1, 3]),
        ...                     Slot("q?", ["yes"], 1, "seed")], ents)
        {'city': 1, 'literal': 1, 'untyped': 1}
    """
    titles = {e: title for e, (title, _) in entities.items()}
    types = Counter()
    for slot in slots:
        e = answer_entity(slot, titles)
        types[LITERAL_ANSWER if e is None else (entities[e][1] or UNTYPED_ANSWER)] += 1
    return dict(sorted(types.items()))


def chain_entities(con, slots: list[Slot]) -> dict[int, tuple[str, str | None]]:
    """(title, type) of every entity on the slots' chains, in one store query: a round's lookup for
    :func:`answer_type_counts`.

    Example:
        >>> from workbench import store
        >>> con = store.connect(":memory:")
        >>> _ = con.execute("INSERT INTO entities (entity_id, title, type) VALUES (1, 'Ann', 'person')")
        >>> chain_entities(con, [Slot("q?", ["Ann"], 1, "seed", gold_chain=[1, 5])])
        {1: ('Ann', 'person')}
    """
    ids = sorted({e for s in slots for e in gold_entities(s)})
    if not ids:
        return {}
    rows = con.execute("SELECT entity_id, title, type FROM entities WHERE entity_id IN (SELECT unnest(?))",
                       [ids]).fetchall()
    return {int(e): (title, kind) for e, title, kind in rows}


def tool_use_metrics(rollouts: list[Rollout], kg_tool: bool, reward_metrics: dict | None = None) -> dict:
    """The solver's tool use: ``reward_metrics`` (a multi-term reward's mean terms, DynaSearcher's
    ``mr_*``, ``rewards.SolverReward``), then searches per rollout by tool (``searches_doc``,
    ``searches_kg``). Empty for a round whose reward has no terms and whose solver had no KG tool,
    so other methods' metrics are unchanged.

    Example:
        >>> tool_use_metrics([], kg_tool=False)
        {}
    """
    if not rollouts or (not kg_tool and not reward_metrics):
        return {}
    out = dict(reward_metrics or {})
    out["searches_doc"] = float(np.mean([len(r.trajectory.queries) for r in rollouts]))
    out["searches_kg"] = float(np.mean([len(r.trajectory.kg_queries) for r in rollouts]))
    return out


CLOCK_KEYS = ("time_", "search_cache")  # seconds, and the search cache's counts (a resumed run starts it empty)


def without_clock(rows: list[dict]) -> list[dict]:
    """Round metrics less the keys that differ between two runs of one seed (:data:`CLOCK_KEYS`):
    what a resumed, repeated or reordered run must reproduce exactly.

    Example:
        >>> without_clock([{"round": 0, "kl": 0.1, "time_update": 2.5, "search_cache_hit_rate": 0.7}])
        [{'round': 0, 'kl': 0.1}]
    """
    return [{k: v for k, v in r.items() if not k.startswith(CLOCK_KEYS)} for r in rows]
