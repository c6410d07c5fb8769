"""Parameterised notebook batches, run for real with papermill on the venv's python3 kernel."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from workbench import batch, cli, store

PROBE = Path(__file__).parent / "fixtures" / "batch_probe.ipynb"


def _rows(db: Path) -> list[tuple]:
    con = store.connect(db)
    try:
        return con.execute("SELECT point, params, status, outputs, error, notebook, duration_s FROM batch_results "
                           "ORDER BY params").fetchall()
    finally:
        con.close()


def test_the_kernel_is_the_venvs():
    from jupyter_client.kernelspec import KernelSpecManager

    spec = KernelSpecManager().get_kernel_spec("python3")
    assert Path(spec.resource_dir).is_relative_to(Path(sys.prefix)) or spec.argv[0] in ("python", sys.executable)


def test_two_point_batch_runs_records_and_resumes(tmp_path):
    db, out = tmp_path / "s.duckdb", tmp_path / "out"
    grid = batch.parse_grid({"x": [2, 3], "label": "g"})
    results = batch.run_batch(PROBE, grid, out_dir=out, db=db, progress=False)
    assert [(r.status, r.outputs) for r in results] == [("done", {"label": "g", "square": 4}),
                                                        ("done", {"label": "g", "square": 9})]
    for r in results:
        assert Path(r.notebook) == out / f"{batch.point_id(r.params)}.ipynb" and Path(r.notebook).exists()
    rows = _rows(db)
    assert [(json.loads(p), s, json.loads(o)) for _, p, s, o, *_ in rows] == [
        ({"label": "g", "x": 2}, "done", {"label": "g", "square": 4}),
        ({"label": "g", "x": 3}, "done", {"label": "g", "square": 9})]
    assert all(r[6] > 0 for r in rows)
    again = batch.run_batch(PROBE, grid, out_dir=out, db=db, progress=False)
    assert [r.status for r in again] == ["skipped", "skipped"]
    assert [r.outputs["square"] for r in again] == [4, 9]
    assert len(_rows(db)) == 2  # resuming adds no rows


def test_undeclared_parameter_is_rejected_before_anything_runs(tmp_path):
    db, out = tmp_path / "s.duckdb", tmp_path / "out"
    with pytest.raises(ValueError, match=r"'y' is not declared.*declared: fail, label, x"):
        batch.run_batch(PROBE, [{"x": 1}, {"y": 2}], out_dir=out, db=db, progress=False)
    with pytest.raises(ValueError, match=r"'x' is declared int, got 'two'"):
        batch.run_batch(PROBE, [{"x": "two"}], out_dir=out, db=db, progress=False)
    assert not out.exists() and not db.exists()


def test_a_failing_point_is_reported_and_the_other_finishes(tmp_path, capsys):
    db, out = tmp_path / "s.duckdb", tmp_path / "out"
    code = cli.main(["batch", str(PROBE), "-p", "x", "4", "-p", "fail", "true", "-p", "fail", "false",
                     "--out", str(out), "--db", str(db), "--jobs", "2"])
    assert code == 1
    printed = capsys.readouterr().out
    assert 'FAILED point' in printed and '{"fail": true, "x": 4}' in printed
    assert "(In [4]: if fail:): ValueError: failing on purpose for x=4" in printed
    status = {json.loads(p)["fail"]: (s, e) for _, p, s, o, e, *_ in _rows(db)}
    assert status[False] == ("done", None)
    assert status[True][0] == "failed" and "ValueError: failing on purpose" in status[True][1]
    # The failed point runs again on resume; the finished one is skipped.
    results = batch.run_batch(PROBE, [{"x": 4, "fail": True}, {"x": 4, "fail": False}], out_dir=out, db=db,
                              progress=False)
    assert [r.status for r in results] == ["failed", "skipped"]


def test_grid_parsing(tmp_path):
    assert batch.parse_grid({"a": [1, 2], "b": ["x", "y"]}) == [
        {"a": 1, "b": "x"}, {"a": 1, "b": "y"}, {"a": 2, "b": "x"}, {"a": 2, "b": "y"}]
    assert batch.parse_grid([{"a": 1}, {"b": 2}]) == [{"a": 1}, {"b": 2}]
    assert batch.cli_axes([("s", "0"), ("s", "1"), ("p", "smoke"), ("f", "true"), ("lr", "3e-5")]) == {
        "s": [0, 1], "p": ["smoke"], "f": [True], "lr": [3e-5]}
    assert batch.combine([{"a": 1}, {"a": 2}], {"s": [0, 1]}) == [
        {"a": 1, "s": 0}, {"a": 1, "s": 1}, {"a": 2, "s": 0}, {"a": 2, "s": 1}]
    assert batch.point_id({"a": 1, "b": 2}) == batch.point_id({"b": 2, "a": 1}) != batch.point_id({"a": 2, "b": 2})
    bad = tmp_path / "grid.yaml"
    bad.write_text("- 1\n- 2\n")
    with pytest.raises(ValueError, match="grid.yaml: expected a mapping"):
        batch.load_grid(bad)
    bad.write_text("a: [1\n")
    with pytest.raises(ValueError, match="(?s)grid.yaml: not valid YAML.*line 1"):
        batch.load_grid(bad)
    with pytest.raises(ValueError, match="'a' has an empty list"):
        batch.parse_grid({"a": []})


def test_record_writes_beside_the_batch_notebook_only(tmp_path, monkeypatch):
    monkeypatch.delenv(batch.ENV_NOTEBOOK, raising=False)
    assert batch.record(a=1) == {"a": 1} and not list(tmp_path.iterdir())
    monkeypatch.setenv(batch.ENV_NOTEBOOK, str(tmp_path / "p1.ipynb"))
    batch.record(a=1)
    batch.record(b=[1, 2])
    assert json.loads((tmp_path / "p1.outputs.json").read_text()) == {"a": 1, "b": [1, 2]}
    with pytest.raises(TypeError, match=r"record\(c=...\): object"):
        batch.record(c=object())
