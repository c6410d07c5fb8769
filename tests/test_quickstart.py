"""The quickstart's settings and closing sentence (workbench/quickstart.py, issue 46)."""

import pandas as pd
import pytest

from workbench.config import preset
from workbench.quickstart import LONG, SHORT, settings, verdict


@pytest.mark.parametrize("run", [SHORT, LONG])
def test_each_quickstart_run_is_a_valid_tiny_config(run):
    cfg = preset("tiny", **run.overrides, **{"method.chains_per_round": run.slots})
    assert cfg.method.chains_per_round == run.slots <= preset("tiny").method.chains_per_round
    assert settings(long=run is LONG) is run


def _frames(gained: int, lost: int, n: int = 100):
    """Base and trained outcomes on n questions of two families; the trained solver gains ``gained``
    and loses ``lost`` of family 'x' and answers 'y' as the base does."""
    base = pd.DataFrame({"question_id": range(2 * n), "family": ["x"] * n + ["y"] * n,
                         "em": ([0.0] * gained + [1.0] * lost + [0.0, 1.0] * n)[:2 * n]})
    em = base.em.copy()
    em[:gained], em[gained:gained + lost] = 1.0, 0.0
    return base, base.assign(em=em)


@pytest.mark.parametrize("gained, lost, reading", [
    (12, 0, "an interval above 0, so the solver measurably improved"),
    (0, 12, "an interval below 0, so the solver got worse"),
    (3, 2, "an interval that includes 0, so this run does not show learning"),
    (0, 0, "an interval that includes 0, so this run does not show learning")])
def test_the_sentence_reads_the_interval_not_the_point_estimate(gained, lost, reading):
    base, trained = _frames(gained, lost)
    text = verdict(base, trained, [0.5, 0.45, 0.6], rounds=6)
    where = "most on x" if gained or lost else "no family moved"
    assert reading in text and f"{gained} questions gained, {lost} lost; {where}" in text
    assert "validation EM went 50.0 -> 60.0 (best 60.0)" in text and text.count(". ") == 0 and text.endswith(".")


def test_a_bad_train_seed_is_one_line_before_the_notebook_starts(capsys):
    from workbench.cli import main

    assert main(["quickstart", "--preset", "smoke", "--long", "--train-seed", "-2"]) == 2
    assert "config field 'method.seed': expected a seed in [0, 2^31), got -2" in capsys.readouterr().err
