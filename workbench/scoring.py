"""Answer scoring as Search-R1 and the paper report it (seed 000, section 4.1: "exact match
accuracy after normalization"): the SQuAD normalisation, EM, cover EM and token F1, and the
extraction of the final ``<answer>`` from a model's generated text.

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
