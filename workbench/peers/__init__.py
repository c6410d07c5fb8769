"""Peer methods of the CoEvoKG round, one folder each: EoG (seed 004), Dr. Free (seed 002),
DynaSearcher (seed 003). Each folder's ``__init__`` adds its method rows (light: no torch, so the
CLI lists them cheaply) and names its ``PARTS``, the modules that register its task source,
rewards, warm start and round extensions with the core's registries when imported. The core never
imports a peer: a registry calls :func:`load` the first time it is asked for a name it does not
hold (``registry.load_plugins``).

Adding a peer: a folder here and its name in :data:`PEERS` (``peers/README.md``).

Example:
    >>> from workbench.method.methods import METHODS
    >>> {"eog", "drfree", "dynasearcher"} <= set(METHODS)
    True
"""

import importlib

PEERS = ("eog", "drfree", "dynasearcher")  # their rows follow the core's in this order


def load(parts: bool = True) -> None:
    """Import every peer (its rows); with ``parts``, every module it lists in ``PARTS`` too."""
    for name in PEERS:
        peer = importlib.import_module(f"{__name__}.{name}")
        for part in peer.PARTS if parts else ():
            importlib.import_module(f"{peer.__name__}.{part}")
