"""The paper's LLM judges, batched through the policy's own generation backend (seed 000, sections
3.2-3.3): the verifier of Eq. 6 (``method.verifier = llm``) and the path extractor of Eq. 8
(``method.path_extractor = llm``). Their prompts are in ``workbench.method.prompts``.

Both decode greedily with ``Policy.generate`` (HF or vLLM, whichever the policy runs), one call for
all the round's requests: the verifier's grouped prompts of every chain (:meth:`BatchedLLMVerifier.prefetch`,
then ``gate`` asks per chain and finds its answer cached), the extractor's prompts of every
correct trajectory (:meth:`LLMPathExtractor.extract_many`).

The extractor's prompt lists the titles of the passages the trajectory retrieved, never its
question's gold chain (``loop.extraction_item``). Its reply is mapped back to entity ids by title
(normalised, SQuAD style) among the trajectory's grounded candidates only (the entities of its
retrieved passages and the chain entities a retrieved passage names, ``loop.answer_candidates``),
so every entity on the path appears in what the search found, as section 3.3 requires; unknown
or ungrounded lines are dropped, a repeated entity keeps its first place, and, as in the
deterministic extractor, an answer that names a candidate ends the path. Only correct trajectories are sent (ours): Eq. 7 gives an
incorrect one no process credit, so its path (the deterministic one) only feeds the metrics. For
the same reason the loop builds the extractor only for a solver reward that reads S_path
(``rewards.reads_path``: Eq. 7's); Search-R1, Dr. Free, EoG and DynaSearcher keep the
deterministic extraction for their S_path metrics.

Seed 000 (section 3.3) produces the path "by the same LLM call that judges correctness". Here
correctness (R_ans of Eq. 7, and p_s of Eq. 10) is exact match after normalisation, the metric the
paper reports, so no LLM judges it and the extractor's call only extracts the path: one greedy
call per correct trajectory, all of a round's in one batch (ours; an LLM-judged R_ans would put a
judge's errors into the solver's reward and the proposer's p_s).

Example:
    >>> parse_path("Ann\\nthe city of Rome\\nRome\\nAnn", {1: "Ann", 2: "Rome", 3: "Italy"}, "Italy")
    [1, 2, 3]
"""

from __future__ import annotations

from typing import Mapping, Sequence

from workbench.method.gate import LLMVerifier, filter_candidate
from workbench.method.prompts import extractor_prompt
from workbench.scoring import normalize_answer

PATH_EXTRACTORS = ("deterministic", "llm")  # config.PATH_EXTRACTORS (tested equal)


class GreedyBatch:
    """Greedy generations of a policy with its chat template, cached by prompt.

    ``run(prompts)`` generates every prompt not yet cached in one ``Policy.generate`` call;
    ``get(prompt)`` returns a cached reply, generating it alone when it is missing.
    """

    def __init__(self, policy, max_new_tokens: int):
        self.policy, self.max_new_tokens = policy, max_new_tokens
        self.cache: dict[str, str] = {}
        self.calls = 0

    def run(self, prompts: Sequence[str]) -> list[str]:
        todo = list(dict.fromkeys(p for p in prompts if p not in self.cache))
        if todo:
            self.calls += 1
            outs = self.policy.generate([self.policy.chat_prompt(p) for p in todo], max_new_tokens=self.max_new_tokens,
                                        temperature=0.0, top_p=1.0)
            self.cache.update(zip(todo, (o.text for o in outs)))
        return [self.cache[p] for p in prompts]

    def get(self, prompt: str) -> str:
        return self.run([prompt])[0]

    def clear(self) -> None:
        self.cache.clear()


class BatchedLLMVerifier(LLMVerifier):
    """``gate.LLMVerifier`` whose grouped prompts of a whole round go to the model in one batch.

    ``prefetch(items)`` takes ``(chain, candidates, allow_topic, leak_filter)`` per chain, applies
    the gate's deterministic filter to know which candidates ``gate`` will send, and generates all
    those prompts at once; ``judge`` (called by ``gate``, per chain) then reads its reply from the
    cache. Without a prefetch each ``judge`` generates its own prompt, as ``LLMVerifier`` does.
    """

    def __init__(self, policy, max_new_tokens: int = 256):
        self.batch = GreedyBatch(policy, max_new_tokens)
        super().__init__(self.batch.get)

    def prefetch(self, items) -> None:
        self.batch.clear()
        prompts = []
        for chain, candidates, allow_topic, leak_filter in items:
            kept = [(c[0].strip(), c[1].strip()) for c in candidates
                    if filter_candidate(chain, c, allow_topic, leak_filter) is None]
            if kept:
                prompts.append(self.prompt(chain, kept))
        self.batch.run(prompts)


def parse_path(text: str, titles: Mapping[int, str], answer: str | None) -> list[int]:
    """Entity ids of the extractor's reply, one title a line (module docstring for the rules)."""
    by_title: dict[str, int] = {}
    for e, t in sorted(titles.items()):
        by_title.setdefault(normalize_answer(t), e)
    path: list[int] = []
    for line in text.splitlines():
        e = by_title.get(normalize_answer(line.strip().lstrip("-*0123456789.) ").strip()))
        if e is not None and e not in path:
            path.append(e)
    target = by_title.get(normalize_answer(answer)) if answer else None
    if target is not None:
        path = [e for e in path if e != target] + [target]
    return path


class LLMPathExtractor:
    """Eq. 8 by the policy itself: one greedy batch per round (:meth:`extract_many`)."""

    def __init__(self, policy, max_new_tokens: int = 128):
        self.batch = GreedyBatch(policy, max_new_tokens)

    def extract_many(self, items: Sequence[tuple]) -> list[list[int]]:
        """``(question, trajectory text, candidate titles by id, answer[, shown ids])`` per
        trajectory -> paths. The reply may name only the candidates (``loop.extraction_item``: the
        grounded ones); the prompt lists the titles of ``shown`` (default every candidate)."""
        self.batch.clear()
        prompts = []
        for q, text, titles, answer, *shown in items:
            listed = shown[0] if shown else sorted(titles)
            prompts.append(extractor_prompt(q, text, [titles[e] for e in listed if e in titles], answer or ""))
        replies = self.batch.run(prompts)
        return [parse_path(reply, item[2], item[3]) for reply, item in zip(replies, items)]
