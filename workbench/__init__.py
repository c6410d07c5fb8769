"""CoEvoKG workbench: co-evolving knowledge graphs with self-evolving search agents.

The package is the method; notebooks and the ``workbench`` command are thin faces over it.
See README.md for the map and ../shared/design/ARCHITECTURE.md for the intended shape.
"""

__version__ = "0.1.0"
