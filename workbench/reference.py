"""The workbench's own reference runs, shipped in ``data/reference/`` (issue 15): what a full run
looks like, a third source beside the paper's numbers and a user's run.

A reference file is one JSON object: ``provenance`` (what, command, commit, machine, date, the base's
test macro EM), ``evaluations`` (one object per run: ``test_macro_em``, the paired ``gain`` over the
base with its bootstrap interval, the sign test) and ``metrics`` (per run, every round's
``run_metrics`` row, timings left out). Runs are named ``<method>_s<seed>``; the file name begins
with the preset the runs used (``tiny_table2_56rounds.json``). Like ``data/paper/``, the folder is
part of the checkout, not of ``WORKBENCH_DATA``.

Example:
    >>> ref = load()
    >>> ref.label
    'reference (tiny, 6 seeds, 56 rounds)'
    >>> ref.test_em(reference="coevokg").loc[["coevokg", "search_r1"], "mean"].round(2).tolist()
    [60.57, 61.47]
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from workbench import paths
from workbench.evaluate import across_seeds

DEFAULT = "tiny_table2_56rounds.json"  # the five Table 2 rows x seeds 0-5, 56 rounds, one H200 (two calls)
# How the figures name a run's method (the store's ``runs.method``).
NAMES = {"base": "Base", "search_r1": "Search-R1", "ssp": "SSP", "c1": "C1", "c2": "C2", "coevokg": "CoEvoKG"}


def reference_dir() -> Path:
    """The folder of the shipped reference runs (``data/reference/`` of the checkout).

    Example:
        >>> (reference_dir() / DEFAULT).exists()
        True
    """
    return paths.project_root() / "data" / "reference"


def chains_added(metrics: pd.DataFrame) -> pd.Series:
    """Chains write-back added to the pool since G_0, per ``run_metrics`` row: ``pool_chains`` minus
    G_0's size (the run's first round's ``pool_chains`` less that round's ``writeback_new_chains``).
    Growth, not size, is what runs of different worlds or presets share, and it stays visible on an
    axis from zero (the tiny pool grows 7725 -> 7734).

    Example:
        >>> m = pd.DataFrame(dict(run=["a"] * 3, round=[0, 1, 2], pool_chains=[101, 101, 104],
        ...                       writeback_new_chains=[1, 0, 3]))
        >>> chains_added(m).tolist()
        [1, 1, 4]
    """
    if "pool_chains" not in metrics or metrics.empty:
        return pd.Series(index=metrics.index, dtype=float)
    new = metrics["writeback_new_chains"] if "writeback_new_chains" in metrics else pd.Series(0, index=metrics.index)
    first = metrics.sort_values("round").groupby("run").head(1)
    g0 = (first.pool_chains - new.loc[first.index].fillna(0)).set_axis(first.run)
    return metrics.pool_chains - metrics.run.map(g0)


@dataclass(frozen=True)
class Reference:
    """One shipped reference file, read: its provenance, one row per run's evaluation and one row
    per (run, round) of metrics, each with ``run``, ``method`` and ``seed`` columns.

    Example:
        >>> ref = load()
        >>> ref.methods, ref.seeds, ref.rounds
        (['coevokg', 'search_r1', 'ssp', 'c1', 'c2'], [0, 1, 2, 3, 4, 5], 56)
    """

    name: str
    preset: str
    provenance: dict
    evaluations: pd.DataFrame
    metrics: pd.DataFrame
    audit: pd.DataFrame | None = None  # Dr. Free's Table 5 counts: run, method, seed, shortcut, n, answerable
    folder: str = "data/reference"  # where the file was read, as the subtitles name it
    suite: dict | None = None  # Table 1 at the tiny tier: the base's and each run's EM per benchmark (table1_suite)

    @property
    def methods(self) -> list[str]:
        """The rows' methods, in the file's order."""
        return list(dict.fromkeys(self.evaluations.method))

    @property
    def seeds(self) -> list[int]:
        return sorted(set(self.evaluations.seed))

    @property
    def rounds(self) -> int:
        """Rounds of the longest run."""
        return int(self.metrics.groupby("run")["round"].count().max())

    @property
    def label(self) -> str:
        """The legend name of this source in every figure and table."""
        return f"reference ({self.preset}, {len(self.seeds)} seeds, {self.rounds} rounds)"

    @property
    def base_test_em(self) -> float | None:
        """The base's (warm start's) test macro EM (%) the runs' gains are measured from."""
        return self.provenance.get("base_test_macro_em")

    def describe(self) -> str:
        """The provenance line a figure carries for this source.

        Example:
            >>> load().describe().split(" · ")  # doctest: +NORMALIZE_WHITESPACE
            ['reference: data/reference/tiny_table2_56rounds.json', '5 methods x seeds 0-5', 'one NVIDIA H200',
             'commit 7036a99, cdb86a8', '2026-12-02']
        """
        seeds = self.seeds
        consecutive = seeds == list(range(seeds[0], seeds[-1] + 1))
        span = f"{seeds[0]}-{seeds[-1]}" if consecutive else ", ".join(map(str, seeds))
        machine = self.provenance.get("machine", "").split(" (")[0].split(",")[0]  # its first words, not its notes
        commits = ", ".join(c.strip()[:7] for c in str(self.provenance.get("commit", "?")).split(","))  # runs of several calls
        return (f"reference: {self.folder}/{self.name} · {len(self.methods)} methods x seeds {span} · {machine} · "
                f"commit {commits} · {self.provenance.get('date', '?')}")

    def of(self, method: str) -> pd.DataFrame:
        """The metrics rows of ``method``'s runs (every seed), with ``chains_added``."""
        m = self.metrics[self.metrics.method == method]
        if m.empty:
            raise ValueError(f"{self.name}: no {method!r} runs; it has {self.methods}")
        return m

    def scores(self, metric: str = "test_macro_em", seeds=None) -> dict[str, list[float]]:
        """Each method's ``metric`` (%), one value per seed (the input of ``evaluate.across_seeds``):
        test macro EM (Hit@1 on EoG's answer-set questions), or ``test_macro_set_f1`` there;
        ``seeds`` given, only those seeds' runs (a method with none of them is left out)."""
        if metric not in self.evaluations:
            raise ValueError(f"{self.name}: no {metric!r} in its evaluations; it has {list(self.evaluations)}")
        ev = self.evaluations if seeds is None else self.evaluations[self.evaluations.seed.isin(list(seeds))]
        out = {m: ev[ev.method == m].sort_values("seed")[metric].tolist() for m in self.methods}
        return {m: v for m, v in out.items() if v}

    def test_em(self, reference: str | None = None, metric: str = "test_macro_em", seeds=None) -> pd.DataFrame:
        """Test macro EM (or another ``metric`` of :meth:`scores`) per method over seeds: n, mean, sd
        and a 95% t interval; with ``reference``, the difference to it and the Welch p
        (``evaluate.across_seeds``). ``seeds`` restricts every method to those seeds, so rows run on
        fewer seeds are compared with the reference on the same ones.

        Example:
            >>> round(float(load().test_em().loc["ssp", "mean"]), 2)
            57.97
            >>> round(float(load("tiny_eog_900s.json").test_em(metric="test_macro_set_f1").loc["eog", "mean"]), 3)
            45.475
            >>> t = load("tiny_drfree_20rounds.json").test_em("drfree", seeds=[0, 1, 2])
            >>> t.loc["drfree_wo_per_hop", ["n", "diff", "p"]].round(2).tolist()
            [3.0, -0.73, 0.44]
        """
        return across_seeds(self.scores(metric, seeds), reference=reference)

    def band(self, key: str, method: str = "coevokg") -> pd.DataFrame:
        """``key`` per round over ``method``'s seeds: ``mean``, the seeds' range (``low``, ``high``)
        and ``n``. Rounds where a run has no value (no generated question) count the others.

        Example:
            >>> load().band("val_em").iloc[0][["mean", "low", "high"]].round(2).tolist()
            [0.53, 0.53, 0.53]
        """
        m = self.of(method)
        if key not in m:
            raise ValueError(f"{self.name}: no metric {key!r}")
        values = pd.to_numeric(m[key], errors="coerce").groupby(m["round"])
        return pd.DataFrame({"mean": values.mean(), "low": values.min(), "high": values.max(),
                             "n": values.count()}).rename_axis("round").reset_index()

    def beside(self, metrics: pd.DataFrame, keys=("val_em", "seed_fallback_rate", "passed_rate"),
               method: str = "coevokg") -> pd.DataFrame:
        """A run's ``keys`` per round beside the reference ``method``'s mean and its seeds' range at
        the same round: where a short run sits on the reference curve. One row per round of the
        run; columns (key, "this run" | "reference" | "seeds' range").

        Example:
            >>> run = pd.DataFrame({"round": [0, 1], "val_em": [0.5, 0.55]})
            >>> load().beside(run, keys=["val_em"]).loc[1].astype(str).tolist()
            ['0.55', '0.533', '0.530-0.535']
        """
        rounds = pd.Index(metrics["round"].to_numpy(), name="round")
        columns = {}
        for key in keys:
            band = self.band(key, method).set_index("round").reindex(rounds)
            columns[(key, "this run")] = (pd.to_numeric(metrics[key], errors="coerce").round(3).to_numpy()
                                          if key in metrics else None)
            columns[(key, "reference")] = band["mean"].round(3).to_numpy()
            columns[(key, "seeds' range")] = [None if pd.isna(lo) else f"{lo:.3f}-{hi:.3f}"
                                              for lo, hi in zip(band.low, band.high)]
        return pd.DataFrame(columns, index=rounds)


    def audit_shares(self) -> pd.DataFrame:
        """The shortcut audit per method, pooled over its seeds (each seed audited with its own
        judge): run (the method), shortcut, n, answerable, share and Wilson 95% interval, as
        ``figures.shortcut_audit`` draws them.

        Example:
            >>> t = load("tiny_drfree_20rounds.json").audit_shares().set_index(["run", "shortcut"])
            >>> t.loc[("drfree", "single_component"), ["n", "answerable"]].tolist()
            [400, 200]
        """
        from workbench.method.shortcut_audit import wilson

        if self.audit is None or self.audit.empty:
            raise ValueError(f"{self.name}: no shortcut audit in this reference file")
        pooled = self.audit.groupby(["method", "shortcut"], sort=False)[["n", "answerable"]].sum().reset_index()
        pooled["share"] = pooled.answerable / pooled.n
        pooled[["lo", "hi"]] = [wilson(k, n) for k, n in zip(pooled.answerable, pooled.n)]
        return pooled.rename(columns={"method": "run"})


    # ---------------------------------------------------------------- Table 1 at the tiny tier

    def suite_runs(self) -> pd.DataFrame:
        """One row per run (and ``base``): run, method, seed, then EM (%) per benchmark, ``Avg.`` (the
        macro over them) and each tw-pop bucket (``tw-pop: inlinks 0-1``, ...)."""
        if not self.suite:
            raise ValueError(f"{self.name}: no Table 1 suite in this reference file (a tiny_table1_* file has one)")
        names = self.suite["benchmarks"]
        rows = []
        for run, r in [("base_s0", self.suite["base"]), *self.suite["runs"].items()]:
            method, seed = _split_run(run)
            rows.append({"run": run, "method": method, "seed": seed, **{b: r["benchmarks"][b] for b in names},
                         "Avg.": r["macro"], **{f"tw-pop: {k}": v for k, v in r.get("buckets", {}).items()}})
        return pd.DataFrame(rows)

    def table1(self, methods=("search_r1", "ssp", "coevokg", "c1", "c2"), against: str = "search_r1") -> pd.DataFrame:
        """Table 1's layout from the file: the base, then each method's EM per benchmark and Avg. as the
        mean over seeds, Avg.'s 95% t interval over seeds, its gain over the base, the exact sign test
        against the base pooled over questions and seeds, and against ``against`` (paired seed by seed).

        Example:
            >>> # load("tiny_table1_20rounds.json").table1().set_index("method").loc["CoEvoKG", "Avg."]
        """
        runs = self.suite_runs()
        names = self.suite["benchmarks"]
        base = runs[runs.method == "base"].iloc[0]
        rows = [{"method": NAMES["base"], "seeds": 1, **{b: base[b] for b in names}, "Avg.": base["Avg."]}]
        outcomes = {run: r["outcomes"] for run, r in self.suite["runs"].items()}

        def joined(run):
            return "".join(outcomes[run][b] for b in names)

        for method in [m for m in methods if (runs.method == m).any()]:
            part = runs[runs.method == method].sort_values("seed")
            seeds = across_seeds({method: part["Avg."].tolist()}).loc[method]
            base_str = "".join(self.suite["base"]["outcomes"][b] for b in names)
            _, _, p_base = _pooled([(base_str, joined(r)) for r in part.run])
            row = {"method": NAMES.get(method, method), "seeds": len(part), **{b: part[b].mean() for b in names},
                   "Avg.": seeds["mean"], "95% low": seeds.low, "95% high": seeds.high,
                   "gain (Avg.)": seeds["mean"] - base["Avg."], "p vs base": p_base}
            if against != method and (runs.method == against).any():
                pairs = [(joined(f"{against}_s{s}"), joined(r)) for r, s in zip(part.run, part.seed)
                         if f"{against}_s{s}" in outcomes]
                row[f"p vs {NAMES.get(against, against)}"] = _pooled(pairs)[2] if pairs else None
            rows.append(row)
        return pd.DataFrame(rows)


def _pooled(pairs):
    from workbench.table1_suite import pooled_sign_test

    return pooled_sign_test(pairs)


def check_suite_section(data: dict, path: Path) -> None:
    """A reference file's ``suite`` holds the base and every run it names, each benchmark's outcomes
    as long as its question ids; raises ValueError naming what is wrong."""
    suite = data["suite"]
    missing = [k for k in ("benchmarks", "question_ids", "base", "runs") if k not in suite]
    if missing:
        raise ValueError(f"{path}: its suite section lacks {missing} (scripts/reference_file.py writes them)")
    for run, r in [("base", suite["base"]), *suite["runs"].items()]:
        for b in suite["benchmarks"]:
            if len(r["outcomes"].get(b, "")) != len(suite["question_ids"][b]):
                raise ValueError(f"{path}: run {run}'s {b} outcomes do not match its {len(suite['question_ids'][b])} "
                                 "question ids")


def table1_files(preset: str = "tiny") -> list[Path]:
    """The shipped Table 1 reference files of ``preset`` (``<preset>_table1_<N>rounds.json``),
    fewest rounds first.

    Example:
        >>> all(p.name.startswith("tiny_table1_") for p in table1_files())
        True
    """
    def rounds(p: Path) -> int:
        digits = "".join(ch for ch in p.stem.rsplit("_", 1)[-1] if ch.isdigit())
        return int(digits or 0)

    return sorted(reference_dir().glob(f"{preset}_table1_*.json"), key=rounds)


def _split_run(run: str) -> tuple[str, int]:
    method, _, seed = run.rpartition("_s")
    if not method or not seed.isdigit():
        raise ValueError(f"reference run {run!r}: expected <method>_s<seed>")
    return method, int(seed)


def load_table1(name: str | Path | None = None, preset: str = "tiny") -> Reference | None:
    """A Table 1 reference file (with a suite section): ``name`` (a file in data/reference/ or a
    path), else the shipped ``<preset>_table1_*`` file with the most rounds, else None (none shipped).

    Example:
        >>> ref = load_table1()
        >>> ref is None or ref.suite is not None
        True
    """
    if name is None:
        files = table1_files(preset)
        if not files:
            return None
        name = files[-1].name
    ref = load(name)
    if not ref.suite:
        shipped = [p.name for p in table1_files(preset)] or "none yet"
        raise ValueError(f"{name}: not a Table 1 reference file (no suite section; shipped ones: {shipped})")
    return ref


def load(name: str | Path = DEFAULT) -> Reference:
    """Read the reference file ``name``: a bare file name is one under ``reference_dir()``; a path
    with a folder is one that ``scripts/reference_file.py`` wrote elsewhere (its file name begins
    with the runs' preset).

    Example:
        >>> ref = load()
        >>> ref.evaluations.set_index("run").loc["coevokg_s2", "test_macro_em"]
        np.float64(62.6)
    """
    given = Path(name)
    path = reference_dir() / given if given.parent == Path(".") else given
    if not path.is_file():
        shipped = sorted(f.name for f in reference_dir().glob("*.json"))
        raise FileNotFoundError(f"{path}: no such reference file; shipped: {', '.join(shipped) or 'none'}"
                                + ("" if shipped else " (the shipped reference runs are missing from the checkout)"))
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise ValueError(f"{path}: not a reference file (not JSON: {err})") from None
    if missing := [k for k in ("provenance", "evaluations", "metrics") if k not in data]:
        raise ValueError(f"{path}: not a reference file (no {', '.join(missing)}; "
                         "scripts/reference_file.py writes them)")
    evaluations = pd.DataFrame([{"run": run, "method": _split_run(run)[0], "seed": _split_run(run)[1], **e}
                                for run, e in data["evaluations"].items()])
    metrics = pd.DataFrame([{**row, "run": run, "method": _split_run(run)[0], "seed": _split_run(run)[1]}
                            for run, rows in data["metrics"].items() for row in rows])
    metrics["chains_added"] = chains_added(metrics)
    audit = pd.DataFrame([{**row, "method": _split_run(row["run"])[0], "seed": _split_run(row["run"])[1]}
                          for row in data.get("audit", [])])
    shipped_here = path.resolve().parent == reference_dir().resolve()
    if "suite" in data:
        check_suite_section(data, path)
    return Reference(name=path.name, preset=path.name.split("_")[0], provenance=data["provenance"],
                     evaluations=evaluations, metrics=metrics, audit=audit if len(audit) else None,
                     folder="data/reference" if shipped_here else str(path.parent), suite=data.get("suite"))
