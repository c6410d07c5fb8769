"""Every row a training run writes, and their undo: the one owner of a run's persistence.

A round is one unit: :meth:`RunStore.commit_round` writes its generated questions, trajectories,
gate verdicts, write-back (section 3.4, G_t -> G_t+1) and metrics in ONE transaction, so a store
holds whole rounds only, whatever stops the process. :meth:`RunStore.forget_from` removes a run's
rounds from a given one on (a resume from an older checkpoint, or ``--overwrite``).

Where a run's rows live (``workbench/store.py`` documents the columns):

* ``runs``: one row per run (method, preset, config, status 'running' | 'done' | 'failed');
* ``questions`` (dataset ``generated``, split = the run) and ``generated_questions`` (its round
  and originating chain): admitted generated questions;
* ``trajectories``, ``candidates``, ``run_metrics``: keyed by (run, round);
* ``chains``/``chain_nodes``/``evidence`` with ``run`` set: write-back rows of round t carry
  round t + 1 (they belong to G_t+1).

Example:
    >>> from workbench import store
    >>> rs = RunStore(store.connect(":memory:"), "demo")
    >>> rs.exists(), rs.settings()
    (False, None)
"""

from __future__ import annotations

import json
from typing import Sequence

import pandas as pd

from workbench import store
from workbench.method.gate import Verdict
from workbench.method.memory import RetrievedPassage, WriteBackItem, write_back
from workbench.method.metrics import round_metrics

# Imports stay light (no torch): ``runs show`` reads metrics through this module.
METRIC_KEYS = ("round", "val_em", "solver_reward", "proposer_reward", "admitted_rate", "seed_fallback_rate",
               "pool_chains", "pool_evidence", "kl", "entropy")
NO_WRITE_BACK = {"new_chains": 0, "merged_evidence": 0, "skipped_duplicates": 0, "rejected": 0, "not_chains": 0}


class RunStore:
    """The store rows of one run ``run`` on connection ``con``."""

    def __init__(self, con, run: str):
        self.con, self.run = con, run

    # -- the run ---------------------------------------------------------------------------
    def exists(self) -> bool:
        """Whether the store holds anything of this run (its row, or any round's rows)."""
        return bool(self.con.execute(
            "SELECT EXISTS (SELECT 1 FROM runs WHERE run = $r) OR EXISTS (SELECT 1 FROM run_metrics WHERE run = $r) "
            "OR EXISTS (SELECT 1 FROM trajectories WHERE run = $r)", {"r": self.run}).fetchall()[0][0])

    def settings(self) -> tuple[str, dict] | None:
        """(method, config) the run was started with, or None."""
        row = self.con.execute("SELECT method, config FROM runs WHERE run = ?", [self.run]).fetchall()
        return (row[0][0], json.loads(row[0][1])) if row else None

    def committed_rounds(self) -> list[int]:
        """The rounds whose commit is in the store (their metrics rows), in order."""
        return [t for (t,) in self.con.execute(
            "SELECT DISTINCT round FROM run_metrics WHERE run = ? ORDER BY round", [self.run]).fetchall()]

    def start(self, method: str, cfg, steps: int) -> None:
        """Record the run as running with its settings (replacing its previous row)."""
        with store.transaction(self.con):
            self.con.execute("DELETE FROM runs WHERE run = ?", [self.run])
            self.con.execute(
                "INSERT INTO runs (run, method, preset, seed, config, config_hash, steps, status) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, 'running')",
                [self.run, method, cfg.name, cfg.method.seed, json.dumps(cfg.to_dict()), cfg.hash(), steps])

    def finish(self, status: str) -> None:
        """Mark the run 'done' or 'failed'."""
        self.con.execute("UPDATE runs SET status = ? WHERE run = ?", [status, self.run])

    def forget_from(self, first_round: int) -> None:
        """Delete this run's rows of rounds >= ``first_round`` (``0``: all of them, the ``runs`` row too)."""
        run, t = self.run, first_round
        with store.transaction(self.con):
            self.con.execute("DELETE FROM questions WHERE question_id IN (SELECT question_id FROM "
                             "generated_questions WHERE run = ? AND round >= ?)", [run, t])
            for table in ("generated_questions", "run_metrics", "trajectories", "candidates"):
                self.con.execute(f"DELETE FROM {table} WHERE run = ? AND round >= ?", [run, t])
            # write-back rows of round t belong to G_t+1 (round t + 1)
            self.con.execute("DELETE FROM evidence WHERE run = ? AND round > ?", [run, t])
            self.con.execute("DELETE FROM chain_nodes WHERE chain_id IN (SELECT chain_id FROM chains WHERE run = ? "
                             "AND created_round > ?)", [run, t])
            self.con.execute("DELETE FROM chains WHERE run = ? AND created_round > ?", [run, t])
            if t == 0:
                self.con.execute("DELETE FROM runs WHERE run = ?", [run])

    # -- a round ---------------------------------------------------------------------------
    def commit_round(self, result, val_em: float, tau_path: float, write_back_into: str | None,
                     pool_size, extra: dict | None = None) -> dict:
        """Write round ``result`` (a ``round.RoundResult``; its metrics ``metrics.round_metrics``) whole: generated questions, trajectories,
        verdicts, write-back into ``write_back_into``'s pool (None: none, as without C3) and the
        metrics row (with ``extra``'s metrics); returns the metrics. ``pool_size(con, run, round) ->
        (chains, evidence)`` counts G_t+1 for the metrics.
        """
        import time

        t = result.round
        with store.transaction(self.con):
            self._store_generated(result)
            clock = time.perf_counter()
            traj_ids = store_trajectories(
                self.con, self.run, t, [r.trajectory for r in result.rollouts], [s.question_id for s in result.slots],
                scores=[(r.score.r_ans, r.score.s_path, r.score.reward) for r in result.rollouts])
            for task in result.tasks:
                store_verdicts(self.con, self.run, t, task.chain.chain_id, [c.verdict for c in task.candidates],
                               rewards=[c.reward for c in task.candidates],
                               p_s=[c.slot.p_s if c.slot else None for c in task.candidates])
            wb = NO_WRITE_BACK
            if write_back_into is not None:
                wb = write_back(self.con, write_back_into, t, self._write_back_items(result, traj_ids),
                                tau_path=tau_path)
            n_chains, n_evidence = pool_size(self.con, write_back_into, t + 1)
            metrics = {**round_metrics(result, tau_path), "val_em": val_em, **(extra or {}),
                       "pool_chains": n_chains, "pool_evidence": n_evidence,
                       "writeback_new_chains": wb["new_chains"], "writeback_merged_evidence": wb["merged_evidence"],
                       "writeback_not_chains": wb["not_chains"], "writeback_rejected": wb["rejected"],
                       **result.timings, "time_write_back": time.perf_counter() - clock}
            self.con.execute("INSERT INTO run_metrics VALUES (?, ?, ?)", [self.run, t, json.dumps(metrics)])
        return metrics

    def _store_generated(self, result) -> None:
        generated = [s for s in result.slots if s.source == "generated"]
        if not generated:
            return
        first = store.next_id(self.con, "questions", "question_id")
        for i, slot in enumerate(generated):
            slot.question_id = first + i
            self.con.execute("INSERT INTO questions VALUES (?, 'generated', ?, 'generated', ?, ?, ?, ?, 'proposer')",
                             [slot.question_id, self.run, slot.question, slot.answers, slot.chain.entity_ids,
                              slot.hops])
            self.con.execute("INSERT INTO generated_questions VALUES (?, ?, ?, ?)",
                             [slot.question_id, self.run, result.round, slot.chain.chain_id])

    def _write_back_items(self, result, traj_ids: list[int]) -> list[WriteBackItem]:
        """Generated-question trajectories with their retrieved passages (section 3.4)."""
        wanted = sorted({p for s in result.slots if s.chain is not None and s.chain.chain_id >= 0
                         for r in s.rollouts for p in r.trajectory.passage_ids})
        texts = dict(self.con.execute(
            "SELECT passage_id, text FROM passages WHERE passage_id IN (SELECT unnest(?))", [wanted]).fetchall()
        ) if wanted else {}
        items, ids = [], iter(traj_ids)
        for slot in result.slots:
            for roll in slot.rollouts:
                tid = next(ids)
                if slot.chain is None or slot.chain.chain_id < 0:
                    continue  # seed slots and SSP entities have no originating chain
                tr = roll.trajectory
                passages = [RetrievedPassage(p, e, texts.get(p, "")) for p, e in zip(tr.passage_ids, tr.entity_ids)]
                items.append(WriteBackItem(tid, slot.chain, roll.score.r_ans, roll.score.s_path, roll.score.path,
                                           passages))
        return items


def run_metrics(con, run: str) -> list[dict]:
    """The per-round metrics of a run, oldest first (what ``workbench runs show --json`` prints).

    Example:
        >>> run_metrics(store.connect(":memory:"), "none")
        []
    """
    rows = con.execute("SELECT metrics FROM run_metrics WHERE run = ? ORDER BY round", [run]).fetchall()
    return [json.loads(m) for (m,) in rows]


def store_trajectories(con, run: str, round: int, trajectories: list, question_ids: list[int],
                       role: str = "solver", scores: list[tuple[float, float, float]] | None = None) -> list[int]:
    """Write trajectories to the store's ``trajectories`` table in one transaction; returns their ids.

    ``question_ids[t.question_index]`` is each trajectory's question id. ``scores`` holds each
    trajectory's (``r_ans``, ``s_path``, ``reward``); without it they are stored NULL. Bad input
    raises ValueError and writes nothing.

    Example:
        >>> from workbench.policy.rollout import Trajectory
        >>> con = store.connect(":memory:")
        >>> t = Trajectory(0, 0, "p", [1], [2], [1], [-0.1], text="<answer> x </answer>", answer="x")
        >>> store_trajectories(con, "run0", 0, [t], question_ids=[42])
        [0]
    """
    for t in trajectories:
        if not 0 <= t.question_index < len(question_ids):
            raise ValueError(f"store_trajectories: trajectory of question_index {t.question_index} has no "
                             f"entry in question_ids (length {len(question_ids)})")
    if scores is not None and len(scores) != len(trajectories):
        raise ValueError(f"store_trajectories: {len(scores)} scores for {len(trajectories)} trajectories")
    scores = scores if scores is not None else [(None, None, None)] * len(trajectories)
    with store.transaction(con):
        first = store.next_id(con, "trajectories", "trajectory_id")
        ids = list(range(first, first + len(trajectories)))
        rows = [(tid, run, round, int(question_ids[t.question_index]), t.sample, role, t.prompt, t.text,
                 t.queries, t.passage_ids, t.entity_ids, t.answer, t.n_generated, t.n_retrieved,
                 t.gen_seconds, t.search_seconds, *score) for tid, t, score in zip(ids, trajectories, scores)]
        if rows:
            con.executemany(
                "INSERT INTO trajectories (trajectory_id, run, round, question_id, sample, role, prompt, "
                "response, queries, passage_ids, entity_ids, answer, n_generated, n_retrieved, gen_seconds, "
                "search_seconds, r_ans, s_path, reward) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                rows)
    return ids


def store_verdicts(con, run: str, round: int, chain_id: int, verdicts: Sequence[Verdict],
                   rewards: Sequence[float | None] | None = None,
                   p_s: Sequence[float | None] | None = None) -> list[int]:
    """Write one row per gate verdict to ``candidates`` (one transaction); returns the candidate ids.

    ``rewards`` and ``p_s``, when given, align with ``verdicts`` (None = no value).

    Example:
        >>> con = store.connect(":memory:")
        >>> store_verdicts(con, "r", 0, 5, [Verdict(0, "Who?", "Ann", True, reason="ok")], rewards=[0.5])
        [0]
    """
    n = len(verdicts)
    for name, seq in (("rewards", rewards), ("p_s", p_s)):
        if seq is not None and len(seq) != n:
            raise ValueError(f"store_verdicts: {name} has {len(seq)} values for {n} verdicts")
    if n == 0:
        return []
    with store.transaction(con):
        first = store.next_id(con, "candidates", "candidate_id")
        ids = list(range(first, first + n))
        frame = pd.DataFrame({
            "candidate_id": ids, "run": run, "round": int(round), "chain_id": int(chain_id),
            "idx": [v.index for v in verdicts], "question": [v.question for v in verdicts],
            "answer": [v.answer for v in verdicts], "extracted": [v.extracted for v in verdicts],
            "admitted": [v.admitted for v in verdicts],
            "scores": [json.dumps(v.scores, sort_keys=True) for v in verdicts],
            "reason": [v.reason for v in verdicts],
            "p_s": pd.array(list(p_s) if p_s is not None else [None] * n, dtype="Float64"),
            "reward": pd.array(list(rewards) if rewards is not None else [None] * n, dtype="Float64"),
        })
        with store.registered(con, "_gate_rows", frame):
            con.execute("INSERT INTO candidates SELECT candidate_id, run, round, chain_id, idx, question, "
                        "answer, extracted, admitted, scores::JSON, reason, p_s, reward FROM _gate_rows")
    return ids
