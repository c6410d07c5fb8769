"""Retrieval recall on questions that name the pages their answers come from (issue 45's
hand-written real-text questions, ``data/wiki_questions/questions.jsonl``).

Our definitions. A hit is a *gold passage* when its page title is one of the question's ``titles``
and its text contains one of the question's answers, both normalised as EM normalises them
(``scoring.normalize_answer``), on word boundaries. ``recall@k`` is the share of questions with a
gold passage among the top k hits; ``page_recall@k`` the looser share with any passage of a named
page among them. ``rank`` is each question's first gold rank (None: not in the top max(ks)).

Example:
    >>> from workbench import store
    >>> from workbench.search.tool import SearchTool
    >>> con = store.connect(":memory:")
    >>> _ = con.execute("INSERT INTO entities VALUES (1, 'Oslo', 'city', 'entity', 't'), (2, 'Lima', 'city', 'entity', 't')")
    >>> _ = con.execute("INSERT INTO passages VALUES (1, 1, 0, 'Oslo is the capital of Norway.'), (2, 2, 0, 'Lima is in Peru.')")
    >>> qs = [{"question": "What is Norway's capital?", "golden_answers": ["Oslo"], "titles": ["Oslo"]}]
    >>> recall_at(SearchTool(con), qs, ks=(1,))["recall@1"]
    1.0
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from workbench.scoring import normalize_answer

KS = (1, 3, 10)


def read_questions(path: str | Path) -> list[dict]:
    """The questions file: JSON lines with a non-empty ``question``, ``golden_answers`` and ``titles``;
    a line without them is a ValueError naming the file, the line and the field.

    Example:
        >>> import os, tempfile
        >>> f = os.path.join(tempfile.mkdtemp(), "q.jsonl")
        >>> _ = open(f, "w").write('{"question": "Why?", "golden_answers": ["So."]}\\n')
        >>> read_questions(f)
        Traceback (most recent call last):
        ...
        ValueError: ...q.jsonl line 1: expected field 'titles' (a non-empty list of page titles)
    """
    rows = []
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except ValueError as err:
                raise ValueError(f"{path} line {lineno}: not valid JSON ({err})") from None
            for field, what in (("question", "a non-empty string"), ("golden_answers", "a non-empty list of answers"),
                                ("titles", "a non-empty list of page titles")):
                value = row.get(field) if isinstance(row, dict) else None
                ok = isinstance(value, str) if field == "question" else \
                    isinstance(value, list) and all(isinstance(v, str) and v.strip() for v in value)
                if not ok or not value:
                    raise ValueError(f"{path} line {lineno}: expected field {field!r} ({what})")
            rows.append(row)
    if not rows:
        raise ValueError(f"{path}: no question (an empty file)")
    return rows


def is_gold(hit, answers: list[str], titles: list[str]) -> bool:
    """Whether ``hit`` (a ``search.tool.Hit``) is a gold passage of the question (module docstring).

    Example:
        >>> from workbench.search.tool import Hit
        >>> is_gold(Hit(1, 1, "Oslo", "Oslo, Norway's capital.", 1.0), ["oslo"], ["Oslo"])
        True
        >>> is_gold(Hit(1, 1, "Oslo", "Norway's capital.", 1.0), ["oslo"], ["Oslo"])
        False
    """
    if hit.title not in titles:
        return False
    text = normalize_answer(hit.text)
    return any(a and re.search(r"(?<!\w)" + re.escape(a) + r"(?!\w)", text) for a in map(normalize_answer, answers))


def recall_at(tool, questions: list[dict], ks=KS) -> dict:
    """``recall@k`` and ``page_recall@k`` for each k, and each question's first gold ``ranks``, from
    one batched search of the top max(ks) (``tool``: any ``search.tool.Retriever``)."""
    depth = max(ks)
    results = tool.search([q["question"] for q in questions], k=depth)
    ranks, page_ranks = [], []
    for q, hits in zip(questions, results):
        gold = [i for i, h in enumerate(hits, start=1) if is_gold(h, q["golden_answers"], q["titles"])]
        page = [i for i, h in enumerate(hits, start=1) if h.title in q["titles"]]
        ranks.append(gold[0] if gold else None)
        page_ranks.append(page[0] if page else None)
    n = len(questions)
    out = {}
    for k in ks:
        out[f"recall@{k}"] = sum(r is not None and r <= k for r in ranks) / n
    for k in ks:
        out[f"page_recall@{k}"] = sum(r is not None and r <= k for r in page_ranks) / n
    out["questions"] = n
    out["ranks"] = ranks
    return out
