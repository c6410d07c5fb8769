"""The numbers the CoEvoKG paper reports, as transcribed into ``data/paper/`` (see its README).

Each loader returns a pandas DataFrame with a ``provenance`` column naming the table, figure or
section of the seed document the row comes from. ``paper_dir()`` is a folder of the checkout, not
of ``WORKBENCH_DATA``: these files are part of the source, not a user's data.

Example:
    >>> from workbench import paper
    >>> t1 = paper.table1()
    >>> float(t1.query("method == 'CoEvoKG' and benchmark == 'Avg.'").accuracy.iloc[0])
    42.1
"""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

import pandas as pd

from workbench import paths

BENCHMARKS = ("NQ", "TriviaQA", "PopQA", "HotpotQA", "2Wiki", "Bamboogle")
METHODS = ("Base", "Search-R1", "SSP", "CoEvoKG")
BACKBONES = ("Qwen2.5-3B-Instruct", "Qwen2.5-7B-Instruct", "Llama-3.1-8B-Instruct")


def paper_dir() -> Path:
    """The folder holding the transcribed CSV files."""
    return paths.project_root() / "data" / "paper"


def _read(name: str) -> pd.DataFrame:
    path = paper_dir() / name
    if not path.exists():
        raise FileNotFoundError(f"{path}: the paper's transcribed numbers are missing from the checkout")
    return pd.read_csv(path)


def table1() -> pd.DataFrame:
    """Table 1, long form: backbone, method, benchmark (six + ``Avg.``), accuracy (%), gain, provenance.

    Example:
        >>> len(table1())  # 3 backbones x 4 methods x (6 benchmarks + Avg.)
        84
    """
    return _read("table1_main_results.csv")


def table1_wide() -> pd.DataFrame:
    """Table 1 as printed: one row per backbone x method, the six benchmarks and ``Avg.`` as columns.

    Example:
        >>> table1_wide().loc[("Qwen2.5-7B-Instruct", "CoEvoKG"), "Avg."]
        np.float64(54.1)
    """
    t = table1()
    wide = t.pivot(index=["backbone", "method"], columns="benchmark", values="accuracy")
    order = pd.MultiIndex.from_product([BACKBONES, METHODS], names=["backbone", "method"])
    return wide.reindex(index=order, columns=[*BENCHMARKS, "Avg."])


def table2() -> pd.DataFrame:
    """Table 2 (build-up ablation): variant, c1, c2, c3, avg, delta, p, provenance.

    Example:
        >>> table2().avg.tolist()
        [50.9, 52.4, 53.5, 54.1]
    """
    return _read("table2_buildup.csv")


def figure3() -> pd.DataFrame:
    """What the text states about Figure 3 (training dynamics); no curve points are invented.

    Example:
        >>> figure3().query("metric == 'seed_fallback_rate'").value.tolist()
        [0.4, 0.25]
    """
    return _read("figure3_dynamics.csv")


def figure4() -> pd.DataFrame:
    """Figure 4's numbers: average hops and p_s, generated vs seed questions.

    Example:
        >>> figure4().set_index(["metric", "group"]).value[("avg_hops", "generated")]
        np.float64(2.23)
    """
    return _read("figure4_diagnostics.csv")


EOG_BENCHMARKS = ("WebQSP", "CWQ", "GrailQA", "GTSQA", "WikiWebQuestions")  # seed 004, Table 2's columns


def eog_table2() -> pd.DataFrame:
    """Seed 004 (EoG), Table 2, as its text holds it: the full-supervised KG-R1 rows only (the
    annotation-free rows, EoG's among them, are not in the seed text), per training set and evaluated
    benchmark (a "–" cell has no row) and ``Avg.``: hit1, f1 (%), provenance.

    Example:
        >>> eog_table2().query("train_set == 'CWQ' and benchmark == 'Avg.'")[["hit1", "f1"]].values.tolist()
        [[68.85, 62.67]]
    """
    return _read("eog_table2_main_results.csv")


def eog_table3() -> pd.DataFrame:
    """Seed 004 (EoG), Table 3, the ablation on Freebase with Qwen-2.5-7B-Instruct: variant, the
    workbench row that stands for it (``workbench_row``: a ``--method`` or ``base_topology``, the
    untrained start), benchmark, hit1, f1 (%), provenance. The full EoG row is not in the seed text.

    Example:
        >>> eog_table3().query("variant == 'Adversarial reward' and benchmark == 'CWQ'").hit1.item()
        42.59
    """
    return _read("eog_table3_ablation.csv")


def dynasearcher_results() -> pd.DataFrame:
    """Seed 003 (DynaSearcher)'s reported numbers, from its summary: the "Key Results" rows
    (``group`` main or ablation: benchmark, metric, baseline value, DynaSearcher's, delta; a baseline
    named only where the summary names it) and its highlights (``group`` highlight).

    Example:
        >>> dynasearcher_results().query("group == 'ablation'").baseline_value.tolist()
        [61.8, 63.5]
    """
    return _read("dynasearcher_key_results.csv")


def round1(x: float | Decimal) -> float:
    """Round half up to one decimal, as the paper's tables print (not Python's banker's rounding).

    Example:
        >>> round1(38.25), round(38.25, 1)
        (38.3, 38.2)
    """
    exact = x if isinstance(x, Decimal) else Decimal(repr(float(x)))
    return float(exact.quantize(Decimal("0.1"), rounding=ROUND_HALF_UP))


def drfree_table5() -> pd.DataFrame:
    """Seed 002 (Dr. Free), Table 5: the gold-blind shortcut audit, per method and shortcut the share
    answerable with its Wilson 95% interval (100 questions a method).

    Example:
        >>> drfree_table5().query("method == 'Dr. Free' and shortcut == 'closed_book'")["share"].item()
        0.05
    """
    return _read("drfree_table5_shortcut_audit.csv")


# Seed 002 (Dr. Free): its EM tables over seven benchmarks, one CSV each (data/paper/README.md)
DRFREE_BENCHMARKS = ("NQ", "TriviaQA", "PopQA", "HotpotQA", "2Wiki", "MuSiQue", "Bamboogle")
DRFREE_TABLES = {1: "drfree_table1_baselines.csv", 2: "drfree_table2_ablation.csv",
                 3: "drfree_table3_shortcut_loo.csv", 7: "drfree_table7_hop_ratio.csv",
                 9: "drfree_table9_iterations.csv", 15: "drfree_table15_runs.csv"}


def drfree_table(number: int) -> pd.DataFrame:
    """Seed 002's Table ``number`` (1, 2, 3, 7, 9 or 15) in long form: backbone, row, benchmark
    (the seven of :data:`DRFREE_BENCHMARKS` and ``Avg.``), em (a fraction, as printed), std (Table
    15's mean row only), provenance.

    Example:
        >>> drfree_table(2).query("row == 'w/o KG' and benchmark == 'Avg.'")["em"].item()
        0.335
    """
    if number not in DRFREE_TABLES:
        raise ValueError(f"Dr. Free table {number!r}: transcribed are {sorted(DRFREE_TABLES)}")
    return _read(DRFREE_TABLES[number])


def drfree_table_wide(number: int) -> pd.DataFrame:
    """:func:`drfree_table` as printed: one row per (backbone, row), one column per benchmark.

    Example:
        >>> list(drfree_table_wide(3).index.get_level_values("row"))[:2]
        ['Dr. Free (full B)', 'w/o one-shot']
    """
    t = drfree_table(number)
    wide = t.pivot_table(index=["backbone", "row"], columns="benchmark", values="em", sort=False)
    return wide[[*DRFREE_BENCHMARKS, "Avg."]]


def drfree_table14() -> pd.DataFrame:
    """Seed 002, Table 14: train-test overlap over 51,713 evaluation questions per training source
    (similar Q-A pairs: question Jaccard >= 0.6 and a shared normalised answer alias; exact questions).

    Example:
        >>> drfree_table14().set_index("training_source").loc["Search-R1", "similar_pairs"].item()
        1108
    """
    return _read("drfree_table14_overlap.csv")
