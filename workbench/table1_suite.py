"""Table 1 at the tiny tier: one model evaluated on the six TinyWorld benchmarks
(``workbench.kg.benchmarks``), reported in the paper's layout (seed 000, Table 1): EM per
benchmark, the macro average over the six, the gain over the base in points; with each number's
95% bootstrap interval (``scoring``), the macro gain's stratified paired interval and the exact
paired sign test pooled over all the suite's questions (``evaluate.gain_ci``, ``sign_test``), and
tw-pop per popularity bucket. ``workbench eval --suite table1``.

The base is the newest suite evaluation in the same store whose method is ``base`` and whose
backbone label is the model's (``evaluate.eval_backbone``): evaluate the warm start first.

Example:
    >>> import pandas as pd
    >>> frame = pd.DataFrame({"question_id": [1, 2, 3], "benchmark": ["tw-nq", "tw-nq", "tw-pop"],
    ...                       "family": [None, None, "inlinks 0-1"], "em": [1.0, 0.0, 1.0]})
    >>> scores(frame).set_index("group").loc["macro", "mean"]
    np.float64(0.75)
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from workbench import store
from workbench.evaluate import eval_backbone, gain_ci, latest_evals, outcomes, sign_test, sign_test_p
from workbench.kg.benchmarks import SUITE, SUITE_NAME, ensure_suite
from workbench.kg.benchmarks.pop import BUCKET_NAMES
from workbench.scoring import summarize

SUITES = {SUITE_NAME: SUITE}
POP = "tw-pop"


def check_suite(name: str) -> tuple[str, ...]:
    """The benchmarks of suite ``name`` (only ``table1``)."""
    if name not in SUITES:
        raise ValueError(f"--suite {name!r}: expected one of {sorted(SUITES)}")
    return SUITES[name]


def evaluate_suite(db, model_path: str | Path, suite: str = SUITE_NAME, limit: int | None = None,
                   preset: str | None = None, log=print, **kwargs) -> dict[str, str]:
    """Evaluate a model greedily on every benchmark of ``suite`` (built in the store first if it is
    missing, at the preset's ``world.suite_questions``); return ``{benchmark: eval_id}``.
    ``limit`` keeps the first N questions per family (as ``evaluate``); ``kwargs`` go to
    ``evaluate.evaluate`` (index, backbone, method, backend, overrides, batch_size).

    Example:
        >>> # ids = evaluate_suite("data/tiny.duckdb", "data/pretrained/warmstart/4a2ab7ba5bdebc8f")
    """
    from workbench.config import preset as get_preset
    from workbench.evaluate import evaluate, resolve_preset

    names = check_suite(suite)
    own = not hasattr(db, "execute")
    con = store.connect(db) if own else db
    try:
        preset = resolve_preset(model_path, preset, con)
        sizes = ensure_suite(con, n=get_preset(preset, **(kwargs.get("overrides") or {})).world.suite_questions)
        if log:
            log(f"suite {suite}: " + ", ".join(f"{n} {sizes[n]}" for n in names) + " test questions")
        ids = {}
        for name in names:
            ids[name] = evaluate(con, model_path, name, split="test", limit=limit, preset=preset, log=None, **kwargs)
            if log:
                log(f"  {ids[name]}")
        return ids
    finally:
        if own:
            con.close()


def suite_frame(con, eval_ids: dict[str, str]):
    """The evaluations' per-question outcomes in one frame, ``benchmark`` = the dataset."""
    frames = [outcomes(con, eval_id).assign(benchmark=name) for name, eval_id in eval_ids.items()]
    return pd.concat(frames, ignore_index=True)


def by_benchmark(frame):
    """The frame with ``family`` set to its benchmark: what ``evaluate.gain_ci`` and the macro
    average stratify by (each benchmark weighs one sixth, as Table 1's Avg.)."""
    return frame.assign(family=frame.benchmark)


def scores(frame):
    """EM per benchmark and the macro average, with bootstrap 95% intervals (``scoring.summarize``)."""
    return summarize(frame, by="benchmark")


def pop_buckets(frame):
    """tw-pop's EM per popularity bucket, 95% intervals; empty when the frame has no tw-pop."""
    pop = frame[frame.benchmark == POP]
    if pop.empty:
        return pd.DataFrame(columns=["group", "n", "mean", "low", "high"])
    table = summarize(pop, by="family")
    table = table[table.group != "macro"]
    return table.set_index("group").reindex([b for b in BUCKET_NAMES if b in set(table.group)]).reset_index()


def latest_suite(con, backbone: str, method: str, names=SUITE) -> dict[str, str] | None:
    """The newest evaluation of each benchmark for (backbone, method), or None unless all exist."""
    found = {k[2]: v for k, v in latest_evals(con, list(names)).items() if k[0] == backbone and k[1] == method}
    return found if set(found) == set(names) else None


def versus(base, frame) -> dict:
    """The model against the base on the questions both answered: per-benchmark gains (points),
    the macro gain with its stratified paired 95% interval, and the pooled exact sign test."""
    test = sign_test(dict(zip(base.question_id, base.em)), dict(zip(frame.question_id, frame.em)))
    gain, low, high = gain_ci(by_benchmark(base), by_benchmark(frame))
    per = (frame.groupby("benchmark").em.mean() - base.groupby("benchmark").em.mean()) * 100
    return {"gains": {k: float(v) for k, v in per.dropna().items()}, "macro_gain": 100 * gain,
            "macro_low": 100 * low, "macro_high": 100 * high, "base_only": test.a_only, "model_only": test.b_only,
            "pairs": test.a_only + test.b_only + test.both + test.neither, "p": test.p}


def result(frame, eval_ids: dict[str, str], model: str, base=None) -> dict:
    """Everything ``--json`` writes: scores (%, with intervals), buckets, the comparison with the
    base where there is one, and every question's EM (``outcomes``: ids and a 0/1 string per
    benchmark, what a reference file pairs runs by)."""
    def rows(table):
        return {r.group: {"n": int(r.n), "em": 100 * r.mean, "low": 100 * r.low, "high": 100 * r.high}
                for r in table.itertuples()}

    table = rows(scores(frame))
    out = {"model": str(model), "eval_ids": eval_ids, "macro": table.pop("macro"), "benchmarks": table,
           "buckets": rows(pop_buckets(frame)), "outcomes": {}}
    for name, part in frame.sort_values("question_id").groupby("benchmark", sort=False):
        out["outcomes"][name] = {"question_ids": [int(q) for q in part.question_id],
                                 "em": "".join("1" if e else "0" for e in part.em)}
    out["vs_base"] = versus(base, frame) if base is not None else None
    return out


def format_result(res: dict, label: str, names=SUITE, base: dict | None = None) -> str:
    """The paper's layout as text: a row per model (the base first), a column per benchmark and
    Avg. (gains over the base in parentheses), then the intervals, tw-pop's buckets and the test.
    The "macro" line keeps ``evaluate.format_summary``'s form (scripts/reference_file.py reads it)."""
    cols = [n for n in names if n in res["benchmarks"]]
    width = max(len(c) for c in cols) + 2
    head = f"{'':<12}" + "".join(f"{c:>{width}}" for c in cols) + f"{'Avg.':>{width}}"
    lines = [head]

    def row(name, r, gains):
        cells = [f"{r['benchmarks'][c]['em']:.1f}" + (f" ({gains[c]:+.1f})" if gains and c in gains else "")
                 for c in cols]
        avg = f"{r['macro']['em']:.1f}" + (f" ({r['vs_base']['macro_gain']:+.1f})" if gains else "")
        return f"{name:<12}" + "".join(f"{x:>{width}}" for x in cells + [avg])

    if base is not None:
        lines.append(row("base", base, None))
    lines.append(row(label, res, (res.get("vs_base") or {}).get("gains")))
    lines.append("EM % per benchmark, 95% bootstrap interval:")
    lines += [f"  {c:<12} n={b['n']:<5} EM {b['em']:5.1f}  [{b['low']:5.1f}, {b['high']:5.1f}]"
              for c, b in ((c, res["benchmarks"][c]) for c in cols)]
    m = res["macro"]
    lines.append(f"  {'macro':<12} n={m['n']:<5} EM {m['em']:5.1f}  [{m['low']:5.1f}, {m['high']:5.1f}]")
    if res["buckets"]:
        lines.append("tw-pop by popularity (in-links of the subject's article):")
        lines += [f"  {k:<12} n={b['n']:<5} EM {b['em']:5.1f}  [{b['low']:5.1f}, {b['high']:5.1f}]"
                  for k, b in res["buckets"].items()]
    v = res.get("vs_base")
    if v:
        lines.append(f"vs base: macro gain {v['macro_gain']:+.1f} points [{v['macro_low']:+.1f}, {v['macro_high']:+.1f}] "
                     f"(stratified paired bootstrap); pooled sign test over {v['pairs']} questions: base only "
                     f"{v['base_only']}, model only {v['model_only']}, p = {v['p']:.4g}")
    return "\n".join(lines)


def report(con, eval_ids: dict[str, str], model: str, backbone: str, method: str) -> tuple[dict, str, dict | None]:
    """(result, its text, the base's result or None) for one model's suite evaluations."""
    frame = suite_frame(con, eval_ids)
    base_ids = latest_suite(con, backbone, "base", tuple(eval_ids)) if method != "base" else None
    base_frame = suite_frame(con, base_ids) if base_ids else None
    res = result(frame, eval_ids, model, base_frame)
    base_res = result(base_frame, base_ids, "base") if base_ids else None
    text = format_result(res, f"{method}", tuple(eval_ids), base_res)
    if method != "base" and base_ids is None:
        text += (f"\n(no base row: no suite evaluation of method 'base' with backbone {backbone!r} in this store; "
                 "evaluate the warm start with --suite first)")
    return res, text, base_res


def write_json(path: str | Path, res: dict) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(res, indent=1))


def pooled_sign_test(pairs) -> tuple[int, int, float]:
    """(a only, b only, p) of the exact sign test over several paired 0/1 strings pooled: each
    (question, seed) pair counts once. Seeds share questions, so pairs are not independent across
    seeds; read it beside the Welch test over seeds.

    Example:
        >>> pooled_sign_test([("1100", "1111"), ("10", "01")])
        (1, 3, 0.625)
    """
    a_only = b_only = 0
    for a, b in pairs:
        if len(a) != len(b):
            raise ValueError(f"pooled_sign_test: outcome strings of different lengths ({len(a)} and {len(b)})")
        x, y = np.frombuffer(a.encode(), np.uint8) == 49, np.frombuffer(b.encode(), np.uint8) == 49
        a_only += int((x & ~y).sum())
        b_only += int((~x & y).sum())
    return a_only, b_only, sign_test_p(a_only, b_only)


def model_labels_for(model_path, preset: str, backbone: str | None, method: str | None) -> tuple[str, str]:
    """The (backbone, method) labels ``evaluate`` gives a model's eval ids."""
    from workbench.policy.model import model_labels

    labels = model_labels(model_path)
    return eval_backbone(backbone or labels["backbone"], preset), method or labels["method"]


def reference_for(name: str | None, preset: str):
    """The Table 1 reference file to print beside (``reference.load_table1``); 'none': None.

    Example:
        >>> reference_for("none", "tiny") is None
        True
    """
    from workbench import reference

    return None if name == "none" else reference.load_table1(name, preset)


def format_reference(ref) -> str:
    """A reference file's Table 1 as text: EM per benchmark and Avg. as means over seeds, Avg.'s 95%
    t interval, gain over the base and the pooled sign tests (``Reference.table1``)."""
    table = ref.table1()
    names = ref.suite["benchmarks"]
    lines = [f"{ref.label}: mean over seeds ({ref.describe()})",
             f"{'':<12}{'seeds':>6}" + "".join(f"{c:>14}" for c in names) + f"{'Avg.':>8}  95% t interval   gain"
             "   p vs base   p vs Search-R1"]
    for r in table.to_dict("records"):
        cells = "".join(f"{r[c]:>14.2f}" for c in names)
        tail = "" if r["method"] == "Base" else (
            f"  [{r['95% low']:.2f}, {r['95% high']:.2f}]  {r['gain (Avg.)']:+.2f}   {r['p vs base']:.3g}"
            + (f"   {r['p vs Search-R1']:.3g}" if r.get("p vs Search-R1") is not None
               and not pd.isna(r.get("p vs Search-R1")) else ""))
        lines.append(f"{r['method']:<12}{r['seeds']:>6}{cells}{r['Avg.']:>8.2f}{tail}")
    return "\n".join(lines)
