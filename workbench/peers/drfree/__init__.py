"""Dr. Free (seed 002) as a peer of the round: its information-gain proposer rewards
(:mod:`.rewards`, Eq. 5 in :mod:`.info_gain`), its chain construction, "w/o KG" task source and
likelihood anchor (:mod:`.tasks`, :mod:`.construction`), its proposer algorithm HRPO (:mod:`.hrpo`)
and its Table 2 rows, registered with the core (``workbench.peers.load``); its Table 5 audit is
:mod:`.shortcut_audit` (``workbench audit shortcuts``).

The rows: questions from the chains of its own construction (whitelist, unique grounding,
retrieval check, hop ratio) through the same gate, the solver on the outcome reward (answer EM),
the proposer by HRPO, three self-evolution iterations, no write-back. Table 3's
leave-one-shortcut-out rows are ``--set method.proposer_reward=dr_free_wo_<type>`` on ``drfree``.
"w/o KG" restores Dr. Zero-style proposer search: a seed document, the proposer searching before it
writes (task source ``seed_document``), the same information-gain reward over the passages it found.

Example:
    >>> from workbench.method.methods import METHODS
    >>> METHODS["drfree"].proposer_algorithm, METHODS["drfree"].iterations
    ('hrpo', 3)
"""

from workbench.method.methods import METHODS, MethodSpec

PARTS = ("hrpo", "rewards", "tasks")  # each registers with the core on import (workbench.peers.load)

for _spec in (
    *(MethodSpec(name, "kg_chains", "exact_match", reward, False, label, chain_selection="drfree",
                 proposer_algorithm="hrpo", iterations=3)
      for name, reward, label in (("drfree", "dr_free", "Dr. Free"),
                                  ("drfree_difficulty", "dr_zero", "Dr. Free: difficulty only"),
                                  ("drfree_ig_difficulty", "dr_free_plus_dr_zero", "Dr. Free: IG + difficulty"),
                                  ("drfree_no_proposer_training", None, "Dr. Free: w/o proposer training"))),
    MethodSpec("drfree_wo_kg", "seed_document", "exact_match", "dr_free", False, "Dr. Free: w/o KG",
               proposer_algorithm="hrpo", iterations=3),
):
    METHODS.add(_spec.name, _spec)
