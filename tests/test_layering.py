"""The package's layering: nothing imports a module of a higher layer (issue 11, ARCHITECTURE.md).

Every module of ``workbench/`` is parsed with ``ast``; its ``workbench.*`` imports (at module
level and inside functions) are resolved to modules and each arrow is checked against ``LAYERS``.
"""

from __future__ import annotations

import argparse
import ast
import inspect
from pathlib import Path

import pytest

import workbench

PACKAGE = Path(workbench.__file__).parent

# Low to high; a module may import its own layer and those below. The key is the name's first part
# below ``workbench`` ("workbench" itself for the package's __init__).
LAYERS = (
    {"workbench", "paths", "scoring", "config", "limits", "registry"},    # pure helpers
    {"store"},                                                            # the DuckDB store
    {"kg", "search", "policy"},                                           # knowledge, retrieval, models
    {"method"},                                                           # the paper's method (the round)
    {"peers"},                                                            # peer methods: plug into the round
    {"evaluate", "figures", "compare", "batch", "paper", "reference", "qa_import", "notebook", "plan",
     "plan_calibration", "table1_suite", "data_pipeline", "bench", "quickstart", "step"},  # faces over the method
    {"commands", "cli"},                                                  # the `workbench` command
)

# Upward arrows that exist today: being removed (issue 11). Each must still exist, so the set
# shrinks as they go; a new upward arrow fails test_no_module_imports_a_higher_layer.
KNOWN_UPWARD: set[tuple[str, str]] = set()  # none left (issue 11); an entry must name a reason


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _resolve(name: str) -> str:
    """The module an imported name lives in: ``workbench.kg.pool.build_pool`` -> ``workbench.kg.pool``."""
    while name not in MODULES:
        name = name.rpartition(".")[0]
    return name


def _imports(module: str) -> set[str]:
    """The workbench modules ``module`` imports, anywhere in its source.

    Example: ``from workbench import config, store`` gives ``workbench.config`` and ``workbench.store``.
    """
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: climb from this module's package
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            names |= {f"{base}.{a.name}" for a in node.names}
    return {_resolve(n) for n in names if n == "workbench" or n.startswith("workbench.")}


def _layer(module: str) -> int:
    key = module.split(".")[1] if "." in module else module
    for i, layer in enumerate(LAYERS):
        if key in layer:
            return i
    raise KeyError(f"{module}: in no layer of tests/test_layering.py LAYERS; place it there")


ARROWS = {(m, dep) for m in MODULES for dep in _imports(m) if dep != m}
UPWARD = {(m, dep) for m, dep in ARROWS if _layer(dep) > _layer(m)}


def test_every_module_has_a_layer():
    for module in MODULES:
        _layer(module)


def test_no_module_imports_a_higher_layer():
    new = sorted(UPWARD - KNOWN_UPWARD)
    assert not new, "upward imports (move the code down or the call up): " + ", ".join(f"{m} -> {d}" for m, d in new)


def test_every_known_upward_arrow_still_exists():
    gone = sorted(KNOWN_UPWARD - UPWARD)
    assert not gone, f"no longer imported upward, remove from KNOWN_UPWARD: {gone}"


def _circles() -> list[set[str]]:
    """Modules that import each other in a loop (strongly connected components of ARROWS, any size
    over one), by Tarjan's algorithm."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(m):
        index[m] = low[m] = len(index)
        stack.append(m)
        on.add(m)
        for a, d in ARROWS:
            if a != m:
                continue
            if d not in index:
                visit(d)
                low[m] = min(low[m], low[d])
            elif d in on:
                low[m] = min(low[m], index[d])
        if low[m] == index[m]:
            comp = set()
            while True:
                x = stack.pop()
                on.discard(x)
                comp.add(x)
                if x == m:
                    break
            if len(comp) > 1:
                out.append(comp)

    for m in sorted(MODULES):
        if m not in index:
            visit(m)
    return out


def test_no_modules_import_each_other_in_a_loop():
    """Issue 41: no circle (method.loop <-> method.distributed, search.kg_search <-> search.server,
    reference <-> table1_suite were the last), counting imports inside functions too."""
    assert not _circles(), _circles()


@pytest.mark.parametrize("module, forbidden", [
    ("workbench.evaluate", "workbench.method.loop"),  # evaluation needs the tool, not the round
    ("workbench.method.loop", "workbench.method.distributed"),  # distributed execution wraps the trainer
    ("workbench.method.update", "workbench.method.distributed"),
])
def test_the_round_and_evaluation_keep_apart(module, forbidden):
    assert not any(d == forbidden or d.startswith(forbidden + ".") for d in _imports(module)), (module, forbidden)


def test_plan_imports_no_benchmark():
    """``plan`` reads the model shapes (``bench.shapes``, data), never a benchmark that measures."""
    assert {d for d in _imports("workbench.plan") if d.startswith("workbench.bench")} <= {"workbench.bench.shapes"}


def test_the_core_never_imports_a_peer():
    """A peer (``workbench/peers/X``) registers with the core; only the faces above (commands,
    figures, notebooks) may name one."""
    core = [m for m in MODULES if _layer(m) <= LAYERS.index({"method"})]
    assert not [(m, d) for m in core for d in _imports(m) if d.startswith("workbench.peers")]


def test_imports_are_found_at_module_level_and_inside_functions():
    assert "workbench.kg.qa_sets" in _imports("workbench.kg.tinyworld")  # inside build_world
    assert "workbench.kg.names" in _imports("workbench.kg.tinyworld")  # module level
    assert ("workbench.commands.bench", "workbench.commands") in ARROWS


@pytest.mark.parametrize("name", ["walks", "retrieval", "rollout", "loop", "drfree", "kgsearch"])
def test_bench_options_reach_the_library_as_keywords(name):
    """The CLI layer passes every option of ``workbench bench NAME`` by keyword, so the library
    bench functions stay free of argparse; without ``--db`` none is passed (the library builds the
    preset's world in memory)."""
    import importlib

    from workbench.cli import build_parser
    from workbench.commands.bench import BENCHES, _keywords

    module, func, _ = BENCHES[name]
    bench = getattr(importlib.import_module(module), func)
    args = build_parser().parse_args(["bench", name])
    options = {k for k, v in vars(args).items() if k not in ("command", "bench", "func")}
    assert options <= set(inspect.signature(bench).parameters), name
    keywords = _keywords(bench, args)
    assert "db" not in keywords
    if "db" in options:
        assert _keywords(bench, build_parser().parse_args(["bench", name, "--db", "x.duckdb"]))["db"] == "x.duckdb"
    assert not any(isinstance(v, argparse.Namespace) for v in keywords.values())
