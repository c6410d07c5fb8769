"""The paper tier's judge prompts in one place: the LLM verifier (Eq. 6) and the LLM path
extractor (Eq. 8). The wording is ours (the paper's prompts are in its unavailable appendix); the
solver's and proposer's prompts live with their protocol (``workbench.policy.protocol``).

Example:
    >>> "JSON object per line" in VERIFIER_PROMPT, "one per line" in EXTRACTOR_PROMPT
    (True, True)
"""

VERIFIER_PROMPT = (
    "You check generated multi-hop questions against the chain of linked articles they were "
    "written from. For each candidate, score four properties from 0 to 1: faithfulness (the "
    "question and answer follow the chain's relations and passages), multi_hop (answering needs "
    "at least two hops of the chain), answer_focus (the question has exactly one short answer, the "
    "given one), clarity (the question is clear and well formed). Set leak to true if the question "
    "reveals the answer or names a chain entity. Reply with one JSON object per line, one line per "
    'candidate, and nothing else, e.g. {"id": 1, "faithfulness": 0.9, "multi_hop": 1, '
    '"answer_focus": 1, "clarity": 0.8, "leak": false, "reason": "short reason"}\n'
)

EXTRACTOR_PROMPT = (
    "Below is a question, a search agent's trajectory (its reasoning, its searches and the passages "
    "it retrieved) and its final answer. List the chain of entities the trajectory went through to "
    "reach the answer, in order, ending with the answer entity. Use only entities the retrieved "
    "passages mention (the candidates are the retrieved passages' titles), titles copied exactly, "
    "one per line, and nothing else.\n"
)


def extractor_prompt(question: str, trajectory_text: str, candidates: list[str], answer: str,
                     max_chars: int = 6000) -> str:
    """Eq. 8's extraction request for one trajectory; its text is cut to its last ``max_chars``
    characters (ours: the retrieved passages nearest the answer matter most).

    Example:
        >>> p = extractor_prompt("Where?", "<search> A </search>", ["A", "B"], "B")
        >>> p.splitlines()[-3:]
        ['Candidates:', 'A', 'B']
    """
    return (EXTRACTOR_PROMPT + f"Question: {question.strip()}\nTrajectory:\n{trajectory_text[-max_chars:]}\n"
            f"Final answer: {answer}\nCandidates:\n" + "\n".join(candidates))
