"""``method.val_every`` (issue 44): validation every k-th round, the last and each iteration's
last; the other rounds record no validation EM and cannot become ``best``."""

from __future__ import annotations

import json

import pytest

from workbench import store
from workbench.config import preset
from workbench.method.progress import round_postfix
from workbench.method.train import ensure_world, run_dir, train, validates


def test_which_rounds_validate():
    assert [t for t in range(6) if validates(t, 6, 1)] == list(range(6))  # the default: every round
    assert [t for t in range(7) if validates(t, 7, 3)] == [2, 5, 6]  # every third and the last
    assert [t for t in range(6) if validates(t, 6, 4, iteration_ends=(3, 6))] == [2, 3, 5]  # iterations end at 3, 6
    assert round_postfix({"round": 0, "solver_reward": 0.5, "val_em": None, "pool_chains": 3}, -1.0)["val EM"] == "-"
    with pytest.raises(ValueError, match="'method.val_every': expected an integer >= 1"):
        preset("smoke", **{"method.val_every": 0})


def test_a_run_validating_every_second_round_keeps_the_best_validated_one(tmp_path):
    db = tmp_path / "smoke.duckdb"
    con = store.connect(db)
    ensure_world(con, preset("smoke"))
    con.close()
    rows = train(str(db), run="val-every", method="search_r1", preset="smoke", steps=3, progress=False, log=None,
                 overrides={"method.val_every": 2})
    val = [r["val_em"] for r in rows]
    assert val[0] is None and all(isinstance(v, float) for v in val[1:])  # rounds 1 (the second) and 2 (the last)
    best = json.loads((run_dir("val-every") / "best" / "workbench.json").read_text())
    assert best["round"] in (1, 2) and best["val_em"] == max(val[1:])
