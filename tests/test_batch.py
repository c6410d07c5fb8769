"""Parameterised notebook batches, run for real with papermill on the venv's python3 kernel."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import duckdb
import nbformat
import pandas as pd
import pytest

from workbench import batch, cli, paths, store

FIXTURES = Path(__file__).parent / "fixtures"
PROBE = FIXTURES / "batch_probe.ipynb"
STORE_PROBE = FIXTURES / "batch_store_probe.ipynb"  # opens data/<preset>.duckdb for writing, as notebooks do
NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"


@pytest.fixture
def area(tmp_path, monkeypatch):
    """A fresh workbench area (data/, runs/, figures/) for this test and the kernels it starts."""
    for name in ("DATA", "RUNS", "FIGURES"):
        monkeypatch.setenv(f"WORKBENCH_{name}", str(tmp_path / name.lower()))
    return tmp_path


def _runs(db: str | Path) -> list[str]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return sorted(r for (r,) in con.execute("SELECT run FROM runs").fetchall())
    finally:
        con.close()


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
    out = tmp_path / "out"
    db = out / "batch.duckdb"  # the record lives beside the batch's outputs
    grid = batch.parse_grid({"x": [2, 3], "label": "g"})
    results = batch.run_batch(PROBE, grid, out_dir=out, progress=False)
    assert [(r.status, r.outputs) for r in results] == [("done", {"label": "g", "square": 4}),
                                                        ("done", {"label": "g", "square": 9})]
    for r in results:
        assert Path(r.notebook) == out / f"{batch.point_label(r.params)}.ipynb" and Path(r.notebook).exists()
    rows = _rows(db)
    assert [(json.loads(p), s, json.loads(o)) for _, p, s, o, *_ in rows] == [
        ({"label": "g", "x": 2}, "done", {"label": "g", "square": 4}),
        ({"label": "g", "x": 3}, "done", {"label": "g", "square": 9})]
    assert all(r[6] > 0 for r in rows)
    again = batch.run_batch(PROBE, grid, out_dir=out, db=db, progress=False)
    assert [r.status for r in again] == ["skipped", "skipped"]
    assert [r.outputs["square"] for r in again] == [4, 9]
    assert len(_rows(db)) == 2  # resuming adds no rows


def test_undeclared_parameter_is_rejected_before_anything_runs(tmp_path, monkeypatch):
    db, out = tmp_path / "s.duckdb", tmp_path / "out"
    with pytest.raises(ValueError, match=r"'y' is not declared.*declared: fail, label, x"):
        batch.run_batch(PROBE, [{"x": 1}, {"y": 2}], out_dir=out, db=db, progress=False)
    with pytest.raises(ValueError, match=r"'x' is declared int, got 'two'"):
        batch.run_batch(PROBE, [{"x": "two"}], out_dir=out, db=db, progress=False)
    monkeypatch.delenv("WORKBENCH_SMOKE", raising=False)  # else every preset is smoke
    with pytest.raises(ValueError, match=r"unknown preset 'huge'"):
        batch.run_batch(STORE_PROBE, [{"preset": "huge"}], out_dir=out, db=db, progress=False)
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


# ----------------------------------------------------------------- issue 13: batches side by side

def test_points_run_side_by_side_each_in_its_own_store(area):
    """Two points that both open data/smoke.duckdb for writing used to collide on its lock (issue 13)."""
    mine = paths.default_db("smoke")
    con = store.connect(mine)
    con.execute("INSERT INTO runs (run, method, status) VALUES ('mine', 'probe', 'done')")
    con.close()
    out = area / "out"
    results = batch.run_batch(STORE_PROBE, batch.parse_grid({"seed": [0, 1], "hold_s": 1.5}), out_dir=out,
                              jobs=2, progress=False)
    assert [r.status for r in results] == ["done", "done"], batch.failure_report(results)
    stores = [Path(r.outputs["store"]) for r in results]
    for r, db in zip(results, stores):
        folder = out / batch.point_label(r.params)
        assert db == (folder / "data" / "smoke.duckdb").resolve()  # its own copy of the preset's store
        assert r.outputs["runs"] == sorted(["mine", r.outputs["run"]]) == _runs(db)
        assert r.outputs["cache"] == str(paths.cache_dir().resolve())  # caches are shared, not rebuilt
        assert r.outputs["figures"] == str((folder / "figures").resolve())  # figures never overwrite each other
    assert _runs(mine) == ["mine"]  # the caller's store is only read


def test_run_names_are_unique_per_point_even_in_one_store(area):
    """A grid whose points differ in a parameter the run name omits used to overwrite its own runs (issue 13)."""
    shared = area / "shared.duckdb"
    grid = batch.parse_grid({"db": str(shared), "hold_s": [0.0, 0.1]})
    with pytest.raises(ValueError, match=r"-p db: points .* both use the store .*shared.duckdb.*--jobs 1"):
        batch.run_batch(STORE_PROBE, grid, out_dir=area / "out", jobs=2, progress=False)
    results = batch.run_batch(STORE_PROBE, grid, out_dir=area / "out", jobs=1, progress=False)
    assert [r.status for r in results] == ["done", "done"], batch.failure_report(results)
    assert [r.outputs["run"] for r in results] == [f"probe-{batch.point_id(p)}" for p in grid]
    assert _runs(shared) == sorted(r.outputs["run"] for r in results)
    assert batch.run_name("probe") == "probe"  # outside a batch a notebook's run keeps its name


def test_notebooks_that_train_name_their_runs_per_point():
    for path in sorted(NOTEBOOKS.glob("*.ipynb")):
        code = "\n".join(c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code")
        for call in re.findall(r"\btrain\(con, run=([^,]+),", code):
            assert "batch.run_name(" in code and call.strip() == "run", f"{path.name}: train(run={call}) " \
                "does not use a run name made by batch.run_name"


def test_the_record_lives_beside_the_outputs_and_is_listed(area, capsys):
    """The record used to go to data/tiny.duckdb, so a new --out reported `skipped` for notebooks it did not have."""
    assert cli.main(["batch", str(PROBE), "-p", "x", "2", "-p", "x", "3"]) == 0
    home = batch.default_out("batch_probe")
    assert (home / "batch.duckdb").exists() and not paths.default_db("tiny").exists()
    printed = capsys.readouterr().out
    assert re.search(r"\nx=2-\w{10}\s+done\s+[\d.]+\s+2\s+probe\n", printed), printed  # the points, text outputs
    assert re.search(r"\n\s*2\s+square\s+1\s+4\s", printed), printed  # numbers: per group, over seeds
    elsewhere = area / "elsewhere"
    assert cli.main(["batch", str(PROBE), "-p", "x", "2", "-p", "x", "3", "--out", str(elsewhere)]) == 0
    assert set(batch.list_points(elsewhere / "batch.duckdb").status) == {"done"}  # ran again, not skipped
    # an explicit shared record does not skip points whose notebooks are not in this --out either
    rec = area / "shared-record.duckdb"
    for folder in ("a", "b"):
        results = batch.run_batch(PROBE, [{"x": 5}], out_dir=area / folder, db=rec, progress=False, summary=False)
        assert [r.status for r in results] == ["done"]
    capsys.readouterr()
    assert cli.main(["batch", "--list"]) == 0
    listed = capsys.readouterr().out
    assert re.search(r"batch_probe\s+2\s+2\s+0\s+0\s+" + re.escape(str(home)), listed), listed
    assert cli.main(["batch", str(PROBE), "--list"]) == 0
    listed = capsys.readouterr().out
    assert re.search(r"done\s+x=3-\w{10}\s+[\d.]+\s+label=probe square=9\s+" + re.escape(str(home)),
                     listed), listed


def test_a_folder_that_is_not_a_batchs_is_never_written_over(tmp_path):
    (tmp_path / "summary.md").write_text("my notes")
    with pytest.raises(ValueError, match=r"--out .*: holds 'summary.md' and is not a batch's folder"):
        batch.run_batch(PROBE, [{"x": 1}], out_dir=tmp_path, progress=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["summary.md"]


def test_point_labels_are_readable_and_safe():
    assert batch.point_label({"seed": 1, "method": "c2"}) == f"method=c2,seed=1-{batch.point_id({'seed': 1, 'method': 'c2'})}"
    odd = {"db": "../data/my store.duckdb", "methods": ["ssp", "c1"], "lr": 3e-5, "on": True}
    assert batch.point_label(odd)[:-11] == "db=.._data_my_store.duckdb,lr=3e-05,methods=ssp+c1,on=true"
    long = {"name": "x" * 300}
    assert len(batch.point_label(long)) == batch.LABEL_CHARS + 11
    assert batch.point_label(long) != batch.point_label({"name": "x" * 299})  # the id keeps them apart


def test_executed_notebooks_are_named_by_their_parameters(tmp_path):
    results = batch.run_batch(PROBE, [{"x": 2, "label": "a/b c"}], out_dir=tmp_path, progress=False, summary=False)
    assert [Path(r.notebook).name for r in results] == [f"label=a_b_c,x=2-{batch.point_id(results[0].params)}.ipynb"]
    assert Path(results[0].notebook).exists() and (tmp_path / Path(results[0].notebook).stem).is_dir()


def test_the_batch_ends_with_a_summary_of_every_points_outputs(tmp_path):
    grid = batch.parse_grid({"x": [2, 3], "label": "g"})
    batch.run_batch(PROBE, grid, out_dir=tmp_path, progress=False)
    table = pd.read_csv(tmp_path / "points.csv")
    assert list(table.columns) == ["point", "status", "seconds", "x", "label", "square"]
    assert table[["x", "status", "square"]].values.tolist() == [[2, "done", 4], [3, "done", 9]]
    assert "| point | status | seconds | x | label | square |" in (tmp_path / "points.md").read_text()
    summary = pd.read_csv(tmp_path / "summary.csv")  # per group (here x, no seeds): one value each
    assert summary[["x", "output", "seeds", "mean"]].values.tolist() == [[2, "square", 1, 4.0], [3, "square", 1, 9.0]]
    html = (tmp_path / "summary.html").read_text()
    assert '"text":"square"' in html.replace(" ", "") and "x=3" in html
    again = batch.run_batch(PROBE, grid, out_dir=tmp_path, progress=False)  # skipped points keep their row
    table = pd.read_csv(tmp_path / "points.csv")
    assert list(table.status) == ["skipped", "skipped"] and list(table.square) == [4, 9]
    assert all(r.duration_s > 0 for r in again)  # read back from the executed notebook


# ---------------------------------------------------------------- the real notebooks (slow)

@pytest.mark.slow
def test_issue_13_grid_over_01_runs_both_points(area, capsys):
    code = cli.main(["batch", str(NOTEBOOKS / "01_kg_walks.ipynb"), "-p", "preset", "smoke", "-p", "seed", "0",
                     "-p", "seed", "1", "--out", str(area / "out")])
    assert code == 0, capsys.readouterr().out
    assert set(batch.list_points(area / "out" / "batch.duckdb").status) == {"done"}


@pytest.mark.slow
def test_training_points_share_one_warm_start(area):
    """05 trains: the batch prepares the world and warm start once; both points reuse them side by side."""
    results = batch.run_batch(NOTEBOOKS / "05_coevolution.ipynb", batch.parse_grid({"preset": "smoke", "seed": [0, 1]}),
                              out_dir=area / "out", jobs=2, progress=False)
    assert [r.status for r in results] == ["done", "done"], batch.failure_report(results)
    assert len(list((paths.cache_dir() / "warmstart").iterdir())) == 1
    for r in results:
        text = Path(r.notebook).read_text()
        assert "reusing" in text and "sft step" not in text  # no point trained a warm start
        db = area / "out" / Path(r.notebook).stem / "data" / "smoke.duckdb"
        assert _runs(db) == [f"coevokg-{r.point}"]


@pytest.mark.slow
def test_ablation_grid_over_steps_keeps_every_point(area):
    """Issue 13: 06 named its runs ablation-{method}-s{seed}, so steps 1 and 2 shared one run name."""
    shared = area / "shared.duckdb"
    grid = batch.parse_grid({"preset": "smoke", "methods": "c1", "steps": [1, 2], "db": str(shared)})
    results = batch.run_batch(NOTEBOOKS / "06_ablations.ipynb", grid, out_dir=area / "out", jobs=1, progress=False)
    assert [r.status for r in results] == ["done", "done"], batch.failure_report(results)
    assert _runs(shared) == sorted(f"ablation-c1-s0-{r.point}" for r in results)
    assert all("c1_test_em" in r.outputs for r in results)
