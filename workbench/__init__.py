"""CoEvoKG workbench: co-evolving knowledge graphs with self-evolving search agents.

The package is the method; notebooks and the ``workbench`` command are thin faces over it.
See README.md for the map and ../shared/design/ARCHITECTURE.md for the intended shape.
"""

import os

# bm25s uses JAX for top-k when JAX is installed, and JAX reserves 75% of every GPU's memory on
# first use, leaving torch (the policy, the update) out of memory on a machine with both; measured
# on an H200, 2026-11-30. Keep JAX's allocation on demand unless the user says otherwise.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

__version__ = "0.1.0"
