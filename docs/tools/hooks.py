"""MkDocs hooks: pages made from the repository at build time, so the site cannot drift from it.

- ``index.md`` (the home page): README.md, its links into docs/ made relative to the site.
- ``cli-reference.md``: what ``workbench --help`` and every subcommand's ``--help`` print, from
  the same argparse parser the command builds (``workbench.cli.build_parser``).
- ``reference/modules.md``: every module of the package with the first line of its docstring, read
  from the source (nothing imported), so a module that moves is listed where it now is.
- ``LOG.md`` and ``log/*.md``: the log's index and its sessions, where they live in the checkout.
- ``notebooks/NAME.ipynb``: the notebooks as ``docs/tools/execute_notebooks.py`` executed them at
  smoke size (build/docs/notebooks), rendered by mkdocs-jupyter; a notebook not executed there is
  rendered from notebooks/ without outputs, and the build says so.
"""

from __future__ import annotations

import argparse
import ast
import logging
import os
import re
from pathlib import Path

from mkdocs.plugins import event_priority
from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[2]
EXECUTED = ROOT / "build" / "docs"  # execute_notebooks.py writes EXECUTED/notebooks/NAME.ipynb
log = logging.getLogger("mkdocs.hooks.workbench")


def _subcommands(parser: argparse.ArgumentParser):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            yield from action.choices.items()


def _walk(parser: argparse.ArgumentParser, prefix: list[str]):
    yield prefix, parser
    for name, sub in _subcommands(parser):
        yield from _walk(sub, prefix + [name])


def cli_reference() -> str:
    """The CLI reference page: every parser's help, as the command prints it at 100 columns."""
    os.environ["COLUMNS"] = "100"  # argparse wraps to the terminal; a fixed width keeps builds alike
    from workbench.cli import build_parser

    lines = ["# CLI reference", "",
             "Generated when the site is built, from the parser `workbench` itself uses: each section is",
             "what `workbench ... --help` prints. [The command](cli.md) has worked examples.", ""]
    for path, parser in _walk(build_parser(), []):
        title = " ".join(["workbench", *path])
        lines += [f"## `{title}`", "", "```text", parser.format_help().rstrip(), "```", ""]
    return "\n".join(lines)


def readme_as_home() -> str:
    """README.md as the site's home page: ``](docs/X)`` links become ``](X)``; LOG.md is at the site's top too.

    Example:
        >>> "](start.md)" in readme_as_home()
        True
    """
    return re.sub(r"\]\(docs/", "](", (ROOT / "README.md").read_text())


def module_list() -> str:
    """The generated module list: a section a folder of ``workbench/``, a line a module with its docstring's first paragraph."""
    lines = ["# Every module", "",
             "Generated when the site is built, from the package's source: each module and the first",
             "paragraph of its docstring. [Where to look](layout.md) has the map by layer.", ""]
    folder = None
    for path in sorted((ROOT / "workbench").rglob("*.py"), key=lambda p: (p.parent != ROOT / "workbench", p.parent, p.name)):
        if path.parent != folder:
            folder = path.parent
            lines += ["", f"## `{folder.relative_to(ROOT)}/`", ""]
        doc = ast.get_docstring(ast.parse(path.read_text())) or "(no docstring)"
        lines.append(f"- **`{path.name}`**: " + " ".join(doc.split("\n\n")[0].split()))
    return "\n".join(lines) + "\n"


@event_priority(50)  # before mkdocs-jupyter's on_files, which turns .ipynb files into pages
def on_files(files: Files, config) -> Files:
    files.append(File.generated(config, "index.md", content=readme_as_home()))
    files.append(File.generated(config, "cli-reference.md", content=cli_reference()))
    files.append(File.generated(config, "reference/modules.md", content=module_list()))
    for path in [ROOT / "LOG.md", *sorted((ROOT / "log").glob("*.md"))]:
        files.append(File(str(path.relative_to(ROOT)), str(ROOT), config["site_dir"], config["use_directory_urls"]))
    missing = []
    for src in sorted((ROOT / "notebooks").glob("*.ipynb")):
        executed = EXECUTED / "notebooks" / src.name
        base = EXECUTED if executed.exists() else ROOT
        if not executed.exists():
            missing.append(src.stem)
        files.append(File(f"notebooks/{src.name}", str(base), config["site_dir"], config["use_directory_urls"]))
    if missing:
        log.info("notebooks rendered without outputs (not executed; see docs/tools/execute_notebooks.py): %s",
                 ", ".join(missing))
    return files
