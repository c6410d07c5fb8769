"""EoG (seed 004) as a peer of the round: its task source (``kg_topology``, :mod:`.tasks`: queries of
its Table 6 executed on the KG, :mod:`.queries`), its rewards (:mod:`.rewards`: set F1 / Hit@1 for
the solver, score variance for the proposer), its warm start (:mod:`.warmstart`: query
demonstrations) and its Table 3 rows, registered with the core (``workbench.peers.load``).

Every EoG row starts from the topology warm start and gives the solver EoG's graph tools
(``search/graph_tools.py``), so an ablation differs from EoG only in what it ablates.

Example:
    >>> from workbench.method.methods import METHODS
    >>> [n for n in METHODS if n.startswith("eog")][:2]
    ['eog', 'eog_wo_solver_update']
"""

from workbench.method.methods import METHODS, MethodSpec

PARTS = ("rewards", "tasks", "warmstart")  # each registers with the core on import (workbench.peers.load)

for _spec in (
    MethodSpec("eog", "kg_topology", "eog_f1", "eog_variance", False, "EoG", warmstart_demos="topology",
               graph_tools=True),
    MethodSpec("eog_wo_solver_update", "kg_topology", "eog_f1", "eog_variance", False, "EoG w/o Solver update",
               update_solver=False, warmstart_demos="topology", graph_tools=True),
    MethodSpec("eog_wo_proposer_update", "kg_topology", "eog_f1", "eog_variance", False,
               "EoG w/o Proposer update", update_proposer=False, warmstart_demos="topology", graph_tools=True),
    MethodSpec("eog_random_walk", "kg_chains", "eog_f1", "eog_variance", False, "EoG w/o query exec. (Random Walk)",
               warmstart_demos="topology", graph_tools=True),
    MethodSpec("eog_adversarial", "kg_topology", "eog_f1", "ssp_adversarial", False, "EoG adversarial reward",
               warmstart_demos="topology", graph_tools=True),
):
    METHODS.add(_spec.name, _spec)
