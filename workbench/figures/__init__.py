"""The paper's tables and figures, from its reported numbers, the workbench's reference runs and a
user's runs, side by side.

One builder per paper table or figure (seed 000): ``table1`` (main results), ``table2`` (build-up
ablation with deltas and sign-test p-values), ``figure3`` (training dynamics: a validation
accuracy, b chain pool growth and seed fallback rate, c KL and entropy) and ``figure4`` (average
hops and p_s, generated vs seed questions); and ``gate_rejections`` (ours: the quality gate's
verdicts by reason per round) and ``answer_types`` (ours: the answer types of generated vs seed
questions); ``topology_curriculum`` is EoG's Fig. 7 (seed 004: synthesis success
per topology per round). Each reads the paper side from ``workbench.paper``, the "this run"
side from the store, read-only (``runs``, ``run_metrics``: one JSON object per round,
``eval_outcomes``), and, given ``ref`` (``workbench.reference.load()``), the shipped reference runs
as a third source, named by ``Reference.label`` ("reference (tiny, 6 seeds, 56 rounds)"): their
mean over seeds with the seeds' range as a band (figures) or a 95% t interval (tables). Every
figure names the preset, seed and config hash of each run it shows and the reference's provenance.
With no runs in the store, a builder shows the paper side (and the reference) alone and says so.

Store conventions read here (written by the training loop and ``workbench eval``):
- a Table 1 / Table 2 row of "this run" is an evaluated ``backbone/method`` (the label part of
  ``workbench.evaluate``'s eval id, ``"<backbone>/<method>/<dataset>/<split>#<n>"``); the base is the
  row whose method is ``base`` (gains are shown against it when there is exactly one);
- a benchmark column is the eval dataset, split by question family where the questions have one
  (``tinyworld:bridge``); for each (label, dataset) only the latest test evaluation counts;
- Table 2's rows are the runs whose ``runs.method`` appears in ``BUILDUP`` (latest run per method).

One module per paper, over shared helpers (``base``): ``coevokg`` (seed 000), ``eog`` (seed 004),
``drfree`` (seed 002), ``dynasearcher`` (seed 003); ``build`` draws them all. This package hands
every public name on, so ``figures.table1`` and the rest read as before.

Example:
    >>> from workbench import figures
    >>> paths = figures.build_all(paper_only=True, out_dir=tmp)  # doctest: +SKIP
"""

from workbench.figures.base import *  # noqa: F401,F403
from workbench.figures.coevokg import *  # noqa: F401,F403
from workbench.figures.eog import *  # noqa: F401,F403
from workbench.figures.drfree import *  # noqa: F401,F403
from workbench.figures.dynasearcher import *  # noqa: F401,F403
from workbench.figures.build import *  # noqa: F401,F403
