"""dev/candidates_by_shape.py: a run's candidates split by whether their chain's hops are all functional."""

import json
import subprocess
import sys
from pathlib import Path

from workbench import store
from workbench.method.gate import Verdict
from workbench.method.run_store import store_verdicts

ROOT = Path(__file__).resolve().parents[1]


def test_candidates_split_by_their_chains_functional_hops(tmp_path):
    db = tmp_path / "s.duckdb"
    con = store.connect(db)
    con.execute("INSERT INTO relations VALUES ('born in', 'person', 'city', true), "
                "('located in', 'city', 'country', true), ('birthplace of', 'city', 'person', false)")
    con.execute("INSERT INTO chain_nodes VALUES (1, 0, 10, 'born in'), (1, 1, 11, 'located in'), (1, 2, 12, NULL), "
                "(2, 0, 11, 'birthplace of'), (2, 1, 10, 'born in'), (2, 2, 11, NULL)")
    verdict = lambda i, admitted: Verdict(i, "Q?", "A", True, admitted=admitted)  # noqa: E731
    store_verdicts(con, "r", 0, 1, [verdict(0, True), verdict(1, False)], p_s=[0.5, None])
    store_verdicts(con, "r", 1, 1, [verdict(0, True), verdict(1, True)], p_s=[1.0, 0.0])
    store_verdicts(con, "r", 1, 2, [verdict(0, True), verdict(1, False)], p_s=[0.0, None])
    store_verdicts(con, "other", 0, 2, [verdict(0, True)], p_s=[1.0])  # another run's: left out
    con.close()
    done = subprocess.run([sys.executable, "dev/candidates_by_shape.py", "--store", str(db), "--run", "r"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["rounds"] == 2
    assert report["all hops functional"]["all rounds"] == {"chains": 2, "candidates": 4, "admitted": 3,
                                                           "admitted_rate": 0.75, "p_s_admitted": 0.5,
                                                           "p_s_zero_share": 0.333}
    assert report["a non-functional hop"]["all rounds"] == {"chains": 1, "candidates": 2, "admitted": 1,
                                                           "admitted_rate": 0.5, "p_s_admitted": 0.0,
                                                           "p_s_zero_share": 1.0}
    assert report["all hops functional"]["rounds 0-0"]["p_s_admitted"] == 0.5
    assert report["a non-functional hop"]["rounds 0-0"]["candidates"] == 0


def test_a_run_without_candidates_is_named(tmp_path):
    db = tmp_path / "s.duckdb"
    store.connect(db).close()
    done = subprocess.run([sys.executable, "dev/candidates_by_shape.py", "--store", str(db), "--run", "nope"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode != 0 and "run 'nope' has no proposer candidates" in done.stderr
