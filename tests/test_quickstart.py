"""The quickstart's settings and closing sentence (workbench/quickstart.py, issue 46)."""

import pandas as pd
import pytest

from workbench.config import preset
from workbench.quickstart import LONG, SHORT, machine, settings, verdict


@pytest.mark.parametrize("run", [SHORT, LONG])
def test_each_quickstart_run_is_a_valid_tiny_config(run):
    cfg = preset("tiny", **run.overrides, **{"method.chains_per_round": run.slots})
    assert cfg.method.chains_per_round == run.slots <= preset("tiny").method.chains_per_round
    assert settings(long=run is LONG) is run


def test_long_averages_and_anneals_as_its_measured_seeds_did():
    """LONG's seeds on the slower CPU were 20-round runs continued to 30 (LOG.md, session 31): the mean
    of rounds 10-29 and Eq. 10's horizon of 20, which LONG's own settings must give."""
    from workbench.method.averaging import first_averaged

    cfg = preset("tiny", **LONG.overrides)
    assert LONG.steps <= cfg.method.steps  # the notebook caps its rounds at the preset's
    assert first_averaged(cfg.method.weight_average, LONG.steps) == 10
    assert cfg.method.anneal_steps == 20


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
    text = verdict(base, trained, pd.DataFrame({"round": [0, 1, 2], "val_em": [0.5, 0.45, 0.6]}),
                   pd.DataFrame({"em": [1.0, 0.0] * 100}))
    where = "most on x" if gained or lost else "no family moved"
    assert text.startswith("After 3 rounds") and reading in text and f"{gained} questions gained, {lost} lost; {where}" in text
    assert "validation EM on 200 questions rose from the base's 50.0 to 60.0" in text
    assert text.count(". ") == 0 and text.endswith(".")


@pytest.mark.parametrize("mean, said", [
    ([None, 0.52, 0.55], "rose from the base's 50.0 to 55.0 for the tested mean of the last rounds' weights "
                         "(52.0 at round 1 -> 55.0 at round 2; each round's policy 60.0 at round 0 -> 45.0 at round 2)"),
    ([None, 0.6, 0.45], "fell from the base's 50.0 to 45.0 for the tested mean"),
    ([None, None, 0.5], "stayed at the base's 50.0 for the tested mean of the last rounds' weights (50.0 at round 2 -> 50.0 at round 2"),
    (None, "rose from the base's 50.0 to 60.0 for the tested best-validation round, 0, chosen on these questions")])
def test_the_validation_curve_is_the_tested_models_against_the_base(mean, said):
    """Where the run kept a mean of its last rounds' weights, the curve that counts is that mean's
    (the tested model), not the policy's: here the policy fell while the mean rose."""
    from workbench.quickstart import validation

    rounds = pd.DataFrame({"round": [0, 1, 2], "val_em": [0.6, 0.5, 0.45]})
    if mean is not None:
        rounds["val_em_average"] = mean
    assert validation(rounds, pd.DataFrame({"em": [1.0, 0.0] * 20})).startswith(f"validation EM on 40 questions {said}")


def test_a_bad_train_seed_is_one_line_before_the_notebook_starts(capsys):
    from workbench.cli import main

    assert main(["quickstart", "--preset", "smoke", "--long", "--train-seed", "-2"]) == 2
    assert "config field 'method.seed': expected a seed in [0, 2^31), got -2" in capsys.readouterr().err


def test_the_machine_line_names_the_cpu_kernels_and_threads_the_numbers_hold_for(monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch, "get_num_threads", lambda: 7)
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: "AVX512")
    assert "torch's AVX512 CPU kernels on 7 threads" in machine()
