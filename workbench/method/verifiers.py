"""The quality gate's verifiers by name (``method.verifier``; Eq. 6's Verify): the structural one
(deterministic, the tiny tier), the LLM one (the policy judges a task's candidates in one grouped
call), and SSP's open gate (no chain to check against). A task source names its default
(``tasks.TaskSource.verifier``); EoG's queries bring their own.

Example:
    >>> type(make_verifier("open", None)).__name__
    'OpenGate'
"""

from __future__ import annotations

from workbench.method.gate import DIMENSIONS, StructuralVerifier, Verdict
from workbench.method.llm_judges import BatchedLLMVerifier


class OpenGate:
    """SSP's verifier: no chain to check against, so every candidate that passes the
    deterministic filter (extraction, leakage, one wh-question) scores 1 on every gate dimension.

    Example:
        >>> OpenGate().judge(None, [("Who?", "Ann")])[0].scores == {d: 1.0 for d in DIMENSIONS}
        True
    """

    def judge(self, chain, candidates):
        return [Verdict(i, q, a, True, scores={d: 1.0 for d in DIMENSIONS}) for i, (q, a) in enumerate(candidates)]


def make_verifier(name: str, policy, max_new_tokens: int = 256, vocabulary: str = "exact", con=None):
    """The quality gate's verifier by name (``method.verifier``): 'structural' (deterministic, the
    tiny tier; its word matching ``vocabulary``, ``method.verifier_vocabulary``, the entities' types
    read from the store ``con`` for 'forms_types'), 'open' (SSP: no chain to check) or 'llm' (the
    policy itself judges, greedily, with ``gate.LLMVerifier``'s grouped prompt, a round's chains in
    one batch: ``llm_judges``; EoG's queries keep their own, ``peers.eog``).

    Example:
        >>> type(make_verifier("open", None)).__name__
        'OpenGate'
    """
    if name == "structural":  # 'forms_types' reads the entities' types from the store ``con``
        types = (dict(con.execute("SELECT entity_id, type FROM entities WHERE type IS NOT NULL").fetchall())
                 if vocabulary == "forms_types" else None)
        return StructuralVerifier(vocabulary=vocabulary, types=types)
    if name == "open":  # the vocabulary is the structural verifier's: these two match no words
        return OpenGate()
    if name == "llm":
        return BatchedLLMVerifier(policy, max_new_tokens)
    raise ValueError(f"method.verifier: unknown verifier {name!r}; expected one of ['llm', 'open', 'structural']")
