"""Train-test overlap of a training source with an evaluation set (seed 002, Table 14).

Table 14 counts, over the evaluation questions, those with a *similar Q-A pair* in the training
source -- "a question Jaccard similarity of at least 0.6 and at least one shared normalized answer
alias" -- and those whose question appears exactly. What the text leaves open is ours: the Jaccard
is over the sets of words of the normalised questions (SQuAD normalisation,
``scoring.normalize_answer``: lower case, punctuation and articles dropped), "exact" means equal
normalised question text, and both are counted per evaluation question (a question matched by
several training pairs counts once).

The training sources here: a run's generated questions (``generated_questions``: admitted and posed
to the solver; the seed-pool questions a run falls back on are the seed pool's, counted as that
source) and a store's seed pool (Search-R1's training set, split ``seed``).

Example:
    >>> jaccard(words("Who directed the film Rutel?"), words("Who directed Rutel?"))
    0.75
    >>> overlap([("Who directed the film Rutel?", ["Ann"])], [("Who directed Rutel?", ["ann", "A."])])
    {'similar_pairs': 1, 'exact_questions': 0, 'eval_questions': 1}
"""

from __future__ import annotations

from collections import defaultdict
from typing import Iterable, Sequence

import pandas as pd

from workbench.scoring import normalize_answer

JACCARD_MIN = 0.6  # Table 14: "a question Jaccard similarity of at least 0.6"


def words(question: str) -> frozenset[str]:
    """The word set of a normalised question.

    Example:
        >>> sorted(words("Where is the Rutel, exactly?"))
        ['exactly', 'is', 'rutel', 'where']
    """
    return frozenset(normalize_answer(question).split())


def jaccard(a: frozenset, b: frozenset) -> float:
    """|a & b| / |a | b| (0 for two empty sets)."""
    union = len(a | b)
    return len(a & b) / union if union else 0.0


def overlap(train: Iterable[tuple[str, Sequence[str]]], evaluation: Iterable[tuple[str, Sequence[str]]],
            jaccard_min: float = JACCARD_MIN) -> dict:
    """Table 14's counts for one training source: ``similar_pairs`` (evaluation questions with a
    training pair at Jaccard >= ``jaccard_min`` sharing a normalised answer alias),
    ``exact_questions`` (evaluation questions equal to a training question, normalised) and
    ``eval_questions``. Training pairs are indexed by answer alias, so only pairs that share an
    alias are compared."""
    by_alias: dict[str, list[frozenset]] = defaultdict(list)
    texts = set()
    for question, answers in train:
        w = words(question)
        texts.add(normalize_answer(question))
        for alias in {normalize_answer(a) for a in answers} - {""}:
            by_alias[alias].append(w)
    similar = exact = n = 0
    for question, answers in evaluation:
        n += 1
        w = words(question)
        exact += normalize_answer(question) in texts
        aliases = {normalize_answer(a) for a in answers} - {""}
        similar += any(jaccard(w, other) >= jaccard_min for a in aliases for other in by_alias.get(a, ()))
    return {"similar_pairs": similar, "exact_questions": exact, "eval_questions": n}


def run_questions(con, run: str) -> list[tuple[str, list[str]]]:
    """A run's generated training questions (admitted, posed to the solver) with their answers."""
    rows = con.execute("""SELECT q.question, q.answers FROM generated_questions g JOIN questions q USING (question_id)
                          WHERE g.run = ? ORDER BY q.question_id""", [run]).fetchall()
    if not rows:
        raise ValueError(f"--run {run!r}: the store holds no generated questions of this run")
    return [(q, list(a)) for q, a in rows]


def split_questions(con, dataset: str, split: str) -> list[tuple[str, list[str]]]:
    """The questions of a dataset's split (``seed``: the seed pool, Search-R1's training set)."""
    rows = con.execute("SELECT question, answers FROM questions WHERE dataset = ? AND split = ? ORDER BY question_id",
                       [dataset, split]).fetchall()
    if not rows:
        raise ValueError(f"--dataset {dataset!r}: the store holds no questions of split {split!r}")
    return [(q, list(a)) for q, a in rows]


def overlap_table(sources: dict[str, list], evaluation: list, jaccard_min: float = JACCARD_MIN) -> pd.DataFrame:
    """Table 14's layout: per training source the counts of :func:`overlap` and their percentages
    of the evaluation questions.

    Example:
        >>> overlap_table({"a": [("Who is Ann?", ["x"])]}, [("Who is Ann?", ["x"]), ("Who?", ["y"])])["exact_pct"].tolist()
        [50.0]
    """
    rows = []
    for name, train in sources.items():
        c = overlap(train, evaluation, jaccard_min)
        rows.append({"training_source": name, "train_questions": len(train), **c,
                     "similar_pct": 100 * c["similar_pairs"] / c["eval_questions"] if c["eval_questions"] else 0.0,
                     "exact_pct": 100 * c["exact_questions"] / c["eval_questions"] if c["eval_questions"] else 0.0})
    return pd.DataFrame(rows)
