"""An executed notebook, rendered as a reader without plotly's JavaScript sees it (issue 13): every
figure cell of ``jupyter nbconvert --to html`` output carries a rendered image -- the PNG when a
Chromium exists, else the figure as HTML with plotly.js inline -- not only plotly's JSON; a figure
of tables (Tables 1-2) carries its tables as HTML tables, readable at a phone's width (issue 43)."""

from __future__ import annotations

import re
import shutil

import nbformat
import papermill
import pytest
from bs4 import BeautifulSoup
from nbconvert import HTMLExporter

from workbench import paths, store

NOTEBOOK = paths.notebooks_dir() / "07_paper_figures.ipynb"  # every paper figure, no training


def _render(tmp_path) -> list[tuple[str, BeautifulSoup]]:
    """Execute notebook 07 at smoke size on an empty store, convert it to HTML; (source, output) of
    each cell that shows a figure."""
    out = tmp_path / "07.ipynb"
    store.connect(tmp_path / "empty.duckdb").close()
    papermill.execute_notebook(str(NOTEBOOK), str(out), cwd=str(NOTEBOOK.parent), progress_bar=False,
                               parameters={"preset": "smoke", "db": str(tmp_path / "empty.duckdb")})
    html, _ = HTMLExporter().from_notebook_node(nbformat.read(out, as_version=4))
    cells = BeautifulSoup(html, "html.parser").select(".jp-CodeCell")
    shown = [(c.select_one(".jp-InputArea").get_text(), c.select_one(".jp-OutputArea")) for c in cells]
    figures = [(src, output) for src, output in shown if re.search(r"figures\.(table[12]|figure[34])\(", src)]
    assert len(figures) == 4, [src for src, _ in shown]  # Tables 1-2, Figures 3-4
    return figures


def _tables(src: str, output) -> bool:
    """Whether a figure cell is Table 1 or 2, and then that it shows HTML tables and no picture."""
    if not re.search(r"figures\.table[12]\(", src):
        return False
    html = output.select_one('[data-mime-type="text/html"]')
    assert html is not None and len(html.select("table")) >= 2 and not output.select("img"), src
    assert "saved: 07_table" in html.get_text() and not html.select(".plotly-graph-div"), src
    return True


@pytest.mark.skipif(not shutil.which("chromium"), reason="no Chromium here: the PNG path cannot run")
def test_every_figure_of_an_executed_notebook_renders_as_a_png_in_nbconvert_html(tmp_path, monkeypatch):
    monkeypatch.setenv("WORKBENCH_FIGURES", str(tmp_path / "figures"))
    for src, output in _render(tmp_path):
        if _tables(src, output):
            continue
        images = output.select('img[src^="data:image/png;base64,"]')
        assert len(images) == 1 and len(images[0]["src"]) > 10_000, src  # a real picture, one per figure
        assert images[0].get("width") == "900" and "max-width: 100%" in images[0]["style"]


def test_without_a_chromium_every_figure_renders_as_inline_html(tmp_path, monkeypatch):
    monkeypatch.setenv("WORKBENCH_FIGURES", str(tmp_path / "figures"))
    monkeypatch.setenv("BROWSER_PATH", "/nonexistent/chromium")  # the kernel finds no browser
    figures = [(src, output) for src, output in _render(tmp_path) if not _tables(src, output)]
    assert len(figures) == 2  # Figures 3-4
    for src, output in figures:
        assert not output.select("img"), src
        html = output.select_one('[data-mime-type="text/html"]')
        assert html is not None and html.select_one(".plotly-graph-div") is not None, src
        assert "Plotly.newPlot" in html.decode() and "saved as" in html.get_text(), src
    assert "plotly.js" in figures[0][1].decode()  # the first figure brings plotly.js, the others use it


def test_notebooks_take_eval_labels_and_presets_from_the_models():
    """Smoke results carry the CLI's labels (tiny-smoke/base): no notebook names its own backbone or preset."""
    for path in sorted(paths.notebooks_dir().glob("*.ipynb")):
        code = "\n".join(c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code")
        for call in re.findall(r"\bevaluate\((.*?)\)\n", code, re.S):
            assert "backbone=" not in call and "preset=" not in call, f"{path.name}: evaluate({call})"


def test_notebook_07_given_a_store_that_is_not_there_says_so(tmp_path):
    """Issue 43: a wrong ``db`` is an error naming it, not the paper's numbers shown quietly alone."""
    missing = tmp_path / "nope.duckdb"
    with pytest.raises(papermill.PapermillExecutionError, match="no store there"):
        papermill.execute_notebook(str(NOTEBOOK), str(tmp_path / "out.ipynb"), cwd=str(NOTEBOOK.parent),
                                   progress_bar=False, parameters={"db": str(missing)}, kernel_name="python3")
    assert not missing.exists()
