"""EoG's (seed 004) and DynaSearcher's (seed 003) transcribed numbers agree with themselves and with
the seed texts (as tests/test_paper_data.py checks CoEvoKG's)."""

from __future__ import annotations

import re
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

import pytest

from workbench import paper
from workbench.method.methods import METHODS

SEEDS = Path(__file__).resolve().parents[2] / "shared" / "seeds"  # beside the checkout, where present


def _d(x) -> Decimal:
    return Decimal(str(x))


def _round2(x: Decimal) -> Decimal:
    return x.quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)


def test_every_kg_r1_average_recomputes_from_its_evaluated_benchmarks():
    t = paper.eog_table2()
    assert set(t.benchmark) == {*paper.EOG_BENCHMARKS, "Avg."}
    for train_set, rows in t.groupby("train_set"):
        cells = rows[rows.benchmark != "Avg."]
        avg = rows[rows.benchmark == "Avg."].iloc[0]
        for metric in ("hit1", "f1"):
            assert _round2(sum(_d(v) for v in cells[metric]) / len(cells)) == _d(avg[metric]), (train_set, metric)
    # a model trained on GTSQA is evaluated on GTSQA and WikiWebQuestions only; the others on the Freebase three
    assert sorted(t.query("train_set == 'GTSQA' and benchmark != 'Avg.'").benchmark) == ["GTSQA", "WikiWebQuestions"]
    assert (t.method == "KG-R1").all() and len(t) == 3 * 4 + 1 * 3


def test_eog_table3_rows_and_their_workbench_rows():
    t = paper.eog_table3()
    assert t.groupby("variant").size().tolist() == [3] * 5 and set(t.benchmark) == {"WebQSP", "CWQ", "GrailQA"}
    assert t[["hit1", "f1"]].stack().between(0, 100).all()
    assert set(t.workbench_row) - {"base_topology"} == {m for m in METHODS if m.startswith("eog_")}
    # the untrained start is below every trained variant on each benchmark (Hit@1)
    for bench, rows in t.groupby("benchmark"):
        react = rows.set_index("variant").hit1["ReAct (untrained)"]
        assert (rows[rows.variant != "ReAct (untrained)"].hit1 > react).all(), bench


def test_dynasearcher_deltas_recompute_and_the_named_baselines_match_the_highlights():
    t = paper.dynasearcher_results()
    rows = t[t.group != "highlight"]
    for r in rows.itertuples():
        assert paper.round1(_d(r.dynasearcher) - _d(r.baseline_value)) == r.delta, r
    assert set(rows.query("benchmark == 'HotpotQA'").dynasearcher) == {66.1}  # one DynaSearcher row, as stated
    named = rows[rows.baseline.notna()]
    assert named[["baseline", "baseline_value"]].values.tolist() == [["GPT-4.1", 60.6]]
    highlight = t[t.group == "highlight"].iloc[0]
    assert (highlight.baseline, highlight.delta) == ("Search-R1-v0.3", 4.0)
    assert highlight[["baseline_value", "dynasearcher"]].isna().all()


def test_every_row_names_its_source():
    for frame, seed in ((paper.eog_table2(), "004_a9fbae60c71792a9"), (paper.eog_table3(), "004_a9fbae60c71792a9"),
                        (paper.dynasearcher_results(), "003_f6b6e920d8fdf4c9")):
        assert frame.provenance.str.contains(seed).all()


@pytest.mark.skipif(not SEEDS.is_dir(), reason="the seed texts are not beside this checkout")
def test_every_number_is_in_its_seed_text():
    for frame, name, columns in ((paper.eog_table2(), "004_*.txt", ("hit1", "f1")),
                                 (paper.eog_table3(), "004_*.txt", ("hit1", "f1")),
                                 (paper.dynasearcher_results(), "003_*.txt", ("baseline_value", "dynasearcher", "delta"))):
        (path,) = SEEDS.glob(name)
        numbers = set(re.findall(r"\d+\.\d+", path.read_text()))
        for column in columns:
            for v in frame[column].dropna():
                text = f"{v:.2f}" if name.startswith("004") else f"{v:.1f}"
                assert text in numbers, (name, column, text)
