"""dev/chain_proposer_probe.py at smoke size: the loop's candidates gated under each vocabulary."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_probe_gates_the_same_candidates_under_each_vocabulary(tmp_path):
    db = tmp_path / "smoke.duckdb"
    wb = [sys.executable, "-m", "workbench.cli"]
    for args in (["world", "--preset", "smoke"], ["pool", "build", "--preset", "smoke"]):
        subprocess.run([*wb, *args, "--db", str(db)], cwd=ROOT, check=True, capture_output=True)
    done = subprocess.run([sys.executable, "dev/chain_proposer_probe.py", "--store", str(db), "--preset", "smoke",
                           "--rounds", "2"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout)  # stdout is the JSON report alone
    assert report["candidates"] == report["chains"] * 2  # smoke: 2 chains a round, M = 2
    rows = report["vocabulary"]
    assert list(rows) == ["exact", "forms", "forms_types"]
    for row in rows.values():
        assert sum(row["reasons"].values()) == report["candidates"]
    # each vocabulary only adds matches: no candidate passes under a narrower one and fails a wider one
    assert rows["exact"]["passed"] <= rows["forms"]["passed"] <= rows["forms_types"]["passed"]
