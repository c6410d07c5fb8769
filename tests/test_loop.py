"""The CoEvoKG loop at smoke size: metrics, matched budgets, determinism and resume (issue 4)."""

import json

import pytest

from workbench import store
from workbench.cli import main
from workbench.config import preset
from workbench.method.train import METRIC_KEYS, ensure_world, train

TIMING = ("time_", "search_cache")


def _comparable(rows):
    return [{k: v for k, v in r.items() if not k.startswith(TIMING)} for r in rows]


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    path = tmp_path_factory.mktemp("loop") / "smoke.duckdb"
    con = store.connect(path)
    ensure_world(con, preset("smoke"))
    con.close()
    return str(path)


def test_coevokg_rounds_log_every_metric(db, capsys):
    rows = train(db, run="full", method="coevokg", preset="smoke", steps=2, progress=False, log=None)
    assert [r["round"] for r in rows] == [0, 1]
    for r in rows:
        assert set(METRIC_KEYS) <= set(r)
        assert r["kl_coef"] > 0 and r["kl_coef"] != preset("smoke").method.kl_coef  # the controller moved it
        assert 0.0 <= r["seed_fallback_rate"] <= 1.0 and 0.0 <= r["admitted_rate"] <= 1.0
        assert r["pool_chains"] > 0 and r["pool_evidence"] > 0
    assert main(["runs", "show", "full", "--json", "--db", db]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert _comparable(shown) == _comparable(rows)
    con = store.connect(db, read_only=True)
    cfg = preset("smoke").method
    per_round = cfg.chains_per_round * cfg.admit_top_k * cfg.group_size
    counts = con.execute("SELECT round, count(*) FROM trajectories WHERE run = 'full' GROUP BY round "
                         "ORDER BY round").fetchall()
    assert counts == [(0, per_round), (1, per_round)]
    n_cand = con.execute("SELECT count(*) FROM candidates WHERE run = 'full'").fetchone()[0]
    assert n_cand == 2 * cfg.chains_per_round * cfg.candidates_per_chain
    con.close()


@pytest.mark.parametrize("method", ["search_r1", "ssp"])
def test_baselines_run_on_the_same_budget(db, method):
    rows = train(db, run=f"b-{method}", method=method, preset="smoke", steps=1, progress=False, log=None)
    con = store.connect(db, read_only=True)
    cfg = preset("smoke").method
    n = con.execute("SELECT count(*) FROM trajectories WHERE run = ?", [f"b-{method}"]).fetchone()[0]
    assert n == cfg.chains_per_round * cfg.admit_top_k * cfg.group_size
    n_cand = con.execute("SELECT count(*) FROM candidates WHERE run = ?", [f"b-{method}"]).fetchone()[0]
    con.close()
    if method == "search_r1":  # no proposer: every slot is a seed question
        assert rows[0]["seed_fallback_rate"] == 1.0 and n_cand == 0
    else:
        assert n_cand == cfg.chains_per_round * cfg.candidates_per_chain


def test_resume_gives_the_uninterrupted_run(db):
    whole = train(db, run="whole", method="coevokg", preset="smoke", steps=2, progress=False, log=None)
    train(db, run="parts", method="coevokg", preset="smoke", steps=1, progress=False, log=None)
    resumed = train(db, run="parts", method="coevokg", preset="smoke", steps=2, resume=True, progress=False,
                    log=None)
    assert _comparable(resumed) == _comparable(whole)


def test_unknown_method_is_a_clear_error(db):
    with pytest.raises(ValueError, match="unknown method 'nope'"):
        train(db, run="x", method="nope", preset="smoke", steps=1, progress=False, log=None)


def test_resume_refuses_other_settings_and_survives_an_interrupted_swap(db):
    from workbench.method.train import run_dir

    train(db, run="strict", method="c2", preset="smoke", steps=1, progress=False, log=None)
    with pytest.raises(ValueError, match="other settings"):
        train(db, run="strict", method="c2", preset="smoke", steps=2, resume=True, progress=False, log=None,
              overrides={"method.lr": 1e-3})
    # a stop between the two renames of a checkpoint swap leaves only checkpoint.old
    run_dir("strict").joinpath("checkpoint").rename(run_dir("strict") / "checkpoint.old")
    rows = train(db, run="strict", method="c2", preset="smoke", steps=2, resume=True, progress=False, log=None)
    assert [r["round"] for r in rows] == [0, 1]


def test_minibatches_take_that_many_optimiser_steps_per_round(db):
    import torch

    from workbench.evaluate import model_labels
    from workbench.method.train import run_dir

    train(db, run="mb", method="search_r1", preset="smoke", steps=1, progress=False, log=None,
          overrides={"method.minibatches": 3, "method.lr": 1e-3, "method.warmup_steps": 4})
    saved = torch.load(run_dir("mb") / "checkpoint" / "optimizer.pt")
    assert {float(s["step"]) for s in saved["state"].values()} == {3.0}
    assert saved["param_groups"][0]["lr"] == pytest.approx(3 / 4 * 1e-3)  # the third of 4 warm-up steps
    assert model_labels(run_dir("mb") / "best")["method"] == "search_r1"
