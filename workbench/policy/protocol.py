"""The text protocol both roles speak: prompts, tags and their parsers.

The solver follows the Search-R1 protocol used by the paper's lineage (seed 000, section 3.3):
it reasons in ``<think>``, asks the search tool with ``<search> query </search>``, receives
``<information> ... </information>`` (inserted by the environment, never generated), and ends
with ``<answer> ... </answer>``. The proposer (Eq. 2) reads a chain and writes one candidate
``<question> ... </question> <answer> ... </answer>``. The instruction wording is ours.

Warm-start demonstrations (policy/warmstart.py) and rollouts (policy/rollout.py) both build
their text here, so the two can never drift apart.

Example:
    >>> parse_action("<think>find X</think><search> Kavimo Rutel </search>")
    Action(kind='search', text='Kavimo Rutel')
    >>> parse_action("<answer> Dagiju </answer>")
    Action(kind='answer', text='Dagiju')
    >>> parse_candidate("<question>Who directed it?</question><answer>Rutel</answer>")
    ('Who directed it?', 'Rutel')
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

SEARCH_OPEN, SEARCH_CLOSE = "<search>", "</search>"
ANSWER_OPEN, ANSWER_CLOSE = "<answer>", "</answer>"
INFO_OPEN, INFO_CLOSE = "<information>", "</information>"
THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
QUESTION_OPEN, QUESTION_CLOSE = "<question>", "</question>"

# Generation of one solver turn stops at the first of these (the action is complete).
STOP_STRINGS = (SEARCH_CLOSE, ANSWER_CLOSE)
# DynaSearcher's KG tool (seed 003): offered only to methods that enable it, so every other
# method's prompt, stop strings and parsing stay exactly as above.
KG_SEARCH_OPEN, KG_SEARCH_CLOSE = "<kg_search>", "</kg_search>"
KG_TAGS = (KG_SEARCH_OPEN, KG_SEARCH_CLOSE)
KG_STOP_STRINGS = STOP_STRINGS + (KG_SEARCH_CLOSE,)
# EoG's graph tools (seed 004; search/graph_tools.py): offered instead of document search to the
# methods that enable them (the EoG rows), whose answers are ';'-separated sets.
RELATIONS_OPEN, RELATIONS_CLOSE = "<relations>", "</relations>"
NEIGHBORS_OPEN, NEIGHBORS_CLOSE = "<neighbors>", "</neighbors>"
GRAPH_TAGS = (RELATIONS_OPEN, RELATIONS_CLOSE, NEIGHBORS_OPEN, NEIGHBORS_CLOSE)
GRAPH_STOP_STRINGS = (ANSWER_CLOSE, RELATIONS_CLOSE, NEIGHBORS_CLOSE)
GRAPH_ACTIONS = ("relations", "neighbors")
# Tags a tokenizer should keep whole (trained as special-ish tokens).
TAGS = (THINK_OPEN, THINK_CLOSE, SEARCH_OPEN, SEARCH_CLOSE, INFO_OPEN, INFO_CLOSE,
        ANSWER_OPEN, ANSWER_CLOSE, QUESTION_OPEN, QUESTION_CLOSE)

SOLVER_INSTRUCTION = (
    "Answer the question. Think inside <think> </think>. To look something up, write "
    "<search> query </search>; the results come back inside <information> </information>. "
    "Search as often as you need. When you know the answer, write it inside <answer> </answer>, "
    "with no explanation. Question: "
)

SOLVER_INSTRUCTION_KG = (
    "Answer the question. Think inside <think> </think>. To look something up, write "
    "<search> query </search>; to read the facts of an entity from the knowledge graph, write "
    "<kg_search> entity </kg_search>; the results come back inside <information> </information>. "
    "Search as often as you need. When you know the answer, write it inside <answer> </answer>, "
    "with no explanation. Question: "
)

INVALID_ACTION_KG = (
    "\nMy previous action is invalid. To search, write the query inside <search> </search>; to look "
    "up an entity's facts, write it inside <kg_search> </kg_search>. To answer, write it inside "
    "<answer> </answer>. Let me try again.\n"
)

SOLVER_INSTRUCTION_GRAPH = (
    "Answer the question from the knowledge graph. Think inside <think> </think>. To list the relations "
    "of an entity, write <relations> entity </relations>; to read the entities a relation leads to, write "
    "<neighbors> entity | relation </neighbors> (several entities separated by ;). The results come back "
    "inside <information> </information>. When you know the answers, write all of them inside <answer> "
    "</answer>, separated by ;, with no explanation. Question: "
)

INVALID_ACTION_GRAPH = (
    "\nMy previous action is invalid. To list an entity's relations, write <relations> entity </relations>; "
    "to follow a relation, write <neighbors> entity | relation </neighbors>. To answer, write the answers "
    "inside <answer> </answer>, separated by ;. Let me try again.\n"
)

INVALID_ACTION = (
    "\nMy previous action is invalid. To search, write the query inside <search> </search>. "
    "To answer, write it inside <answer> </answer>. Let me try again.\n"
)

PROPOSER_INSTRUCTION = (
    "Write one question from this chain of linked articles. Pick an answer entity from the chain. "
    "The question must need at least two hops, must not name any chain entity, and must have one "
    "short answer. Write <question> ... </question> <answer> ... </answer>.\n"
)


@dataclass(frozen=True)
class Action:
    """One parsed solver action: kind is 'search', 'answer' or 'invalid'."""

    kind: str
    text: str = ""


_SEARCH_RE = re.compile(r"<search>(.*?)</search>", re.S)
_ANSWER_RE = re.compile(r"<answer>(.*?)</answer>", re.S)
_KG_SEARCH_RE = re.compile(r"<kg_search>(.*?)</kg_search>", re.S)
_RELATIONS_RE = re.compile(r"<relations>(.*?)</relations>", re.S)
_NEIGHBORS_RE = re.compile(r"<neighbors>(.*?)</neighbors>", re.S)
_CANDIDATE_RE = re.compile(r"<question>(.*?)</question>\s*<answer>(.*?)</answer>", re.S)


def solver_user_message(question: str, kg: bool = False, graph: bool = False) -> str:
    """The user turn that opens a solver rollout; ``kg`` offers the KG tool too (DynaSearcher);
    ``graph`` offers EoG's graph tools instead of document search, and asks for every answer.

    Example:
        >>> "<kg_search>" in solver_user_message("Who?"), "<kg_search>" in solver_user_message("Who?", kg=True)
        (False, True)
        >>> "<neighbors>" in solver_user_message("Who?", graph=True), "<search>" in solver_user_message("Who?", graph=True)
        (True, False)
    """
    if kg and graph:
        raise ValueError("a solver is offered the KG tool (method.kg_tool) or the graph tools (method.graph_tools), "
                         "not both")
    instruction = SOLVER_INSTRUCTION_GRAPH if graph else SOLVER_INSTRUCTION_KG if kg else SOLVER_INSTRUCTION
    return instruction + question.strip() + "\n"


def parse_action(turn_text: str, kg: bool = False, graph: bool = False) -> Action:
    """The action that ends one generated turn: the last complete search or answer tag (and
    ``<kg_search>``, kind 'kg_search', when ``kg``: a solver without the tool reads it as invalid).
    With ``graph`` (EoG's tools) the actions are ``<relations>``, ``<neighbors>`` and the answer;
    document search is not offered, so ``<search>`` is invalid there.

    Example:
        >>> parse_action("<kg_search> Kavimo </kg_search>"), parse_action("<kg_search> Kavimo </kg_search>", kg=True)
        (Action(kind='invalid', text=''), Action(kind='kg_search', text='Kavimo'))
        >>> parse_action("<neighbors> Ann | born in </neighbors>", graph=True)
        Action(kind='neighbors', text='Ann | born in')
        >>> parse_action("<search> Ann </search>", graph=True).kind
        'invalid'
    """
    last = None
    if graph:
        patterns = (("answer", _ANSWER_RE), ("relations", _RELATIONS_RE), ("neighbors", _NEIGHBORS_RE))
    else:
        patterns = (("search", _SEARCH_RE), ("answer", _ANSWER_RE)) + ((("kg_search", _KG_SEARCH_RE),) if kg else ())
    for kind, pattern in patterns:
        for match in pattern.finditer(turn_text):
            if last is None or match.end() > last[1]:
                last = (kind, match.end(), match.group(1).strip())
    if last is None or not last[2]:
        return Action("invalid")
    return Action(last[0], last[2])


def information_block(rendered_docs: str) -> str:
    """What the environment appends after a search: the rendered top-k passages."""
    return f"\n\n{INFO_OPEN}{rendered_docs.strip()}{INFO_CLOSE}\n\n"


def render_chain(titles: Sequence[str], relations: Sequence[str], passages: Sequence[str],
                 max_chars: int = 300) -> str:
    """A chain (Eq. 1) as the proposer reads it: entities, relation labels, node passages."""
    lines = []
    for i, title in enumerate(titles):
        text = passages[i][:max_chars] if i < len(passages) else ""
        lines.append(f"[{i + 1}] {title}: {text}")
        if i < len(relations):
            lines.append(f"    --{relations[i]}-->")
    return "\n".join(lines)


def proposer_user_message(titles: Sequence[str], relations: Sequence[str],
                          passages: Sequence[str]) -> str:
    """The user turn that asks the proposer for one candidate from a chain (Eq. 2)."""
    return PROPOSER_INSTRUCTION + "Chain:\n" + render_chain(titles, relations, passages) + "\n"


def format_candidate(question: str, answer: str) -> str:
    """The proposer's target text for one candidate."""
    return f"{QUESTION_OPEN}{question}{QUESTION_CLOSE} {ANSWER_OPEN}{answer}{ANSWER_CLOSE}"


def parse_candidate(text: str) -> tuple[str, str] | None:
    """(question, answer) from a proposer generation, or None when extraction fails."""
    match = _CANDIDATE_RE.search(text)
    if not match:
        return None
    question, answer = match.group(1).strip(), match.group(2).strip()
    return (question, answer) if question and answer else None
