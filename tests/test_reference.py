"""The shipped reference runs (data/reference/) read by ``workbench.reference``: every number the
loader returns is checked against the JSON file read here independently."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from workbench import reference
from workbench.evaluate import across_seeds


@pytest.fixture(scope="module")
def raw() -> dict:
    return json.loads((reference.reference_dir() / reference.DEFAULT).read_text())


@pytest.fixture(scope="module")
def ref() -> reference.Reference:
    return reference.load()


def test_the_file_reads_whole_with_its_provenance(ref, raw):
    assert ref.preset == "tiny" and ref.label == "reference (tiny, 6 seeds, 56 rounds)"
    assert ref.methods == ["coevokg", "search_r1", "ssp", "c1", "c2"] and ref.seeds == [0, 1, 2, 3, 4, 5]
    assert len(ref.evaluations) == len(raw["evaluations"]) == 30
    assert len(ref.metrics) == sum(len(rows) for rows in raw["metrics"].values()) == 30 * 56
    assert ref.base_test_em == raw["provenance"]["base_test_macro_em"] == 57.8
    described = ref.describe()
    assert raw["provenance"]["commit"][:7] in described and raw["provenance"]["date"] in described
    assert "seeds 0-5" in described and reference.DEFAULT in described


def test_scores_and_test_em_are_the_files_evaluations_over_seeds(ref, raw):
    by_method: dict[str, list[float]] = {}
    for run in sorted(raw["evaluations"], key=lambda r: int(r.rsplit("_s", 1)[1])):
        by_method.setdefault(run.rsplit("_s", 1)[0], []).append(raw["evaluations"][run]["test_macro_em"])
    assert ref.scores() == {m: by_method[m] for m in ref.methods}
    pd.testing.assert_frame_equal(ref.test_em("coevokg"), across_seeds(by_method, reference="coevokg").loc[ref.methods])


@pytest.mark.parametrize("key, method", [("val_em", "coevokg"), ("seed_fallback_rate", "coevokg"),
                                         ("kl", "search_r1"), ("p_s_generated", "coevokg")])
def test_band_is_the_mean_and_range_over_seeds_of_each_round(ref, raw, key, method):
    band = ref.band(key, method).set_index("round")
    for rnd in (0, 7, 55):
        values = [rows[rnd][key] for run, rows in raw["metrics"].items()
                  if run.startswith(method + "_s") and rows[rnd][key] is not None]
        assert band.loc[rnd, "mean"] == pytest.approx(np.mean(values))
        assert (band.loc[rnd, "low"], band.loc[rnd, "high"], band.loc[rnd, "n"]) == (min(values), max(values), len(values))


def test_chains_added_is_what_write_back_added_since_g0(ref):
    m = ref.metrics.sort_values(["run", "round"])
    assert (m.groupby("run").writeback_new_chains.cumsum() == m.chains_added).all()
    grown = m.groupby("run").chains_added.max()
    assert grown[grown > 0].index.str.startswith("coevokg").all()  # write-back is CoEvoKG's alone
    assert grown.filter(like="coevokg").tolist() == [23, 26, 17, 18, 14, 17]  # LOG.md: +14 to +26 chains over 56 rounds


def test_beside_puts_a_run_at_the_same_rounds_of_the_reference(ref):
    run = pd.DataFrame({"round": [0, 5], "val_em": [0.5, 0.6], "passed_rate": [0.1, None]})
    table = ref.beside(run, keys=["val_em", "passed_rate"])
    band = ref.band("val_em").set_index("round")
    assert table.index.tolist() == [0, 5]
    assert table[("val_em", "this run")].tolist() == [0.5, 0.6]
    assert table.loc[5, ("val_em", "reference")] == round(band.loc[5, "mean"], 3)
    assert table.loc[5, ("val_em", "seeds' range")] == f"{band.loc[5, 'low']:.3f}-{band.loc[5, 'high']:.3f}"
    assert pd.isna(table.loc[5, ("passed_rate", "this run")])


def test_unknown_methods_keys_and_files_say_what_there_is(ref):
    with pytest.raises(ValueError, match="has \\['coevokg'"):
        ref.of("dr_zero")
    with pytest.raises(ValueError, match="no metric 'nope'"):
        ref.band("nope")
    with pytest.raises(FileNotFoundError, match="tiny_nothing.json: no such reference file; shipped: .*56rounds.json"):
        reference.load("tiny_nothing.json")
    with pytest.raises(ValueError, match="<method>_s<seed>"):
        reference._split_run("coevokg")


def test_a_path_reads_a_file_written_elsewhere_and_a_broken_one_is_named(tmp_path, raw):
    copy = tmp_path / "tiny_mine.json"
    copy.write_text(json.dumps(raw))
    mine = reference.load(str(copy))
    assert mine.name == "tiny_mine.json" and mine.preset == "tiny" and mine.seeds == [0, 1, 2, 3, 4, 5]
    assert mine.describe().startswith(f"reference: {tmp_path}/tiny_mine.json · ")
    assert reference.load(f"data/reference/{reference.DEFAULT}").describe() == reference.load().describe()
    (tmp_path / "tiny_half.json").write_text(json.dumps({"provenance": {}}))
    with pytest.raises(ValueError, match="tiny_half.json: not a reference file \\(no evaluations, metrics"):
        reference.load(str(tmp_path / "tiny_half.json"))
    (tmp_path / "tiny_text.json").write_text("runs")
    with pytest.raises(ValueError, match="tiny_text.json: not a reference file \\(not JSON"):
        reference.load(str(tmp_path / "tiny_text.json"))
