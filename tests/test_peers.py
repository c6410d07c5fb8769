"""Peers as plugins (issue 41): each peer's folder registers its rows and parts with the core, and a
new peer needs no edit of the core. A toy peer, written to a folder of its own here, adds a task
source, a solver reward and a method row through the registries alone and trains one smoke round."""

from __future__ import annotations

import importlib
import sys
import textwrap

import pytest

from workbench import registry
from workbench.method.loop import RUN_EXTENSIONS
from workbench.method.methods import METHODS, WARMSTART_DEMOS
from workbench.method.rewards import PROPOSER_REWARDS, SOLVER_REWARDS
from workbench.method.tasks import CHAIN_SELECTIONS, TASK_SOURCES
from workbench.method.update import PROPOSER_ADVANTAGES

TOY = '''
"""A toy peer: G_t's chains as CoEvoKG's, a solver reward that halves a correct answer's credit, and a
per-round count of its tasks."""

from workbench.method.methods import METHODS, MethodSpec
from workbench.method.rewards import SOLVER_REWARDS
from workbench.method.tasks import TASK_SOURCES, ChainTasks


@TASK_SOURCES.register("toy_chains")
class ToyChains(ChainTasks):
    def metrics(self, tasks):
        return {"toy_tasks": len(tasks)}


@SOLVER_REWARDS.register("toy_half")
def toy_half(x):
    return 0.5 * float(x.r_ans)


METHODS.add("toy", MethodSpec("toy", "toy_chains", "toy_half", "coevokg_difficulty", False, "Toy"))
'''


@pytest.fixture
def toy_peer(tmp_path, monkeypatch):
    """The toy peer's folder on the path, imported (what its one line in ``workbench/peers/__init__.py``
    does for a shipped peer); its registrations removed afterwards."""
    (tmp_path / "toypeer").mkdir()
    (tmp_path / "toypeer" / "__init__.py").write_text(textwrap.dedent(TOY))
    monkeypatch.syspath_prepend(str(tmp_path))
    registry.load_plugins()  # the shipped peers first: only the toy's names are removed afterwards
    before = {r: set(r._items) for r in (TASK_SOURCES, SOLVER_REWARDS, METHODS)}
    yield importlib.import_module("toypeer")
    for r, names in before.items():
        for name in set(r._items) - names:
            del r._items[name]
    sys.modules.pop("toypeer", None)


def test_a_toy_peer_trains_through_the_registries_alone(toy_peer, tmp_path, monkeypatch):
    from workbench.method.train import train

    monkeypatch.setenv("WORKBENCH_RUNS", str(tmp_path / "runs"))
    rows = train(str(tmp_path / "s.duckdb"), run="toy-1", method="toy", preset="smoke", steps=1, progress=False,
                 log=None)
    from workbench.config import preset

    assert rows[0]["toy_tasks"] == preset("smoke").method.chains_per_round  # the toy source's own key
    assert rows[0]["solver_reward"] == pytest.approx(0.5 * rows[0]["r_ans"])  # the toy reward, not Eq. 7


def test_the_shipped_peers_register_every_part_they_name():
    """Each shipped row's task source, rewards, chain selection, proposer algorithm and warm start
    resolve through the registries (loading ``workbench.peers``), so no core module names a peer."""
    for spec in METHODS.values():
        TASK_SOURCES[spec.task_source]
        SOLVER_REWARDS[spec.solver_reward]
        if spec.proposer_reward:
            PROPOSER_REWARDS[spec.proposer_reward]
        CHAIN_SELECTIONS[spec.chain_selection]
        PROPOSER_ADVANTAGES[spec.proposer_algorithm]
        if spec.warmstart_demos:
            WARMSTART_DEMOS[spec.warmstart_demos]
    assert {"kg_topology", "seed_document"} <= set(TASK_SOURCES) and "drfree_anchor" in RUN_EXTENSIONS
    assert {m.split("_")[0] for m in METHODS} >= {"eog", "drfree", "dynasearcher"}


def test_an_unknown_name_names_every_choice_the_peers_included():
    with pytest.raises(ValueError, match=r"unknown task source 'nope'; expected one of \[.*'kg_topology'"):
        TASK_SOURCES["nope"]


def test_the_method_rows_load_without_the_rounds_code():
    """Listing the methods (the CLI's ``--method`` choices) loads the peers' rows, not their parts:
    no torch, no task source registered yet."""
    import subprocess

    code = ("import sys; from workbench.method.methods import METHODS; print('eog' in METHODS, 'torch' in sys.modules); "
            "from workbench.method import tasks; print('kg_topology' in tasks.TASK_SOURCES._items)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["True", "False", "False"]
