"""The gold-blind shortcut audit of generated questions (seed 002, Table 5; decision rules Table 16).

For N generated questions of a run (``generated_questions``: admitted, posed to the solver), a
judge answers each question from each shortcut context alone, never seeing the gold:

* ``closed_book`` -- no evidence;
* ``source_only`` -- the chain's source passage alone;
* ``one_shot`` -- the top 3 passages of one retrieval of the question (340 words each);
* ``single_component`` -- each chain passage alone, one answer per passage.

A question is *answerable* from a shortcut when the judge's answer matches the hidden gold (EM);
single-component counts when any one passage suffices (Table 16). The paper's judge is an LLM
returning answerable / unique flags; ours (the tiny tier) is a policy answering greedily after
``<answer>`` with the context as its retrieved information, so answerable = its answer matches
(there is no unique flag). The judge is never a model being audited (:func:`check_independent`):
by default it is the base every run starts from (:func:`default_judge`: the preset's warm start, or
its ``backbone.model``), trained on none of the audited questions and the same for every run; a
checkpoint of an audited run is refused. (Before issue 40 the default was the first run's own best
checkpoint, which judged its own questions.) The share per shortcut gets a Wilson 95% interval; methods are compared
with one-sided Fisher exact tests (scipy.stats.fisher_exact), as Table 5's last rows.

Example:
    >>> [round(x, 3) for x in wilson(5, 100)]   # Table 5: Dr. Free's 5% -> [2.2, 11.2]
    [0.022, 0.112]
    >>> round(fisher_less(5, 100, 17, 100), 4)  # Table 5: 5% vs Dr. Zero's 17%, closed-book
    0.0057
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import pandas as pd

from workbench.method import drfree
from workbench.policy import protocol
from workbench.scoring import exact_match

AUDIT_SHORTCUTS = ("closed_book", "source_only", "one_shot", "single_component")  # Table 5's columns


def wilson(k: int, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    """The Wilson score interval of k successes in n (95% by default).

    Example:
        >>> [round(x, 3) for x in wilson(0, 10)]
        [0.0, 0.278]
    """
    if n <= 0:
        raise ValueError(f"wilson: n must be positive, got {n}")
    if not 0 <= k <= n:
        raise ValueError(f"wilson: k must lie in [0, n={n}], got {k}")
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def fisher_less(k_a: int, n_a: int, k_b: int, n_b: int) -> float:
    """One-sided Fisher exact test p-value that A's shortcut rate is lower than B's.

    Example:
        >>> fisher_less(0, 10, 10, 10) < 1e-4
        True
    """
    from scipy.stats import fisher_exact

    return float(fisher_exact([[k_a, n_a - k_a], [k_b, n_b - k_b]], alternative="less")[1])


def generated_questions(con, run: str, n: int, seed: int = 0) -> list[dict]:
    """Up to ``n`` of ``run``'s generated questions (seeded sample, distinct question texts), each
    with its answers, hops and originating chain (a ``ChainView``, its passages as the proposer saw
    them at the end of the run)."""
    from workbench.kg.pool import load_pool
    from workbench.method.loop import chain_view

    rows = con.execute("""
        SELECT q.question_id, q.question, q.answers, q.hops, g.chain_id FROM generated_questions g
        JOIN questions q USING (question_id) WHERE g.run = ? ORDER BY q.question_id""", [run]).fetchall()
    if not rows:
        raise ValueError(f"--run {run!r}: the store holds no generated questions of this run "
                         "(train it with a method that generates questions, e.g. --method drfree)")
    if any(r[4] is None or r[4] < 0 for r in rows):
        raise ValueError(f"--run {run!r}: its questions come from no G_0 chain (a searching proposer, e.g. "
                         "drfree_wo_kg, or SSP), and the audit's contexts are a chain's passages")
    firsts: dict[str, tuple] = {}
    for r in rows:
        firsts.setdefault(r[1].strip().lower(), r)
    unique = list(firsts.values())
    picked = sorted(np.random.default_rng(seed).choice(len(unique), size=min(n, len(unique)), replace=False))
    chosen = [unique[i] for i in picked]
    chains = {c.chain_id: chain_view(c) for c in load_pool(con, run=run, chain_ids=sorted({r[4] for r in chosen}))}
    return [{"question_id": q, "question": text, "answers": list(ans), "hops": h, "chain": chains[c]}
            for q, text, ans, h, c in chosen]


def judge_prompts(policy, question: str, contexts: Sequence[Sequence[str]]) -> list[str]:
    """The judge's prompt per context: the solver prompt, the context as retrieved information
    (none for closed-book), then ``<answer>`` so it must answer now."""
    out = []
    for ctx in contexts:
        prompt = policy.chat_prompt(protocol.solver_user_message(question))
        if ctx:
            prompt += protocol.information_block(drfree.render_context(ctx))
        out.append(prompt + protocol.ANSWER_OPEN)
    return out


def audit_questions(policy, items: list[dict], search, max_new_tokens: int = 24) -> pd.DataFrame:
    """One row per question: the judge's answer under each context and, per shortcut of
    ``AUDIT_SHORTCUTS``, whether it matched the gold (Table 16's rules; one greedy batch)."""
    prompts, owners = [], []
    for i, item in enumerate(items):
        q, chain = item["question"], item["chain"]
        contexts = [("closed_book", []), ("source_only", drfree.source_only(chain, q, search)[0]),
                    ("one_shot", drfree.one_shot(chain, q, search)[0])]
        contexts += [("single_component", [p]) for p in chain.passages]
        prompts += judge_prompts(policy, q, [c for _, c in contexts])
        owners += [(i, name) for name, _ in contexts]
    gens = policy.generate(prompts, max_new_tokens=max_new_tokens, temperature=0.0, top_p=1.0,
                           stop=(protocol.ANSWER_CLOSE,)) if prompts else []
    rows = [{"question_id": it["question_id"], "question": it["question"], "gold": it["answers"][0],
             "hops": it["hops"], **{s: False for s in AUDIT_SHORTCUTS}, "answers": {}} for it in items]
    for (i, name), g in zip(owners, gens):
        answer = g.text.split(protocol.ANSWER_CLOSE)[0].strip()
        rows[i]["answers"].setdefault(name, []).append(answer)
        rows[i][name] = rows[i][name] or bool(exact_match(answer, items[i]["answers"]))
    return pd.DataFrame(rows)


def summarize(per_run: dict[str, pd.DataFrame]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(shares, tests): per run and shortcut the count, share and Wilson 95% interval; per ordered
    pair of runs (A, B) and shortcut the one-sided Fisher p-value that A's rate is below B's."""
    shares = []
    for run, df in per_run.items():
        for s in AUDIT_SHORTCUTS:
            k, n = int(df[s].sum()), len(df)
            lo, hi = wilson(k, n)
            shares.append({"run": run, "shortcut": s, "n": n, "answerable": k, "share": k / n, "lo": lo, "hi": hi})
    shares = pd.DataFrame(shares)
    tests = []
    for a in per_run:
        for b in per_run:
            if a == b:
                continue
            for s in AUDIT_SHORTCUTS:
                ka, na = int(per_run[a][s].sum()), len(per_run[a])
                kb, nb = int(per_run[b][s].sum()), len(per_run[b])
                tests.append({"run": a, "vs": b, "shortcut": s, "p_less": fisher_less(ka, na, kb, nb)})
    return shares, pd.DataFrame(tests, columns=["run", "vs", "shortcut", "p_less"])


def default_judge(con, preset: str = "tiny"):
    """The independent judge (Table 5 audits each method's questions with one judge that is none of
    them): the base every run starts from -- the preset's tiny warm start (from the cache, trained
    there when missing; ``con``, the audited store, is the world its key is made from) or its
    ``backbone.model``.

    Example:
        >>> # default_judge(store.connect("data/tiny.duckdb"), "tiny")  # the tiny warm start's folder
    """
    from workbench import paths
    from workbench.config import preset as get_preset

    cfg = get_preset(preset)
    if cfg.backbone.model != "tiny":
        return paths.local_model(cfg.backbone.model)
    from workbench.policy.warmstart import warmstart

    return warmstart(con, preset=cfg, seed=cfg.backbone.seed, log=lambda *_: None)


def check_independent(judge, runs: Sequence[str]) -> None:
    """ValueError when the judge is a checkpoint of one of the audited ``runs``: a folder under
    ``runs/RUN/`` of this workbench, or a model whose ``workbench.json`` names the run (a copy, or
    another ``WORKBENCH_RUNS``).

    Example:
        >>> check_independent("data/models/base", ["drfree"])
        >>> check_independent("runs/drfree/best", ["drfree"])
        Traceback (most recent call last):
        ...
        ValueError: --judge runs/drfree/best: a checkpoint of run 'drfree', which is audited; the judge must be independent of the audited models (seed 002, Table 5): pass another model, or leave --judge out for the runs' base
    """
    import json
    from pathlib import Path

    from workbench.method.train import run_dir

    path = Path(judge)
    meta = path / "workbench.json"
    own = json.loads(meta.read_text()).get("run") if meta.exists() else None
    for run in runs:
        inside = path.resolve().is_relative_to(run_dir(run).resolve()) or (
            path.parts[:2] == ("runs", run))  # a relative runs/RUN/... as written
        if inside or own == run:
            raise ValueError(f"--judge {judge}: a checkpoint of run {run!r}, which is audited; the judge must be "
                             "independent of the audited models (seed 002, Table 5): pass another model, or leave "
                             "--judge out for the runs' base")


def split_run(spec: str, db) -> tuple[str, object]:
    """``RUN`` (in the store ``db``) or ``RUN@STORE`` (a run in another store, as
    ``scripts/rl_compare.sh`` gives each run its own) as (run, store).

    Example:
        >>> split_run("d0@/tmp/s/d0.duckdb", "data/tiny.duckdb"), split_run("drfree", "x.duckdb")
        (('d0', '/tmp/s/d0.duckdb'), ('drfree', 'x.duckdb'))
    """
    run, sep, where = str(spec).rpartition("@")
    return (run, where) if sep and run else (str(spec), db)


def audit_store(db, runs: Sequence[str], n: int = 100, seed: int = 0, judge=None, preset: str = "tiny") -> dict:
    """The audit of ``runs``, ``n`` sampled generated questions each: ``RUN`` in the store ``db`` (a
    path or an open connection) or ``RUN@STORE`` (:func:`split_run`), with one judge model
    ``judge`` independent of them (default: :func:`default_judge`, the base every run starts from;
    a checkpoint of an audited run is refused, :func:`check_independent`) and the preset's training
    retriever for the one-shot shortcut. Returns ``per_question`` ({run: DataFrame}), ``shares`` and
    ``tests`` (:func:`summarize`) and ``judge`` (its path).

    Example:
        >>> # audit_store("data/tiny.duckdb", ["drfree", "coevokg"], n=100)["shares"]
    """
    from workbench import store
    from workbench.config import preset as get_preset
    from workbench.policy.model import Policy
    from workbench.search.tool import SearchTool

    if n < 1:
        raise ValueError(f"--n: expected a number of questions >= 1, got {n}")
    if not runs:
        raise ValueError("--run: name at least one run")
    cfg = get_preset(preset)
    pairs = [split_run(r, db) for r in runs]
    if judge is None:
        first = pairs[0][1]
        con = store.connect(first, read_only=True) if not hasattr(first, "execute") else first
        try:
            judge = default_judge(con, preset)
        finally:
            if con is not first:
                con.close()
    check_independent(judge, [run for run, _ in pairs])
    policy = Policy.load(judge)
    per_run = {}
    for run, where in pairs:
        own = not hasattr(where, "execute")
        con = store.connect(where, read_only=True) if own else where
        try:
            search = SearchTool(con, index=cfg.search.index, topk=drfree.ONE_SHOT_TOPK, cache=False)
            per_run[run] = audit_questions(policy, generated_questions(con, run, n, seed), search)
        finally:
            if own:
                con.close()
    shares, tests = summarize(per_run)
    return {"per_question": per_run, "shares": shares, "tests": tests, "judge": str(judge)}
