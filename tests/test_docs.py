"""The README fits on a screen or two and points at what exists; the documentation site builds in
strict mode, where a broken link fails it (issue 43)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
sys.path.insert(0, str(ROOT / "docs" / "tools"))
import check_site  # noqa: E402


def test_readme_is_at_most_200_lines():
    assert len(README.splitlines()) <= 200, "README.md: keep it under 200 lines; longer text belongs in docs/"


def test_readme_first_screen_gives_the_two_commands_and_their_times():
    first = "\n".join(README.splitlines()[:50])
    block = re.search(r"```bash\n(.*?)```", first, re.S)
    assert block, "README.md: the two commands go in a ```bash block on the first screen"
    commands = [line.split("#")[0].strip() for line in block.group(1).splitlines() if line.strip()]
    assert commands == ["make quickstart", "make test"], commands
    for command in ("`make quickstart`", "`make test`"):
        assert re.search(re.escape(command) + r" \|[^\n]*\d+(-\d+)? min", first), f"README.md: how long {command} takes"


def test_readme_test_command_is_the_one_ci_runs():
    ci = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()
          if line.strip() and not line.lstrip().startswith("#")]
    assert "make test" in ci, ".ci/run no longer runs `make test`: README.md's test command must be what CI runs"


def _links(text: str) -> list[str]:
    return [m for m in re.findall(r"\]\(([^)\s]+)\)", text) if not re.match(r"[a-z]+:", m)]


def test_readme_links_point_at_files_that_exist():
    missing = [link for link in _links(README) if not (ROOT / link.split("#")[0]).exists()]
    assert not missing, f"README.md links to files that do not exist: {missing}"


def test_scripts_and_modules_the_docs_name_exist():
    """A page naming `scripts/x.sh` or `workbench/x.py` (or a package-relative `method/x.py`) after
    the file moved is stale: this names the page and the path."""
    stale = []
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        for path in re.findall(r"`([\w./-]+/[\w.-]+\.(?:py|sh))\b", page.read_text()):
            if not any((base / path).exists() for base in (ROOT, ROOT / "workbench", page.parent)):
                stale.append(f"{page.relative_to(ROOT)}: {path}")
    assert not stale, "docs name files that do not exist (moved? rename them there): " + "; ".join(stale)


def _build(site: Path, config: Path = ROOT / "mkdocs.yml") -> subprocess.CompletedProcess:
    # not --quiet: it hides the warnings from strict mode too, and a broken link then passes (mkdocs 1.6.1)
    mkdocs = Path(sys.executable).with_name("mkdocs")
    return subprocess.run([str(mkdocs), "build", "--strict", "-f", str(config), "-d", str(site)],
                          capture_output=True, text=True, timeout=300, cwd=ROOT,
                          env={"NO_MKDOCS_2_WARNING": "1", "PATH": "/usr/bin:/bin"})


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The site as `make docs` builds it, notebooks as they are in git (~15 s on 2 cores)."""
    site = tmp_path_factory.mktemp("site")
    done = _build(site)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return site


def test_the_site_builds_strict_with_every_page_and_notebook(site):
    for page in ("index.html", "start/index.html", "results/index.html", "cli-reference/index.html",
                 "LOG/index.html", "notebooks/01_kg_walks/index.html"):
        assert (site / page).exists(), page
    assert len(list((site / "log").glob("*/index.html"))) >= 5, "the log's sessions are pages too"
    assert "workbench train" in (site / "cli-reference" / "index.html").read_text(), "the CLI reference is generated"
    modules = (site / "reference" / "modules" / "index.html").read_text()
    assert all(f"<code>{p.name}</code>" in modules for p in (ROOT / "workbench").rglob("*.py")), "every module listed"
    assert "Every edge of the hyperlink graph" in (site / "notebooks" / "01_kg_walks" / "index.html").read_text()


def test_every_internal_link_of_the_site_resolves(site):
    assert check_site.broken_links(site) == []


def test_a_broken_link_fails_the_strict_build(tmp_path):
    """Our config's validation, on a copy of docs/ with one link to a page that does not exist."""
    docs = tmp_path / "docs"
    shutil.copytree(ROOT / "docs", docs)
    (docs / "cite.md").write_text((docs / "cite.md").read_text() + "\n[gone](no-such-page.md)\n")
    config = tmp_path / "mkdocs.yml"
    text = (ROOT / "mkdocs.yml").read_text().replace("docs_dir: docs", f"docs_dir: {docs}")
    config.write_text(text.replace("docs/tools/hooks.py", str(ROOT / "docs" / "tools" / "hooks.py")))
    done = _build(tmp_path / "site", config)
    assert done.returncode != 0
    assert "no-such-page.md" in done.stdout + done.stderr


def test_check_site_finds_a_broken_link_and_anchor(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "index.html").write_text('<h2 id="here">x</h2><a href="../b/">b</a> <a href="#here">ok</a>'
                                               ' <a href="#gone">x</a> <img src="pic.png">')
    assert check_site.broken_links(tmp_path) == ["a/index.html: ../b/", "a/index.html: #gone",
                                                  "a/index.html: pic.png"]


def test_executed_copies_follow_prose_edits_without_running_again(tmp_path):
    """execute_notebooks.py: a Markdown edit keeps the key (no new run) and is copied into the
    executed copy; a code edit changes the key; the build's folders print relative."""
    import execute_notebooks
    import nbformat
    from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

    src, dest = tmp_path / "n.ipynb", tmp_path / "out.ipynb"
    nb = new_notebook(cells=[new_markdown_cell("# Title\nsmoke 10 s"), new_code_cell("x = 1", metadata={"tags": ["parameters"]}),
                             new_code_cell("show(fig)")])
    nbformat.write(nb, src)
    executed = new_notebook(cells=[nb.cells[0].copy(), nb.cells[1].copy(),
                                   new_code_cell("x = 2", metadata={"tags": ["injected-parameters"]}),
                                   new_code_cell("show(fig)", outputs=[new_output(
                                       "stream", name="stdout", text=f"{tmp_path}/work/figures/a.html\n")])])
    executed.metadata["papermill"] = {"input_path": f"{execute_notebooks.ROOT}/notebooks/n.ipynb"}
    nbformat.write(executed, dest)
    key = execute_notebooks.notebook_key("base", src)
    nb.cells[0].source = "# Title\nsmoke 12 s"
    nbformat.write(nb, src)
    assert execute_notebooks.notebook_key("base", src) == key
    assert execute_notebooks.sync_markdown(src, dest)
    assert nbformat.read(dest, as_version=4).cells[0].source == "# Title\nsmoke 12 s"
    nb.cells[2].source = "show(fig, 'b')"
    nbformat.write(nb, src)
    assert execute_notebooks.notebook_key("base", src) != key
    assert execute_notebooks.relative_paths(dest, tmp_path / "work")
    done = nbformat.read(dest, as_version=4)
    assert done.cells[3].outputs[0].text == "figures/a.html\n"
    assert done.metadata.papermill.input_path == "notebooks/n.ipynb"


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("chromium") is None and shutil.which("chromium-browser") is None,
                    reason="no chromium (apt-get install chromium)")
def test_the_site_reads_in_a_browser_at_laptop_and_phone_width(site, tmp_path):
    """Headless Chromium on the built site (docs/tools/screenshots.py): every page of its list loads,
    runs no failing script and is no wider than a laptop's or a phone's window (a table wider than
    the page scrolls inside it); the notebooks' pages show their figures when `make docs` executed
    them. The screenshots land in tmp_path for a person to look at."""
    pytest.importorskip("playwright.sync_api")
    import screenshots

    executed = (ROOT / "build" / "docs" / "notebooks" / "07_paper_figures.ipynb").exists()
    rows = screenshots.shoot(site, tmp_path, screenshots.PAGES)
    assert len(rows) == 2 * len(screenshots.PAGES)
    for row in rows:
        where = f"{row['page']} at {row['width']} px"
        assert row["status"] == 200 and not row["errors"], (where, row)
        assert row["overflow_px"] <= 0, f"{where}: {row['overflow_px']} px wider than the window"
        if executed and row["page"].startswith("notebooks/"):
            assert row["figures"] > 0, f"{where}: no figure drawn"
    assert (tmp_path / "index-phone.png").stat().st_size > 10_000
