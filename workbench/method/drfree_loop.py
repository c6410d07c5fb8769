"""Dr. Free's parts of a run beyond its reward (seed 002): the chains it draws, HRPO's hop labels,
self-evolution iterations and the anchor, and the searching proposer of its "w/o KG" row.

What the seed text gives, and what is ours (README's Dr. Free table repeats this):

* **Chain construction** (Fig. 5, Tables 7 and 10): the Dr. Free rows draw from G_0's chains that
  pass its checks, selected once per run by :func:`workbench.kg.chain_checks.drfree_selection`
  (``method.chain_selection``, ``method.drfree_hop_ratio``); :class:`ChainSelection` samples them.
* **HRPO** (Table 6 names it as the algorithm; the seed does not define it): Dr. Zero's hop-grouped
  relative policy optimisation (Yue et al. 2026, arXiv 2601.07055, section 3.2), the proposer's
  reward standardised within the round's questions of the same hop count
  (``update.hrpo_advantages``); hop labels here: :func:`candidate_hops`.
* **Iterations** (Table 9: Iter 1-3; Table 6: 50 steps, Fig. 4: iteration 2 branches at cumulative
  step 50): the run's rounds are split into ``method.iterations`` blocks (:func:`iteration_ends`);
  at each block's end the run's best checkpoint so far is kept as ``runs/RUN/iterations/iter-K``
  (:func:`save_iteration`), so Table 9's rows are evaluations of those folders, the last equal to
  ``best``. Dr. Zero alternates proposer and solver phases inside an iteration with two models; the
  workbench's proposer and solver share one backbone and both update every round (approximated).
* **Anchor** (Fig. 4, "anchor-update ablation"; the text names no anchor model): ours, the model
  whose teacher-forced likelihoods score the information gain (Eq. 5), ``method.drfree_anchor``:
  ``updated`` -- the base in iteration 1, then the ``iter-K`` checkpoint of the iteration before;
  ``fixed`` -- the base throughout (the frozen KL reference, no second copy); ``live`` -- the
  current policy (the workbench before issue 40).
* **w/o KG** (Table 2: "restores Dr. Zero-style proposer search"): task source ``seed_document``,
  the proposer reads one entity's passage (the seed document), may search (the solver's Search-R1
  protocol, :func:`search_proposer_messages`), then writes; its evidence for Eq. 5 is the seed
  document and the passages it retrieved (:func:`evidence_view`), so a question written without a
  search has the seed document as both E and the source-only shortcut: gain <= 0, reward 0.

Example:
    >>> iteration_ends(20, 3), iteration_of(6, [7, 14, 20]), iteration_of(7, [7, 14, 20])
    ([7, 14, 20], 1, 2)
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from workbench.method.memory import ChainView
from workbench.policy import protocol

ANCHORS = ("updated", "fixed", "live")


@dataclass(frozen=True)
class Settings:
    """A run's resolved Dr. Free settings: the method's (``MethodSpec``) unless ``method.*`` sets them."""

    chain_selection: str
    proposer_algorithm: str
    iterations: int


def settings(spec, m) -> Settings:
    """The method's chain selection, proposer algorithm and iterations (at most ``method.steps``), each
    overridden by its ``method.*`` setting when that is set ('' / 0 = the method's).

    Example:
        >>> from workbench.config import MethodConfig
        >>> from workbench.method.methods import METHODS
        >>> settings(METHODS["drfree"], MethodConfig())
        Settings(chain_selection='drfree', proposer_algorithm='hrpo', iterations=3)
        >>> settings(METHODS["coevokg"], MethodConfig(iterations=2)).iterations
        2
    """
    # the method's own iterations, not more than its rounds (a 1-round smoke run is one iteration)
    out = Settings(m.chain_selection or spec.chain_selection, m.proposer_algorithm or spec.proposer_algorithm,
                   m.iterations or min(spec.iterations, m.steps))
    if out.chain_selection == "drfree" and (spec.task_source != "kg_chains" or spec.write_back):
        raise ValueError(f"method.chain_selection=drfree: method {spec.name!r} does not draw G_0's chains without "
                         "write-back (it needs task source kg_chains and no write-back, as the Dr. Free rows)")
    return out


def iteration_ends(steps: int, iterations: int) -> list[int]:
    """The round count at which each iteration ends: ``steps`` rounds in ``iterations`` nearly equal
    blocks, the longer ones first.

    Example:
        >>> iteration_ends(7, 1), iteration_ends(10, 4)
        ([7], [3, 6, 8, 10])
    """
    if iterations < 1 or iterations > steps:
        raise ValueError(f"method.iterations={iterations}: expected 1 to method.steps={steps} iterations")
    sizes = [len(b) for b in np.array_split(np.arange(steps), iterations)]
    return [int(x) for x in np.cumsum(sizes)]


def iteration_of(t: int, ends: list[int]) -> int:
    """The iteration (1-based) round ``t`` belongs to."""
    return next(k for k, end in enumerate(ends, 1) if t < end) if t < ends[-1] else len(ends)


def iteration_dir(folder: Path, k: int) -> Path:
    """``runs/RUN/iterations/iter-K``: the run's best checkpoint as of iteration K's end."""
    return Path(folder) / "iterations" / f"iter-{k}"


def save_iteration(folder: Path, k: int) -> Path:
    """Keep the run's best checkpoint (``folder/best``) as iteration ``k``'s (hard links where the
    file system allows: ``best`` is replaced by a rename, never written in place), replacing an
    earlier copy of it (a resumed round). Returns the folder."""
    best, dest = Path(folder) / "best", iteration_dir(folder, k)
    if not best.exists():
        raise FileNotFoundError(f"{best}: no best checkpoint to keep as iteration {k}")
    tmp = dest.with_name(f".{dest.name}-tmp")
    for stale in (tmp, dest):
        if stale.exists():
            shutil.rmtree(stale)

    def link(src, dst):
        try:
            os.link(src, dst)
        except OSError:
            shutil.copy2(src, dst)

    shutil.copytree(best, tmp, copy_function=link)
    tmp.rename(dest)
    return dest


def anchor_for(folder: Path, completed: int, ends: list[int]) -> Path | None:
    """The ``updated`` anchor of the round after ``completed`` rounds: the last finished iteration's
    folder, or None in iteration 1 (the base scores).

    Example:
        >>> anchor_for(Path("runs/x"), 6, [7, 14, 20]) is None, anchor_for(Path("runs/x"), 14, [7, 14, 20]).name
        (True, 'iter-2')
    """
    done = [k for k, end in enumerate(ends, 1) if end <= completed and k < len(ends)]
    return iteration_dir(folder, done[-1]) if done else None


class ChainSelection:
    """The G_0 chains of Dr. Free's construction (``chain_checks.drfree_selection``), selected once,
    and a round's draw from them (uniform, distinct, seeded as ``pool.sample_chains``).

    Example:
        >>> # sel = ChainSelection(con, search, topk=3); sel.sample(con, 32, seed=7)
    """

    def __init__(self, con, search, topk: int, ratio: str = "", seed: int = 0):
        from workbench.kg.chain_checks import drfree_selection

        self.result = drfree_selection(con, search, topk, ratio, seed)
        self.ids = np.asarray(self.result["ids"], dtype=np.int64)

    def sample(self, con, k: int, seed: int):
        """``k`` distinct selected chains (``pool.Chain``, G_0's evidence), in draw order."""
        from workbench.kg.pool import load_pool

        if k > len(self.ids):
            r = self.result
            raise ValueError(f"method.chains_per_round={k}: Dr. Free's chain construction kept {len(self.ids)} of G_0's "
                             f"{r['considered']} chains (rejected: {r['rejections']}); build a larger pool (pool.walks), "
                             "lower chains_per_round, or --set method.chain_selection=all")
        picked = np.random.default_rng(seed).choice(self.ids, size=k, replace=False)
        return load_pool(con, None, 0, chain_ids=[int(i) for i in picked])


def candidate_hops(chain, hops: int | None = None) -> int:
    """HRPO's hop label of a candidate: a searched candidate's own (``hops``), else its chain's relational
    hops (at least 1).

    Example:
        >>> candidate_hops(ChainView(0, "h", [1, 2, 3], ["A", "B", "C"], ["r", "s"], ["", "", ""])), candidate_hops(None, 2)
        (2, 2)
    """
    return hops if hops is not None else max(1, len(chain.titles) - 1)


# -- the "w/o KG" row's searching proposer -----------------------------------------------------

SEARCH_PROPOSER_INSTRUCTION = (
    "Write one question from this source document. You may look up linked articles first: write "
    "<search> query </search>; the results come back inside <information> </information>. The question must "
    "need what you found beyond the source, must not name the answer, and must have one short answer. "
    "Write <question> ... </question> <answer> ... </answer>.\n"
)  # ours: Dr. Zero's proposer prompt is not in the seed text


def search_proposer_messages(docs: list[ChainView]) -> list[str]:
    """The user turn of the searching proposer per seed document: the instruction, then the document
    in the chain prompt's layout (one node, so the tiny warm start reads a format it knows).

    Example:
        >>> search_proposer_messages([ChainView(-1, "", [1], ["Ann"], [], ["Ann was born in Rome."])])[0].splitlines()[-1]
        '[1] Ann: Ann was born in Rome.'
    """
    return [SEARCH_PROPOSER_INSTRUCTION + "Source document:\n" + protocol.render_chain(d.titles, [], d.passages) + "\n"
            for d in docs]


def searched_hops(trajectory) -> int:
    """The hop label of a searched question: the searches its proposer made, at least 1 (ours: Dr.
    Zero's proposer states its label; ours is counted).

    Example:
        >>> from workbench.policy.rollout import Trajectory
        >>> searched_hops(Trajectory(0, 0, "", [], queries=["a", "b"])), searched_hops(Trajectory(0, 0, "", []))
        (2, 1)
    """
    return max(1, len(trajectory.queries))


def evidence_view(doc: ChainView, trajectory, passages: dict[int, tuple[int, str]], titles: dict[int, str]) -> ChainView:
    """Eq. 5's evidence E of a searched candidate: the seed document, then each distinct passage its
    proposer retrieved (``passages``: passage id -> (entity id, text)), in retrieval order; the
    relations are unknown (''), the chain id -1 (not a G_0 chain).

    Example:
        >>> from workbench.policy.rollout import Trajectory
        >>> doc = ChainView(-1, "", [1], ["Ann"], [], ["Ann was born in Rome."])
        >>> t = Trajectory(0, 0, "", [], passage_ids=[7, 7, 8])
        >>> evidence_view(doc, t, {7: (2, "Rome is old."), 8: (3, "Old.")}, {2: "Rome", 3: "Olm"}).titles
        ['Ann', 'Rome', 'Olm']
    """
    ids, texts, seen = list(doc.entity_ids), list(doc.passages), set()
    names = list(doc.titles)
    for pid in trajectory.passage_ids:
        if pid in seen or pid not in passages:
            continue
        seen.add(pid)
        entity, text = passages[pid]
        ids.append(entity)
        names.append(titles.get(entity, ""))
        texts.append(text)
    return ChainView(-1, "", ids, names, [""] * (len(ids) - 1), texts)
