"""SSP as published (Search Self-play, Lu et al. 2026; the CoEvoKG paper's baseline and the first row
of its Table 2, seed 000 section 4.1): the proposer searches while writing its question, and a RAG
check keeps only questions the solver answers from the proposer's own retrieved documents.

One round (``loop.Trainer.propose`` for ``task_source='answer_entity'``), after SSP's code
(github.com/Alibaba-Quark/SSP: ``ProblemExtractor`` and ``_compute_proposer_rewards``):

1. per answer (an entity of the store with a passage, drawn as before; SSP draws its answers from a
   list), M proposer rollouts with the solver's search tool and turns (:func:`propose`; the prompt
   is SSP's in our wording: the answer, search first, then ``<question> ... </question>``);
2. SSP's rule checks (:func:`check`): a question was written; it has at least
   ``method.ssp_min_question_words`` words (SSP: 10); the answer is not in it (SSP's
   case-insensitive substring check); the proposer retrieved something; it made at least
   ``method.ssp_min_searches`` searches (SSP: 2), no query repeated;
3. the RAG check (:func:`rag_verify`): the policy answers each surviving question greedily, without
   search, from the documents its proposer retrieved plus ``method.ssp_rag_noise`` other proposer
   rollouts' documents as distractors (SSP's published run: 4), shuffled by seed; the question is
   valid when the answer matches the given one (exact match after normalisation; SSP's code also
   asks an LLM judge when it does not: ours, exact match only, as every reward here);
4. the first ``method.admit_top_k`` valid candidates of an answer are posed to the solver and get
   SSP's reward 1 - acc over the G rollouts (``rewards.ssp_adversarial``); an invalid one counts as
   an extraction failure, as in SSP's code, and gets the proposer's format penalty
   (``method.extraction_penalty``); an empty slot takes a seed question (SSP reuses earlier ones).

Eq. 6's quality gate and ``method.verifier`` are CoEvoKG's (C1 adds them) and do not apply here. A
posed question's ``hops`` is the number of searches its proposer made (SSP asks its proposer for a
number of searches; ours counts them). Cost: M x ``chains_per_round`` proposer rollouts of up to
``rollout.max_turns`` turns and one greedy RAG batch a round (about half the solver's G rollouts
per slot at the tiny preset's M = 4, G = 8).

Example:
    >>> "Answer: Rome" in proposer_message("Rome")
    True
    >>> t = SimpleNamespace(text="<search> a </search>...<question> Where is it? </question>", queries=["a"],
    ...                     retrieved=["<information>Doc 1(Title: A) a text</information>"])
    >>> question_of(t), check(t, question_of(t), "Rome", min_words=3, min_searches=2)
    ('Where is it?', 'too few searches')
"""

from __future__ import annotations

import re
from types import SimpleNamespace  # noqa: F401 (the doctest's)
from typing import Callable, Sequence

import numpy as np

from workbench.method.gate import DIMENSIONS, Verdict
from workbench.policy import protocol
from workbench.policy.rollout import Trajectory, rollout
from workbench.scoring import exact_match
from workbench.search.tool import normalize_query

PROPOSER_INSTRUCTION = (
    "Write one question whose answer is the entity given below. First find facts that lead to it: "
    "write <search> query </search>; the results come back inside <information> </information>. "
    "Search at least twice, with a different query each time. Then write the question inside "
    "<question> </question> followed by <answer> the given answer </answer>. The question must need "
    "those searches and must not contain the answer. Answer: "
)
RAG_INSTRUCTION = (
    "Answer the question using only the documents below, without searching. Write the answer inside "
    "<answer> </answer>, with no explanation.\n"
)
REASONS = ("extraction failed", "question too short", "answer in question", "no retrieval", "too few searches",
           "repeated search", "rag check failed")
_QUESTION_RE = re.compile(r"<question>(.*?)</question>", re.S)
_INFO_RE = re.compile(re.escape(protocol.INFO_OPEN) + r"(.*?)(?:" + re.escape(protocol.INFO_CLOSE) + r"|$)", re.S)


def proposer_message(answer: str) -> str:
    """The user turn that opens one SSP proposer rollout for ``answer``."""
    return PROPOSER_INSTRUCTION + answer.strip() + "\n"


def question_of(traj) -> str | None:
    """The last non-empty ``<question>`` the proposer wrote, or None (extraction failed)."""
    found = [q.strip() for q in _QUESTION_RE.findall(traj.text) if q.strip()]
    return found[-1] if found else None


def materials(traj) -> str:
    """The documents a rollout retrieved (its ``<information>`` blocks' contents), one block a
    paragraph: SSP's RAG materials.

    Example:
        >>> materials(SimpleNamespace(retrieved=["\\n<information>Doc 1(Title: A) x</information>\\n", "<information></information>"]))
        'Doc 1(Title: A) x'
    """
    blocks = [m.strip() for block in traj.retrieved for m in _INFO_RE.findall(block)]
    return "\n\n".join(b for b in blocks if b)


def check(traj, question: str | None, answer: str, min_words: int, min_searches: int) -> str | None:
    """SSP's rule checks on one proposer rollout, in its code's order: the reason it is invalid
    (one of :data:`REASONS`), or None."""
    if question is None:
        return "extraction failed"
    if len(question.split()) < min_words:
        return "question too short"
    if answer.strip().lower() in question.lower():
        return "answer in question"
    if not materials(traj):
        return "no retrieval"
    queries = [normalize_query(q).lower() for q in traj.queries]
    if len(queries) < min_searches:
        return "too few searches"
    if len(set(queries)) < len(queries):
        return "repeated search"
    return None


def rag_prompts(questions: Sequence[str], own: Sequence[str], pool: Sequence[str], noise: int, seed: int,
                fits: Callable[[str], bool] = lambda prompt: True) -> list[str]:
    """The RAG check's prompt per question: its proposer's documents ``own[i]`` and ``noise`` other
    rollouts' documents drawn from ``pool`` (never its own), shuffled together (SSP's noisy RAG
    materials); while a prompt does not ``fits`` (the token budget), distractors are dropped, then its
    own documents are cut from the front.

    Example:
        >>> rag_prompts(["Who?"], ["Ann wrote it."], ["Ann wrote it.", "Bo sang."], 1, 0)[0].splitlines()[-4:]
        ['Documents:', 'Ann wrote it.', 'Bo sang.', 'Question: Who?']
    """
    rng = np.random.default_rng(seed)
    out = []
    for question, mine in zip(questions, own):
        others = [p for p in dict.fromkeys(pool) if p and p != mine]
        picked = [others[i] for i in rng.permutation(len(others))[:noise]]
        order = rng.permutation(len(picked) + 1)
        while True:
            docs = [([mine] + picked)[i] for i in order if i <= len(picked)]
            prompt = RAG_INSTRUCTION + "Documents:\n" + "\n".join(docs) + f"\nQuestion: {question.strip()}\n"
            if fits(prompt) or not mine:
                break
            if picked:
                picked.pop()
            else:
                mine = mine[len(mine) // 4 + 1:]
        out.append(prompt)
    return out


def rag_verify(generate: Callable[[list[str]], list[str]], prompts: Sequence[str], answers: Sequence[str]) -> list[bool]:
    """Whether each RAG answer matches its given answer: ``generate`` (the policy, greedy, one
    batch) replies to every prompt; its ``<answer>`` (else its whole reply) is compared by exact match.

    Example:
        >>> rag_verify(lambda ps: ["<answer> Rome </answer>", "Paris"], ["p1", "p2"], ["rome", "Rome"])
        [True, False]
    """
    replies = generate(list(prompts)) if prompts else []
    out = []
    for reply, answer in zip(replies, answers):
        action = protocol.parse_action(reply)
        predicted = action.text if action.kind == "answer" else reply.strip()
        out.append(bool(exact_match(predicted, [answer])))
    return out


def greedy(policy, max_new_tokens: int) -> Callable[[list[str]], list[str]]:
    """The policy's greedy replies through its chat template, stopping at ``</answer>``."""
    def generate(prompts: list[str]) -> list[str]:
        outs = policy.generate([policy.chat_prompt(p) for p in prompts], max_new_tokens=max_new_tokens,
                               temperature=0.0, top_p=1.0, stop=(protocol.ANSWER_CLOSE,))
        return [o.text for o in outs]
    return generate


def propose(policy, search, answers: Sequence[str], m: int, *, max_turns: int, topk: int, temperature: float,
            top_p: float, max_new_tokens: int, max_total_tokens: int, seed: int) -> list[Trajectory]:
    """M proposer rollouts per answer (answer-major), with the solver's search tool and turns."""
    return rollout(policy, search, list(answers), m, max_turns=max_turns, topk=topk, temperature=temperature,
                   top_p=top_p, max_new_tokens=max_new_tokens, max_total_tokens=max_total_tokens, seed=seed,
                   user_messages=[proposer_message(a) for a in answers])


def verdicts(trajectories: Sequence[Trajectory], answers: Sequence[str], m: int, top_k: int, *, min_words: int,
             min_searches: int, noise: int, seed: int, generate: Callable[[list[str]], list[str]],
             fits: Callable[[str], bool] = lambda prompt: True) -> list[list[Verdict]]:
    """SSP's verdict on each of the M rollouts of each answer (steps 2-4 of the module docstring):
    valid candidates score 1 on every dimension (Q = 1), the first ``top_k`` of an answer admitted;
    an invalid one is not extracted, its reason one of :data:`REASONS`. One RAG batch for the round.

    Example:
        >>> t = SimpleNamespace(text="<question> Which city holds the old port? </question>", queries=["port", "city"],
        ...                     retrieved=["<information>Doc 1(Title: Rome) Rome has the old port.</information>"])
        >>> [v.reason for v in verdicts([t, t], ["Rome"], 2, 1, min_words=3, min_searches=2, noise=0, seed=0,
        ...                             generate=lambda ps: ["<answer> Rome </answer>"] * len(ps))[0]]
        ['ok', 'ok']
    """
    if len(trajectories) != len(answers) * m:
        raise ValueError(f"ssp.verdicts: {len(trajectories)} rollouts for {len(answers)} answers x {m}")
    questions = [question_of(t) for t in trajectories]
    reasons = [check(t, q, answers[i // m], min_words, min_searches)
               for i, (t, q) in enumerate(zip(trajectories, questions))]
    docs = [materials(t) for t in trajectories]
    todo = [i for i, r in enumerate(reasons) if r is None]
    prompts = rag_prompts([questions[i] for i in todo], [docs[i] for i in todo], [d for d in docs if d], noise, seed,
                          fits)
    for i, ok in zip(todo, rag_verify(generate, prompts, [answers[i // m] for i in todo])):
        reasons[i] = None if ok else "rag check failed"
    out = []
    for c, answer in enumerate(answers):
        mine, admitted = [], 0
        for j in range(m):
            i = c * m + j
            if reasons[i] is not None:
                mine.append(Verdict(j, questions[i], answer, False, reason=reasons[i]))
                continue
            mine.append(Verdict(j, questions[i], answer, True, scores={d: 1.0 for d in DIMENSIONS}, q=1.0,
                                passed=True, admitted=admitted < top_k, reason="ok"))
            admitted += 1
        out.append(mine)
    return out
