"""DynaSearcher (seed 003) as a peer of the round: its multi-term solver reward (:mod:`.rewards`,
the terms in :mod:`.multireward`) and its rows, registered with the core (``workbench.peers.load``). Its KG tool is
the solver's (``search/kg_search.py``, offered where ``MethodSpec.kg_tool``).

DynaSearcher trains on a fixed QA set, as Search-R1: the seed pool here. Its two ablations (the
paper's "w/o KG" and "w/o MR" rows): no KG tool; r_acc alone as the reward.

Example:
    >>> from workbench.method.methods import METHODS
    >>> METHODS["dynasearcher"].kg_tool, METHODS["dynasearcher_wo_kg"].kg_tool
    (True, False)
"""

from workbench.method.methods import METHODS, MethodSpec

PARTS = ("rewards",)  # registers with the core on import (workbench.peers.load)

for _spec in (
    MethodSpec("dynasearcher", "seed_pool", "dynasearcher", None, False, "DynaSearcher", kg_tool=True),
    MethodSpec("dynasearcher_wo_kg", "seed_pool", "dynasearcher", None, False, "DynaSearcher w/o KG"),
    MethodSpec("dynasearcher_wo_mr", "seed_pool", "dynasearcher_acc", None, False, "DynaSearcher w/o MR",
               kg_tool=True),
):
    METHODS.add(_spec.name, _spec)
