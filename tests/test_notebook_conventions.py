"""Every notebook follows NOTEBOOKS.md: no committed outputs, a literal `parameters` cell first, a top markdown cell."""

from __future__ import annotations

import ast
from pathlib import Path

import nbformat
import papermill
import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parent.parent / "notebooks").glob("*.ipynb"))


def test_there_are_notebooks():
    assert NOTEBOOKS, "no notebooks/*.ipynb found"


@pytest.fixture(params=NOTEBOOKS, ids=lambda p: p.name)
def nb(request):
    return request.param, nbformat.read(request.param, as_version=4)


def _code(notebook) -> list:
    return [c for c in notebook.cells if c.cell_type == "code"]


def test_committed_without_outputs_or_execution_counts(nb):
    path, notebook = nb
    dirty = [i for i, c in enumerate(notebook.cells)
             if c.cell_type == "code" and (c.outputs or c.execution_count is not None)]
    assert not dirty, f"{path.name}: code cells {dirty} carry outputs or execution counts; strip them"


def test_a_markdown_cell_comes_first(nb):
    path, notebook = nb
    assert notebook.cells and notebook.cells[0].cell_type == "markdown", f"{path.name}: start with a markdown cell"
    assert notebook.cells[0].source.lstrip().startswith("#"), f"{path.name}: the top cell needs a title"


def test_first_code_cell_is_tagged_parameters_and_holds_only_literals(nb):
    path, notebook = nb
    first = _code(notebook)[0]
    assert "parameters" in first.metadata.get("tags", []), f"{path.name}: first code cell is not tagged `parameters`"
    for stmt in ast.parse(first.source).body:
        where = f"{path.name} parameters line {stmt.lineno}"
        assert isinstance(stmt, (ast.Assign, ast.AnnAssign)), f"{where}: only assignments belong here"
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        assert len(targets) == 1 and isinstance(targets[0], ast.Name), f"{where}: assign one plain name"
        assert stmt.value is not None, f"{where}: a declaration needs a default value"
        try:
            ast.literal_eval(stmt.value)
        except ValueError:
            pytest.fail(f"{where}: {ast.unparse(stmt.value)!r} is not a literal; compute it in the next cell")


def test_papermill_describes_every_parameter(nb):
    path, notebook = nb
    declared = papermill.inspect_notebook(str(path))
    names = [t.id for s in ast.parse(_code(notebook)[0].source).body
             for t in (s.targets if isinstance(s, ast.Assign) else [s.target])]
    missed = sorted(set(names) - set(declared))
    assert not missed, (f"{path.name}: papermill cannot parse the line of {missed} (its regex trips on an '=' "
                        f"inside the `# comment`); reword the comment")
    for name, info in declared.items():
        assert info["inferred_type_name"] != "None", f"{path.name}: give {name} a type annotation"
        assert info["help"], f"{path.name}: give {name} a `# comment` saying what it is (papermill --help-notebook)"
    assert "preset" in declared, f"{path.name}: every notebook takes a `preset` (smoke size for tests)"


def test_every_notebook_takes_the_run_setting_parameters(nb):
    """preset, model, dataset and overrides (workbench.notebook.SETTING_PARAMETERS), typed as the CLI's
    --preset, --model, --dataset and --set, all given to ``setting`` in one call."""
    from workbench.notebook import SETTING_PARAMETERS

    path, notebook = nb
    declared = papermill.inspect_notebook(str(path))
    missing = [name for name in SETTING_PARAMETERS if name not in declared]
    assert not missing, f"{path.name}: add the parameter(s) {missing} (every notebook takes {list(SETTING_PARAMETERS)})"
    kinds = {name: declared[name]["inferred_type_name"] for name in SETTING_PARAMETERS}
    assert kinds == {"preset": "str", "model": "str", "dataset": "str", "overrides": "dict"}, f"{path.name}: {kinds}"
    assert declared["overrides"]["default"] == "{}", f"{path.name}: overrides defaults to {{}} (no change)"
    source = "\n".join(c.source for c in _code(notebook)[1:])
    assert "setting(preset, model, dataset, overrides)" in source, (
        f"{path.name}: pass the four to workbench.notebook.setting, so they mean the same in every notebook")


# Calls that would bypass the setting's model, dataset or overrides (Setting.train/evaluate/base/search).
BYPASSES = {"config.preset(": "setting(...).cfg", "warm_start(": "setting(...).base", " train(con": "setting(...).train",
            " evaluate(con": "setting(...).evaluate", "= train(": "setting(...).train",
            "= evaluate(": "setting(...).evaluate", "(train(": "setting(...).train"}


def test_notebooks_train_and_evaluate_through_the_setting(nb):
    path, notebook = nb
    source = "\n".join(c.source for c in _code(notebook)[1:])
    used = {call: instead for call, instead in BYPASSES.items() if call in source}
    assert not used, f"{path.name}: {used} ignore the model/dataset/overrides parameters; use the replacement"


def test_the_chain_browser_prints_its_first_chain_once(tmp_path):
    """Issue 43: notebook 01's browser printed chain 0 twice (the widget's own call, then the page's)."""
    nb = Path(__file__).resolve().parents[1] / "notebooks" / "01_kg_walks.ipynb"
    out = tmp_path / "01.ipynb"
    papermill.execute_notebook(str(nb), str(out), cwd=str(nb.parent), progress_bar=False,
                               parameters={"preset": "smoke", "db": str(tmp_path / "s.duckdb")})
    cell = next(c for c in nbformat.read(out, as_version=4).cells if "slider.observe" in c.source)
    text = "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream")
    assert sum(line.startswith("chain ") for line in text.splitlines()) == 1, text
