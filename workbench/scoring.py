"""Answer scoring as Search-R1 and the paper report it (seed 000, section 4.1: "exact match
accuracy after normalization"): the SQuAD normalisation, EM, cover EM and token F1, and the
extraction of the final ``<answer>`` from a model's generated text; Hit@1 and set F1 over complete
answer sets (seed 004, EoG's metrics: :func:`hit_at_1`, :func:`set_f1`).

Normalisation is SQuAD's exactly (as Search-R1's ``qa_em.py``), so numbers stay comparable:
only ASCII punctuation (``string.punctuation``) is removed; other characters, accents and
typographic quotes included, are kept, and case is folded with ``str.lower``.

Example:
    >>> normalize_answer("The  Eiffel Tower!")
    'eiffel tower'
    >>> exact_match("the eiffel tower", ["Eiffel Tower", "La tour Eiffel"])
    1.0
    >>> extract_answer("<think>Paris?</think> <answer> Paris </answer>")
    'Paris'
"""

from __future__ import annotations

import re
import string
from collections import Counter
from typing import Mapping, Sequence

import numpy as np

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = set(string.punctuation)
# The innermost complete block: its content may not contain another opening tag.
_ANSWER = re.compile(r"<answer>((?:(?!<answer>).)*?)</answer>", re.DOTALL)


def normalize_answer(s: str) -> str:
    """Lowercase, drop ASCII punctuation, remove the articles a/an/the, collapse whitespace.

    Example:
        >>> normalize_answer("An Apple, a day.")
        'apple day'
        >>> normalize_answer("Zürich’s ÉCOLE")
        'zürich’s école'
    """
    s = "".join(ch for ch in s.lower() if ch not in _PUNCT)
    return " ".join(_ARTICLES.sub(" ", s).split())


def _golds(golds: str | list[str]) -> list[str]:
    """Normalised golds; a gold that normalises to nothing ("The", "") can never be matched."""
    if isinstance(golds, str):
        golds = [golds]
    if golds is None or not all(isinstance(g, str) for g in golds):
        raise ValueError(f"golds must be a string or a list of strings, got {golds!r}")
    normed = [n for n in (normalize_answer(g) for g in golds) if n]
    if not normed:
        raise ValueError(f"no usable gold answer in {golds!r} (empty, or nothing left after normalisation)")
    return normed


def exact_match(prediction: str | None, golds: str | list[str]) -> float:
    """1.0 when the normalised prediction equals a normalised gold, else 0.0 (None scores 0).

    Raises ValueError when ``golds`` holds no usable answer (empty list, only "" or "the").

    Example:
        >>> exact_match("The Beatles", ["beatles"]), exact_match("Beatles band", ["beatles"]), exact_match(None, "x")
        (1.0, 0.0, 0.0)
    """
    golds = _golds(golds)
    if prediction is None:
        return 0.0
    return float(normalize_answer(prediction) in golds)


def cover_exact_match(prediction: str | None, golds: str | list[str]) -> float:
    """1.0 when a normalised gold is a substring of the normalised prediction (Search-R1's
    ``subem_check``). A character substring, as there: gold "1" covers prediction "1990".

    Example:
        >>> cover_exact_match("It was the Beatles, I think", ["The Beatles"])
        1.0
        >>> cover_exact_match("Paris", ["Paris, France"])
        0.0
    """
    golds = _golds(golds)
    if prediction is None:
        return 0.0
    pred = normalize_answer(prediction)
    return float(any(g in pred for g in golds))


def f1_score(prediction: str | None, golds: str | list[str]) -> float:
    """SQuAD token F1 of the normalised prediction against each gold; the best one.

    Example:
        >>> f1_score("Eiffel Tower Paris", ["the Eiffel Tower"])
        0.8
        >>> f1_score("", ["Paris"])
        0.0
    """
    golds = _golds(golds)
    if prediction is None:
        return 0.0
    pred = normalize_answer(prediction).split()
    best = 0.0
    for gold in golds:
        common = sum((Counter(pred) & Counter(gold.split())).values())
        if common:
            precision, recall = common / len(pred), common / len(gold.split())
            best = max(best, 2 * precision * recall / (precision + recall))
    return best


def hit_at_1(predictions: str | Sequence[str] | None, answer_set: Sequence[str]) -> float:
    """Hit@1 over an answer set (seed 004, Tables 2-3): 1.0 when the top prediction (a single
    answer string, or the first of a ranked list) equals, after :func:`normalize_answer`, any member
    of the complete answer set; else 0.0. None or an empty list scores 0.

    Each member of ``answer_set`` is one acceptable answer (an entity's title; aliases may be
    listed as members too: any match counts).

    Example:
        >>> hit_at_1("Rome", ["Paris", "rome"]), hit_at_1(["Oslo", "Rome"], ["Rome"]), hit_at_1(None, ["Rome"])
        (1.0, 0.0, 0.0)
    """
    golds = _golds(list(answer_set))
    if isinstance(predictions, str):
        predictions = [predictions]
    if not predictions:
        return 0.0
    return float(normalize_answer(predictions[0]) in golds)


def set_f1(predictions: str | Sequence[str] | None, answer_set: Sequence[str]) -> float:
    """Set F1 over answer sets (seed 004's F1, the KGQA convention): with P the set of distinct
    normalised predictions and A the set of distinct normalised answers, precision |P & A| / |P|,
    recall |P & A| / |A|, F1 their harmonic mean (0 when they share nothing).

    A single answer string is the set {answer}: a hit then scores 2 / (1 + |A|) (precision 1,
    recall 1/|A|), so F1 = Hit@1 only when the answer set has one member. Predictions normalising
    to nothing are dropped. Unlike :func:`f1_score` (SQuAD token F1 of one string) it counts
    entities, not words.

    Example:
        >>> set_f1("Rome", ["Rome", "Paris", "Oslo"])   # 2 * 1 * 1/3 / (1 + 1/3)
        0.5
        >>> set_f1(["Rome", "Paris", "Bern"], ["Rome", "Paris"])   # P 2/3, R 1
        0.8
        >>> set_f1(["Bern"], ["Rome"]), set_f1(None, ["Rome"])
        (0.0, 0.0)
    """
    golds = set(_golds(list(answer_set)))
    if isinstance(predictions, str):
        predictions = [predictions]
    pred = {n for n in (normalize_answer(p) for p in (predictions or []) if p is not None) if n}
    common = len(pred & golds)
    if not common:
        return 0.0
    precision, recall = common / len(pred), common / len(golds)
    return 2 * precision * recall / (precision + recall)


ANSWER_SEPARATOR = ";"  # ours: between the answers of one answer set (EoG's solver, protocol.SOLVER_INSTRUCTION_GRAPH)


def answer_list(answer: str | None) -> list[str]:
    """An answer-set solver's ``<answer>`` as its ranked list: the ``;``-separated parts, stripped,
    empty ones dropped, in the order written (Hit@1 reads the first). None gives [].

    Example:
        >>> answer_list(" Rome; Oslo ;; "), answer_list("Rome"), answer_list(None)
        (['Rome', 'Oslo'], ['Rome'], [])
    """
    return [a.strip() for a in (answer or "").split(ANSWER_SEPARATOR) if a.strip()]


def extract_answer(generated_text: str | None) -> str | None:
    """The content of the LAST complete ``<answer>...</answer>`` block, stripped; None if none.

    Pass only the text the model generated, never the prompt: the instruction prompt shows an
    example ``<answer>`` that must not be scored (Search-R1, which scores prompt + response,
    skips the first block instead). An unclosed ``<answer>`` (generation cut by a length limit)
    is not an answer, so generation backends must keep the ``</answer>`` stop string in the text.

    Example:
        >>> extract_answer("<answer>Oslo</answer> wait <answer> Bergen </answer>")
        'Bergen'
        >>> extract_answer("<answer>Oslo</answer> <answer>Berg") , extract_answer("no tags"), extract_answer(None)
        ('Oslo', None, None)
    """
    if generated_text is None:
        return None
    blocks = _ANSWER.findall(generated_text)
    return blocks[-1].strip() if blocks else None


# ---------------------------------------------------------------- intervals

N_BOOT = 1000  # ours: bootstrap resamples


def bootstrap_ci(values: Sequence[float], n_boot: int = N_BOOT, seed: int = 0,
                 alpha: float = 0.05) -> tuple[float, float, float]:
    """(mean, low, high): the mean of ``values`` and its percentile bootstrap interval.

    Deterministic by ``seed``. An empty input raises ValueError.

    Example:
        >>> bootstrap_ci([1.0, 1.0, 1.0])
        (1.0, 1.0, 1.0)
    """
    return macro_bootstrap_ci({"all": values}, n_boot=n_boot, seed=seed, alpha=alpha)


def macro_bootstrap_ci(groups: Mapping[str, Sequence[float]], n_boot: int = N_BOOT, seed: int = 0,
                       alpha: float = 0.05) -> tuple[float, float, float]:
    """(macro mean, low, high): the mean over groups of each group's mean, with a stratified
    percentile bootstrap (each group resampled with replacement on its own, as the macro
    average of Table 1 weighs every benchmark equally whatever its size).

    Example:
        >>> macro_bootstrap_ci({"a": [1, 1], "b": [0, 0]})
        (0.5, 0.5, 0.5)
    """
    arrays = {k: np.asarray(v, dtype=float) for k, v in groups.items()}
    empty = [k for k, v in arrays.items() if v.size == 0]
    if not arrays or empty:
        raise ValueError(f"bootstrap needs at least one value per group; empty: {empty or 'no groups'}")
    rng = np.random.default_rng(seed)
    means = np.zeros(n_boot)
    for values in arrays.values():
        idx = rng.integers(0, values.size, size=(n_boot, values.size))
        means += values[idx].mean(axis=1)
    means /= len(arrays)
    point = float(np.mean([v.mean() for v in arrays.values()]))
    low, high = np.quantile(means, [alpha / 2, 1 - alpha / 2])
    return point, float(min(low, point)), float(max(high, point))


def summarize(df, by: str = "family", metric: str = "em", n_boot: int = N_BOOT, seed: int = 0):
    """Per-group mean of ``metric`` with bootstrap 95% intervals, plus a 'macro' row (the
    unweighted mean over groups, stratified bootstrap). Columns: group, n, mean, low, high.

    Example:
        >>> import pandas as pd
        >>> s = summarize(pd.DataFrame({"family": ["a", "a", "b"], "em": [1.0, 0.0, 1.0]}))
        >>> s.set_index("group").loc["macro", "mean"]
        np.float64(0.75)
    """
    import pandas as pd

    groups = {str(k): g[metric].to_numpy(float) for k, g in df.groupby(by, sort=True)}
    rows = [{"group": k, "n": len(v), **dict(zip(("mean", "low", "high"),
                                                  bootstrap_ci(v, n_boot=n_boot, seed=seed)))}
            for k, v in groups.items()]
    mean, low, high = macro_bootstrap_ci(groups, n_boot=n_boot, seed=seed)
    rows.append({"group": "macro", "n": int(sum(len(v) for v in groups.values())),
                 "mean": mean, "low": low, "high": high})
    return pd.DataFrame(rows)
