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
