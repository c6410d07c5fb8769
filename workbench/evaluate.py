"""Evaluation: greedy solver runs, EM / F1 per dataset and family, bootstrap intervals, sign tests.

The paper (seed 000, section 4.1) reports exact match after normalisation, per benchmark, and the
macro average over benchmarks (Table 1); it compares ablation rows with an exact two-sided paired
sign test (Table 2). Evaluation decodes greedily ("greedy decoding at evaluation for deterministic
results", section 4.1). On TinyWorld the question families (single_hop, two_hop, three_hop,
comparison, bridge) play the role of the benchmarks: Table 1's columns.

Every evaluation writes one row per question to ``eval_outcomes`` (see workbench/store.py). The
store has no backbone/method/split columns, so the ``eval_id`` carries them, readable and
parseable: ``"<backbone>/<method>/<dataset>/<split>#<n>"`` (``n`` counts earlier runs of the
same prefix). ``model`` holds the model path.

Bootstrap intervals are percentile intervals over ``n_boot`` resamples of questions (ours:
1,000 resamples, seeded); the macro average resamples each family (stratum) independently.

Example:
    >>> sign_test({1: 1, 2: 1, 3: 0, 4: 0}, {1: 1, 2: 0, 3: 0, 4: 0})
    SignTest(a_only=1, b_only=0, both=1, neither=2, p=1.0)
    >>> from workbench.scoring import bootstrap_ci
    >>> mean, lo, hi = bootstrap_ci([1, 0, 1, 1], seed=0)
    >>> lo <= mean <= hi
    True
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from workbench import store
from workbench.kg import topology_qa
from workbench.scoring import N_BOOT, answer_list, hit_at_1, macro_bootstrap_ci, set_f1, summarize

_EVAL_ID = re.compile(r"^(?P<backbone>[^/]+)/(?P<method>[^/]+)/(?P<dataset>[^/]+)/(?P<split>[^/#]+)#(?P<n>\d+)$")


# ---------------------------------------------------------------- statistics

@dataclass(frozen=True)
class SignTest:
    """Paired outcome counts on shared questions and the exact two-sided sign-test p-value."""

    a_only: int
    b_only: int
    both: int
    neither: int
    p: float


def sign_test(outcomes_a: Mapping[int, float], outcomes_b: Mapping[int, float]) -> SignTest:
    """Exact two-sided paired sign test (paper, Table 2) on the questions both runs answered.

    ``outcomes_*`` map question_id -> EM (0/1). Only discordant pairs count: under H0 each is
    equally likely to favour A or B, so p = P(|Binomial(a_only + b_only, 1/2) - n/2| >= observed)
    (scipy.stats.binomtest). No discordant pair gives p = 1.

    Example:
        >>> sign_test({1: 1, 2: 1, 3: 1}, {1: 0, 2: 0, 3: 0}).p
        0.25
    """
    shared = sorted(set(outcomes_a) & set(outcomes_b))
    if not shared:
        raise ValueError("sign_test: the two runs share no question ids; compare runs on the same questions")
    a = np.array([bool(outcomes_a[q]) for q in shared])
    b = np.array([bool(outcomes_b[q]) for q in shared])
    a_only, b_only = int((a & ~b).sum()), int((~a & b).sum())
    return SignTest(a_only, b_only, int((a & b).sum()), int((~a & ~b).sum()), sign_test_p(a_only, b_only))


def sign_test_p(a_only: int, b_only: int) -> float:
    """The exact two-sided sign test's p from the discordant-pair counts (1.0 when there are none).

    Example:
        >>> round(sign_test_p(9, 1), 4)
        0.0215
    """
    from scipy.stats import binomtest

    n = a_only + b_only
    return 1.0 if n == 0 else float(binomtest(a_only, n, 0.5, alternative="two-sided").pvalue)


# ---------------------------------------------------------------- eval ids

def make_eval_id(con, backbone: str, method: str, dataset: str, split: str) -> str:
    """The next free ``"<backbone>/<method>/<dataset>/<split>#<n>"`` in ``eval_outcomes``.

    Example:
        >>> make_eval_id(store.connect(":memory:"), "tiny", "base", "tinyworld", "test")
        'tiny/base/tinyworld/test#0'
    """
    for name, value in (("backbone", backbone), ("method", method), ("dataset", dataset), ("split", split)):
        if not value or "/" in value or "#" in value:
            raise ValueError(f"{name}={value!r}: expected a non-empty name without '/' or '#'")
    prefix = f"{backbone}/{method}/{dataset}/{split}#"
    (n,) = con.execute("SELECT count(DISTINCT eval_id) FROM eval_outcomes WHERE starts_with(eval_id, ?)",
                       [prefix]).fetchone()
    return f"{prefix}{n}"


def parse_eval_id(eval_id: str) -> dict:
    """``{"backbone", "method", "dataset", "split", "n"}`` of an id made by ``make_eval_id``.

    Example:
        >>> parse_eval_id("tiny/base/tinyworld/test#2")["method"]
        'base'
    """
    match = _EVAL_ID.match(eval_id)
    if not match:
        raise ValueError(f"eval id {eval_id!r}: expected '<backbone>/<method>/<dataset>/<split>#<n>'")
    parts = match.groupdict()
    parts["n"] = int(parts["n"])
    return parts


# ---------------------------------------------------------------- presets

DEFAULT_PRESET = "tiny"  # for a model that does not say its preset (one the workbench did not make)


def model_preset(model_path: str | Path, con=None) -> str | None:
    """The preset a model directory was made at, or None when it does not say.

    A warm start's ``workbench.json`` names it (``params.preset``); a trained run's best names its
    run (looked up in ``con``'s ``runs``) and its base (whose ``workbench.json`` is read in turn).

    Example:
        >>> model_preset("/nonexistent") is None
        True
    """
    path, seen = Path(model_path), set()
    while path not in seen and (path / "workbench.json").exists():
        seen.add(path)
        info = json.loads((path / "workbench.json").read_text())
        found = info.get("preset") or (info.get("params") or {}).get("preset")
        if not found and info.get("run") and con is not None:
            row = con.execute("SELECT preset FROM runs WHERE run = ?", [info["run"]]).fetchall()
            found = row[0][0] if row else None
        if found:
            return str(found)
        if not info.get("base"):
            return None
        path = Path(info["base"])
    return None


def resolve_preset(model_path: str | Path, preset: str | None, con=None) -> str:
    """The preset to evaluate ``model_path`` with: the model's own (``model_preset``), else
    ``preset``, else ``DEFAULT_PRESET``; a ``preset`` that contradicts the model's is refused, since
    the preset sets the evaluation's budgets (turns, tokens per turn, passages per search).

    Example:
        >>> resolve_preset("/nonexistent", None), resolve_preset("/nonexistent", "smoke")
        ('tiny', 'smoke')
    """
    known = model_preset(model_path, con)
    if preset is not None and known is not None and preset != known:
        raise ValueError(f"--preset {preset}: {model_path} was made at preset {known!r}, whose budgets (turns, "
                         f"tokens, top-k) its evaluation uses; leave --preset out or pass --preset {known}")
    return preset or known or DEFAULT_PRESET


def eval_backbone(backbone: str, preset: str) -> str:
    """The backbone part of an eval id: the backbone label ending in ``-<preset>``, so every label
    says which preset's budgets produced it (the warm starts' own labels, ``tiny-smoke`` and
    ``tiny-tiny``, already do).

    Example:
        >>> eval_backbone("tiny-smoke", "smoke"), eval_backbone("tiny", "smoke"), eval_backbone("Qwen2.5-3B", "tiny")
        ('tiny-smoke', 'tiny-smoke', 'Qwen2.5-3B-tiny')
    """
    return backbone if backbone.endswith(f"-{preset}") else f"{backbone}-{preset}"


def eval_preset(eval_id: str) -> str | None:
    """The preset an eval id records (its backbone's ``-<preset>`` ending), or None for ids that
    record none (written before 2026-12, or by other tools).

    Example:
        >>> eval_preset("tiny-smoke/base/tinyworld/test#0"), eval_preset("tiny/base/tinyworld/test#0")
        ('smoke', None)
        >>> eval_preset("Qwen2.5-7B-Instruct-paper-7b/base/nq/test#0")
        'paper-7b'
    """
    from workbench.config import PRESETS

    try:
        backbone = parse_eval_id(eval_id)["backbone"]
    except ValueError:
        return None
    # the longest preset name the label ends in: 'paper-7b' is one preset, not '7b'
    return next((p for p in sorted(PRESETS, key=len, reverse=True) if backbone.endswith(f"-{p}")), None)


# ---------------------------------------------------------------- greedy runs

def evaluate(db, model_path: str | Path, dataset: str, split: str = "test", limit: int | None = None,
             index: str | None = None, preset: str | None = None, backbone: str | None = None,
             method: str | None = None, batch_size: int = 64, backend: str | None = None, log=print,
             overrides: dict | None = None) -> str:
    """Evaluate a model greedily on a dataset split, store per-question outcomes, return the eval id.

    Prints EM per family (per dataset for imported QA) and the macro average with bootstrap 95%
    intervals. ``preset`` (its turns, token and top-k budgets) defaults to the model's own
    (``resolve_preset``; a contradicting one is refused) and ends the id's backbone label
    (``eval_backbone``). ``backbone``/``method`` label the Table 1 row (default: the model
    directory's ``workbench.json``, see ``model_labels``). ``backend`` (hf | vllm | auto) is the
    generation engine, default the preset's ``rollout.backend``. ``overrides`` (``{"section.field":
    value}``, the CLI's ``--set``) change the preset's values, e.g. ``search.url`` to search a
    retrieval server instead of the store. The store is unchanged on any error.

    Example:
        >>> # eval_id = evaluate("data/tiny.duckdb", "data/models/base", "tinyworld", split="test", limit=50)
    """
    from workbench.config import preset as get_preset
    from workbench.policy.generation import backend_settings
    from workbench.policy.model import Policy, model_labels
    from workbench.policy.rollout import load_questions, score_questions
    from workbench.search.retriever import make_retriever

    own = not hasattr(db, "execute")
    con = store.connect(db) if own else db
    try:
        preset = resolve_preset(model_path, preset, con)
        cfg = get_preset(preset, **(overrides or {}))
        if dataset == topology_qa.DATASET:  # EoG's answer-set questions, built on first use (seed 0)
            if split != "test":
                raise ValueError(f"--split {split!r}: {topology_qa.DATASET} has a test split only (EoG's training "
                                 "draws its queries in the round)")
            topology_qa.ensure_topology_questions(con, split=split)
        questions = load_questions(con, dataset, split, limit)
        labels = model_labels(model_path)
        backbone, method = eval_backbone(backbone or labels["backbone"], preset), method or labels["method"]
        make_eval_id(con, backbone, method, dataset, split)  # validates the labels before the slow part
        settings = backend_settings(cfg.rollout)
        policy = Policy.load(model_path, **{**settings, "backend": backend or settings["backend"]})
        search = make_retriever(con, cfg.search, index=index)
        kg = model_kg_tool(model_path, con, policy, cfg.search.url)
        graph = model_graph_tools(model_path, con)
        start = time.perf_counter()
        scored = score_questions(policy, search, questions, cfg.rollout, cfg.search.topk, batch_size, kg=kg,
                                 graph=graph)
        seconds = time.perf_counter() - start
        with store.transaction(con):
            eval_id = make_eval_id(con, backbone, method, dataset, split)
            rows = [(eval_id, str(model_path), dataset, int(r.question_id), r.prediction, float(r.em),
                     float(r.f1), float(r.cover_em), int(r.turns)) for r in scored.itertuples()]
            con.executemany("INSERT INTO eval_outcomes (eval_id, model, dataset, question_id, prediction, em, "
                            "f1, cover_em, turns) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
        if log:
            log(f"{eval_id}: {len(scored)} questions in {seconds:.1f} s")
            log(format_summary(summarize(scored)))
            if dataset == topology_qa.DATASET:
                log(format_set_scores(set_scores(con, eval_id)))
            log(format_searches(scored))
        return eval_id
    finally:
        if own:
            con.close()


def _card_entry(model_path: str | Path, key: str):
    """``key`` of a model folder's ``workbench.json`` (what the workbench wrote when it made the
    model), or None: no such file, or no such entry."""
    card = Path(model_path) / "workbench.json"
    return json.loads(card.read_text()).get(key) if card.exists() else None


def model_kg_tool(model_path: str | Path, con, policy=None, url: str = ""):
    """The KG tool a model was trained with (DynaSearcher, seed 003: ``kg_tool`` in its
    ``workbench.json``), rebuilt over ``con`` (or ``url``'s server: ``search.url``, as
    ``search.retriever.make_kg_tool``); None for a model that never had it.

    Example:
        >>> model_kg_tool("no/such/model", None) is None
        True
    """
    settings = _card_entry(model_path, "kg_tool")
    if not settings:
        return None
    from workbench.search.retriever import make_kg_tool
    from workbench.search.kg_search import settings_config

    return make_kg_tool(con, settings_config(settings), policy, url)


def model_graph_tools(model_path: str | Path, con):
    """EoG's graph tools a model was trained with (``graph_tools`` in its ``workbench.json``: an EoG
    run's checkpoint, or EoG's topology warm start), rebuilt over ``con``; None for a model that never
    had them (it answers with document search and one answer, as before).

    Example:
        >>> model_graph_tools("no/such/model", None) is None
        True
    """
    settings = _card_entry(model_path, "graph_tools")
    if not settings:
        return None
    from workbench.search.retriever import make_graph_tools
    from workbench.search.graph_tools import settings_config

    return make_graph_tools(con, settings_config(settings))


def format_searches(scored) -> str:
    """Searches per question by family and tool (document / KG) of a ``score_questions`` frame:
    DynaSearcher's efficiency claim (seed 003), comparable across methods.

    Example:
        >>> import pandas as pd
        >>> print(format_searches(pd.DataFrame({"family": ["a", "a", "b"], "searches_doc": [1, 2, 0],
        ...                                     "searches_kg": [0, 1, 1]})))
          searches per question (document / KG): a 1.50 / 0.50, b 0.00 / 1.00; all 1.00 / 0.67
    """
    parts = [f"{f} {g.searches_doc.mean():.2f} / {g.searches_kg.mean():.2f}" for f, g in scored.groupby("family")]
    return (f"  searches per question (document / KG): {', '.join(parts)}; "
            f"all {scored.searches_doc.mean():.2f} / {scored.searches_kg.mean():.2f}")


def format_summary(summary) -> str:
    """A summarize() frame as aligned text lines: group, n, EM % and its 95% interval."""
    return "\n".join(f"  {r.group:<12} n={r.n:<5} EM {100 * r.mean:5.1f}  [{100 * r.low:5.1f}, {100 * r.high:5.1f}]"
                     for r in summary.itertuples())


def set_scores(con, eval_id: str, n_boot: int = N_BOOT, seed: int = 0):
    """Hit@1 and set F1 (seed 004's metrics; ``scoring.hit_at_1``, ``scoring.set_f1``) of one
    evaluation, per family and macro, with bootstrap 95% intervals: each prediction (its
    ``;``-separated answers as a ranked list, ``scoring.answer_list``: EoG's solver answers sets)
    against its question's ``answers`` as a SET of answers. Meant for answer-set questions (``tinyworld_topology``,
    families = patterns); on questions whose answers are one entity's aliases F1 undercounts a hit.
    Columns: group, n, hit1, hit1_low, hit1_high, f1, f1_low, f1_high.

    Example:
        >>> # set_scores(con, "tiny-tiny/eog/tinyworld_topology/test#0")
    """
    import pandas as pd

    df = con.execute(
        """SELECT coalesce(q.family, o.dataset) AS family, o.prediction, q.answers
           FROM eval_outcomes o JOIN questions q USING (question_id) WHERE o.eval_id = ? ORDER BY o.question_id""",
        [eval_id]).df()
    if df.empty:
        raise ValueError(f"no evaluation {eval_id!r} with stored questions in the store")
    # a prediction is the ranked list of its ';'-separated answers (EoG's answer sets; one answer is a list of one)
    df["hit1"] = [hit_at_1(answer_list(p), list(a)) for p, a in zip(df.prediction, df.answers)]
    df["f1"] = [set_f1(answer_list(p), list(a)) for p, a in zip(df.prediction, df.answers)]
    parts = [summarize(df, metric=m, n_boot=n_boot, seed=seed).rename(
        columns={"mean": m, "low": f"{m}_low", "high": f"{m}_high"}) for m in ("hit1", "f1")]
    return pd.merge(parts[0], parts[1].drop(columns="n"), on="group")


def format_set_scores(scores) -> str:
    """A set_scores() frame as aligned text lines: group, n, Hit@1 and F1 % with their 95% intervals."""
    return "\n".join(f"  {r.group:<12} n={r.n:<5} Hit@1 {100 * r.hit1:5.1f} [{100 * r.hit1_low:5.1f}, "
                     f"{100 * r.hit1_high:5.1f}]  F1 {100 * r.f1:5.1f} [{100 * r.f1_low:5.1f}, {100 * r.f1_high:5.1f}]"
                     for r in scores.itertuples())


# ---------------------------------------------------------------- loading outcomes

def outcomes(con, eval_id: str):
    """One evaluation's per-question rows joined with the question family (a DataFrame)."""
    df = con.execute(
        """SELECT o.question_id, o.dataset, coalesce(q.family, o.dataset) AS family, o.prediction,
                  o.em, o.f1, o.cover_em, o.turns, o.model
           FROM eval_outcomes o LEFT JOIN questions q USING (question_id)
           WHERE o.eval_id = ? ORDER BY o.question_id""", [eval_id]).df()
    if df.empty:
        known = [r[0] for r in con.execute("SELECT DISTINCT eval_id FROM eval_outcomes ORDER BY 1").fetchall()]
        raise ValueError(f"no evaluation {eval_id!r} in the store; known: {known}")
    return df


@dataclass(frozen=True)
class Comparison:
    """B against A on their shared questions: the paired sign test, and B's macro EM minus A's
    with its 95% stratified paired bootstrap interval."""

    test: SignTest
    gain: float
    low: float
    high: float
    n_a: int | None = None  # questions each evaluation answered; the test pairs the shared ones
    n_b: int | None = None

    def table(self, a: str = "A", b: str = "B"):
        """The comparison as a two-column table a reader scans, narrow enough for a notebook: the two
        evaluations, the questions paired, B - A in EM points with its paired 95% interval, the
        discordant pairs and the sign test's p.

        Example:
            >>> c = Comparison(SignTest(1, 3, 10, 6, 0.625), 0.1, -0.05, 0.25)
            >>> c.table("base", "trained").loc["B - A (EM points)", "value"]
            '+10.0 [-5.0, +25.0]'
        """
        import pandas as pd

        t = self.test
        rows = {"A": a, "B": b, "questions paired": self.shared,
                "B - A (EM points)": f"{100 * self.gain:+.1f} [{100 * self.low:+.1f}, {100 * self.high:+.1f}]",
                "A right, B wrong": t.a_only, "B right, A wrong": t.b_only, "sign test p": f"{t.p:.4g}"}
        return pd.DataFrame({"value": list(rows.values())}, index=list(rows), dtype=object)

    @property
    def shared(self) -> int:
        """Questions both evaluations answered: the pairs behind the test and the interval."""
        t = self.test
        return t.a_only + t.b_only + t.both + t.neither

    def __str__(self) -> str:
        t = self.test
        return (f"B - A macro EM {100 * self.gain:+.1f} points [{100 * self.low:+.1f}, {100 * self.high:+.1f}]; "
                f"sign test: A only {t.a_only}, B only {t.b_only}, p = {t.p:.3g}")


def compare(con, eval_a: str, eval_b: str, n_boot: int = N_BOOT, seed: int = 0) -> Comparison:
    """Two stored evaluations compared on their shared questions (see :func:`compare_outcomes`).

    Example:
        >>> # print(compare(con, "tiny-tiny/base/tinyworld/test#0", "tiny-tiny/coevokg/tinyworld/test#0"))
        >>> # B - A macro EM +3.0 points [+1.2, +5.0]; sign test: A only 4, B only 19, p = 0.0026
    """
    presets = {eval_id: eval_preset(eval_id) for eval_id in (eval_a, eval_b)}
    if None not in presets.values() and len(set(presets.values())) == 2:
        raise ValueError(f"compare: {eval_a} ran at preset {presets[eval_a]!r} and {eval_b} at "
                         f"{presets[eval_b]!r} (other turn, token and top-k budgets); compare evaluations of one preset")
    return compare_outcomes(outcomes(con, eval_a), outcomes(con, eval_b), n_boot=n_boot, seed=seed)


def compare_outcomes(a, b, n_boot: int = N_BOOT, seed: int = 0) -> Comparison:
    """Two ``outcomes`` frames compared: :func:`sign_test` and :func:`gain_ci` on their shared questions.

    Example:
        >>> import pandas as pd
        >>> a = pd.DataFrame({"question_id": [1, 2], "family": ["x", "y"], "em": [0.0, 1.0]})
        >>> print(compare_outcomes(a, a.assign(em=[1.0, 1.0])))
        B - A macro EM +50.0 points [+50.0, +50.0]; sign test: A only 0, B only 1, p = 1
    """
    test = sign_test(dict(zip(a.question_id, a.em)), dict(zip(b.question_id, b.em)))
    return Comparison(test, *gain_ci(a, b, n_boot=n_boot, seed=seed), n_a=len(a), n_b=len(b))


def gain_ci(a, b, n_boot: int = N_BOOT, seed: int = 0) -> tuple[float, float, float]:
    """(gain, low, high): B's macro EM minus A's on the questions both answered (``outcomes``
    frames), with a stratified paired bootstrap interval (each family's per-question differences
    resampled together).

    Example:
        >>> import pandas as pd
        >>> a = pd.DataFrame({"question_id": [1, 2], "family": ["x", "y"], "em": [0.0, 1.0]})
        >>> gain_ci(a, a.assign(em=[1.0, 1.0]))  # x: +1, y: 0 -> macro +0.5
        (0.5, 0.5, 0.5)
    """
    both = a.merge(b, on=["question_id", "family"], suffixes=("_a", "_b"))
    if both.empty:
        raise ValueError("gain_ci: the two evaluations share no questions")
    diffs = {f: (g.em_b - g.em_a).to_numpy() for f, g in both.groupby("family", sort=True)}
    return macro_bootstrap_ci(diffs, n_boot=n_boot, seed=seed)


def across_seeds(scores: Mapping[str, Sequence[float]], reference: str | None = None):
    """Each method's per-seed scores summarised: n, mean, sd and a 95% t interval over seeds; with
    ``reference``, every method's mean minus the reference's and the Welch t-test p (two-sided,
    unequal variances, ``scipy.stats.ttest_ind``). Seeds, not questions, are the unit here: use it
    to ask whether two methods differ beyond their seed spread.

    Example:
        >>> t = across_seeds({"a": [60.0, 62.0, 61.0], "b": [59.0, 60.0, 58.0]}, reference="a")
        >>> t.loc["b", ["mean", "low", "high", "diff"]].round(2).tolist()
        [59.0, 56.52, 61.48, -2.0]
    """
    import pandas as pd
    from scipy import stats

    rows = {}
    for method, values in scores.items():
        v = np.asarray(values, float)
        sd = half = np.nan
        if len(v) > 1:
            sd = v.std(ddof=1)
            half = stats.t.ppf(0.975, len(v) - 1) * sd / np.sqrt(len(v))
        rows[method] = dict(n=len(v), mean=v.mean(), sd=sd, low=v.mean() - half, high=v.mean() + half)
    table = pd.DataFrame.from_dict(rows, orient="index")
    if reference is not None:
        if reference not in scores:
            raise ValueError(f"across_seeds: reference {reference!r} is not one of {sorted(scores)}")
        ref = np.asarray(scores[reference], float)
        table["diff"] = table["mean"] - ref.mean()
        table["p"] = [np.nan if m == reference or min(len(ref), len(scores[m])) < 2 else
                      float(stats.ttest_ind(scores[m], ref, equal_var=False).pvalue) for m in table.index]
    return table


# ---------------------------------------------------------------- Table 1

METHOD_ORDER = ("base", "search-r1", "ssp", "coevokg")  # Table 1's row order within a backbone


def latest_evals(con, datasets: Sequence[str] | None = None, split: str = "test") -> dict:
    """{(backbone, method, dataset): eval_id}: the newest evaluation of each combination."""
    ids = [r[0] for r in con.execute("SELECT DISTINCT eval_id FROM eval_outcomes").fetchall()]
    latest: dict = {}
    for eval_id in ids:
        try:
            p = parse_eval_id(eval_id)
        except ValueError:
            continue  # rows written by other tools keep their own ids; Table 1 skips them
        if p["split"] != split or (datasets and p["dataset"] not in datasets):
            continue
        key = (p["backbone"], p["method"], p["dataset"])
        if key not in latest or parse_eval_id(latest[key])["n"] < p["n"]:
            latest[key] = eval_id
    return latest


def table1(con, datasets: Sequence[str] | None = ("tinyworld",), split: str = "test",
           by: str | None = None):
    """Accuracy (EM, %) shaped like the paper's Table 1: rows backbone x method, one column per
    benchmark (``by='dataset'``) or, on TinyWorld, per question family (``by='family'``, the
    default when the only dataset is 'tinyworld'), and ``Avg.`` the macro average.

    Returns ``(DataFrame, markdown)``; the Markdown adds each row's gain in points over its
    backbone's 'base' row, as the paper's subscripts.

    Example:
        >>> df, md = table1(store.connect(":memory:"))
        >>> df.empty
        True
    """
    import pandas as pd

    datasets = list(datasets) if datasets else None
    if by is None:
        by = "family" if datasets == ["tinyworld"] else "dataset"
    if by not in ("family", "dataset"):
        raise ValueError(f"by={by!r}: expected 'family' or 'dataset'")
    frames = []
    for (backbone, method, _), eval_id in sorted(latest_evals(con, datasets, split).items()):
        df = outcomes(con, eval_id)
        frames.append(df.assign(backbone=backbone, method=method))
    if not frames:
        return pd.DataFrame(), "(no evaluations stored for this split)"
    allrows = pd.concat(frames)
    table = allrows.pivot_table(index=["backbone", "method"], columns=by, values="em", aggfunc="mean") * 100
    table["Avg."] = table.mean(axis=1, skipna=False)
    rank = {m: i for i, m in enumerate(METHOD_ORDER)}
    order = sorted(table.index, key=lambda bm: (bm[0], rank.get(bm[1], len(rank)), bm[1]))
    table = table.loc[order].round(1)
    table.columns.name = None
    return table, _markdown(table)


def _markdown(table) -> str:
    cols = list(table.columns)
    lines = ["| backbone | method | " + " | ".join(cols) + " |", "|---|---|" + "---|" * len(cols)]
    for (backbone, method), row in table.iterrows():
        base = table.loc[(backbone, "base")] if (backbone, "base") in table.index else None
        cells = []
        for c in cols:
            v = row[c]
            cell = "-" if np.isnan(v) else f"{v:.1f}"
            if base is not None and method != "base" and not np.isnan(v) and not np.isnan(base[c]):
                cell += f" ({v - base[c]:+.1f})"
            cells.append(cell)
        lines.append(f"| {backbone} | {method} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


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
