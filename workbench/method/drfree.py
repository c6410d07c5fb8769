"""Dr. Free's shortcut-aware information-gain proposer reward (seed 002, section 3 / its Eq. 5).

A generated question (q, a) from a chain with aligned passages E = (p_1..p_L) is scored by
teacher-forced likelihoods under the current policy:

    Delta_B = log p(a | q, E) - max_{b in B} log p(a | q, b)

where B is the evaluated shortcut set (Eq. 5; Table 3 ablates its four types, Table 16 defines them):

* ``closed_book`` -- no evidence at all;
* ``source_only`` -- the chain's source document alone (hop 0: its first passage, Table 17's
  "Source document (Hop 0)");
* ``one_shot`` -- the top-3 passages of one retrieval of the question with the training retriever,
  each truncated to 340 whitespace-delimited words (Table 16);
* ``per_hop`` -- each hop's evidence passage alone (hops 1..L-1, Table 17's "Per-hop evidence"):
  one context per hop. The source document is not among them: it is the ``source_only`` type, and
  Table 3 removes the two types separately (with it here, ``dr_free_wo_source_only`` computed
  exactly what ``dr_free`` does; issue 40).

The question earns a positive reward only when Delta_B > 0 (abstract, Fig. 3). The paper's text
here gives no closed form for the map from Delta_B to the reward, so ours: ``r = max(0, Delta_B)``
(``form="positive_part"``), with ``form="indicator"`` (r = 1[Delta_B > 0]) as the named alternative
and ``margin`` (ours, 0) a threshold Delta_B must exceed.

Prompt (ours: the paper's likelihood prompt is not given): the solver protocol's own shape, so the
likelihood is the one the solver would assign when answering after a retrieval:
``chat_prompt(solver_user_message(q)) + information_block(context) + "<answer>" a "</answer>"``;
closed-book drops the information block. Only the answer's tokens count (the tags are masked), and
log p(a | .) is their *sum* (ours; the same answer under every context, so a per-token mean would
only rescale Delta_B).

Example:
    >>> from workbench.method.memory import ChainView
    >>> c = ChainView(0, "h", [1, 2], ["Ann", "Rome"], ["born in"], ["Ann was born in Rome.", "Rome is old."])
    >>> [name for name, _ in shortcut_contexts(c, "Where was Ann born?", None, ("closed_book", "source_only", "per_hop"))]
    ['closed_book', 'source_only', 'per_hop:1']
    >>> info_gain_reward(-0.5), info_gain_reward(1.5), info_gain_reward(1.5, form="indicator")
    (0.0, 1.5, 1.0)
"""

from __future__ import annotations

from typing import Callable, Sequence

import torch

from workbench.policy import protocol
from workbench.policy.rollout import Trajectory, response_logprobs

MICRO_BATCH = 8  # ours: likelihood rows per padded forward (method.drfree_micro_batch; the fastest on the CPU)
ONE_SHOT_TOPK = 3  # Table 16: "the top three passages from one retrieval"
ONE_SHOT_WORDS = 340  # Table 16: "Each passage is truncated to 340 whitespace-delimited words"


def truncate_words(text: str, n: int = ONE_SHOT_WORDS) -> str:
    """The first ``n`` whitespace-delimited words of ``text`` (Table 16's truncation).

    Example:
        >>> truncate_words("a b  c d", 3)
        'a b c'
    """
    return " ".join(text.split()[:n])


def closed_book(chain, question: str, search) -> list[list[str]]:
    """Closed-book shortcut: one context with no evidence (Table 16).

    Example:
        >>> closed_book(None, "q?", None)
        [[]]
    """
    return [[]]


def source_only(chain, question: str, search) -> list[list[str]]:
    """Source-only shortcut: the chain's first passage alone (Table 16's "seed document").

    Example:
        >>> from workbench.method.memory import ChainView
        >>> source_only(ChainView(0, "h", [1, 2], ["A", "B"], ["r"], ["pa", "pb"]), "q?", None)
        [['pa']]
    """
    return [[chain.passages[0]]]


def one_shot(chain, question: str, search) -> list[list[str]]:
    """One-shot shortcut: the top-3 passages of one retrieval of the question with ``search``
    (the training retriever), each truncated to 340 words (Table 16). The passage text is the
    hit's ``contents`` (title line + text), as the solver sees it.

    Example:
        >>> from workbench.search.tool import Hit
        >>> class S:
        ...     def search(self, queries, k=None): return [[Hit(1, 1, "T", "w " * 400, 1.0)] * k]
        >>> ctx = one_shot(None, "q?", S())
        >>> len(ctx[0]), len(ctx[0][0].split())
        (3, 340)
    """
    if search is None:
        raise ValueError("the one_shot shortcut needs the search tool (ProposerInputs.search)")
    hits = search.search([question], k=ONE_SHOT_TOPK)[0][:ONE_SHOT_TOPK]
    return [[truncate_words(h.contents) for h in hits]]


def per_hop(chain, question: str, search) -> list[list[str]]:
    """Per-hop shortcuts: each hop's evidence passage alone (hops 1..L-1), one context each; the
    source document (hop 0) is ``source_only``'s, so leaving either type out changes B.

    Example:
        >>> from workbench.method.memory import ChainView
        >>> per_hop(ChainView(0, "h", [1, 2, 3], ["A", "B", "C"], ["r", "s"], ["pa", "pb", "pc"]), "q?", None)
        [['pb'], ['pc']]
    """
    return [[p] for p in chain.passages[1:]]


SHORTCUTS: dict[str, Callable] = {"closed_book": closed_book, "source_only": source_only,
                                  "one_shot": one_shot, "per_hop": per_hop}
ALL_SHORTCUTS = tuple(SHORTCUTS)  # the full set B of Eq. 5


def shortcut_contexts(chain, question: str, search, names: Sequence[str] = ALL_SHORTCUTS
                      ) -> list[tuple[str, list[str]]]:
    """(label, passages) for each context of the named shortcut set B, in the order given; per-hop
    contexts are labelled ``per_hop:i``, i the hop (1..L-1; the source document is hop 0).

    Example:
        >>> from workbench.method.memory import ChainView
        >>> c = ChainView(0, "h", [1, 2], ["A", "B"], ["r"], ["pa", "pb"])
        >>> shortcut_contexts(c, "q?", None, ["source_only", "closed_book"])
        [('source_only', ['pa']), ('closed_book', [])]
    """
    out = []
    for name in names:
        if name not in SHORTCUTS:
            raise ValueError(f"unknown shortcut {name!r}; known: {', '.join(SHORTCUTS)}")
        contexts = SHORTCUTS[name](chain, question, search)
        for i, ctx in enumerate(contexts):
            out.append((f"{name}:{i + 1}" if name == "per_hop" else name, ctx))
    return out


def render_context(passages: Sequence[str]) -> str:
    """Passages as Search-R1 renders retrieved documents (``Doc i(Title: ...) text``-like lines):
    ``Doc i: passage`` one a line (ours; the chain passages carry no separate title field here).

    Example:
        >>> render_context(["x", "y"])
        'Doc 1: x\\nDoc 2: y\\n'
    """
    return "".join(f"Doc {i + 1}: {p.strip()}\n" for i, p in enumerate(passages))


def likelihood_pieces(policy, question: str, passages: Sequence[str], answer: str) -> tuple[list[int], list[int], list[int]]:
    """Token ids of (prefix up to and including ``<answer>``, the answer, ``</answer>``).

    Each piece is encoded separately so the answer's tokens are exactly the mask (ours; the
    tags are special-ish tokens, so the split matches the solver's own tokenisation of them).
    """
    prefix = policy.chat_prompt(protocol.solver_user_message(question))
    if passages:
        prefix += protocol.information_block(render_context(passages))
    return (policy.encode(prefix + protocol.ANSWER_OPEN), policy.encode(answer.strip()),
            policy.encode(protocol.ANSWER_CLOSE))


def likelihood_row(policy, question: str, passages: Sequence[str], answer: str) -> Trajectory:
    """One teacher-forced row as ``batch_tensors`` takes it: the prompt up to ``<answer>``, then the
    answer and ``</answer>`` as the response, with ``loss_mask`` 1 on the answer's tokens only."""
    prefix, ans, close = likelihood_pieces(policy, question, passages, answer)
    if not ans:
        raise ValueError("answer_logliks: the answer encodes to no tokens")
    response = ans + close
    return Trajectory(0, 0, "", prefix, response, [1] * len(ans) + [0] * len(close), [0.0] * len(response))


@torch.no_grad()
def rows_logliks(policy, rows: Sequence[Trajectory], micro_batch: int = MICRO_BATCH) -> list[float]:
    """Sum of each row's masked log-probs: rows sorted by length (less padding) and cut into groups
    of ``micro_batch``, one right-padded forward per group through :meth:`Policy.token_logprobs`."""
    return [float(x.sum()) for x in response_logprobs(policy, list(rows), micro_batch, by_length=True)]


def answer_logliks(policy, question: str, answer: str, contexts: Sequence[Sequence[str]],
                   micro_batch: int = MICRO_BATCH) -> list[float]:
    """log p(a | q, context) for each context, teacher-forced with ``policy``: batched, right-
    padded forwards (one when ``len(contexts) <= micro_batch``), summing only the answer's tokens.

    Example:
        >>> # answer_logliks(policy, "Where was Ann born?", "Rome", [[], ["Ann was born in Rome."]])
    """
    return rows_logliks(policy, [likelihood_row(policy, question, c, answer) for c in contexts], micro_batch)


class PrefetchedSearch:
    """A search tool whose answers to ``questions`` come from one batched call made up front, so a
    round's one-shot shortcuts cost one retrieval batch, not one search per candidate.

    Example:
        >>> from workbench.search.tool import Hit
        >>> class S:
        ...     calls = 0
        ...     def search(self, queries, k=None):
        ...         S.calls += 1
        ...         return [[Hit(1, 1, q, q, 1.0)] for q in queries]
        >>> p = PrefetchedSearch(S(), ["a?", "b?"], k=3)
        >>> [p.search([q], k=3)[0][0].title for q in ("b?", "a?")], S.calls
        (['b?', 'a?'], 1)
    """

    def __init__(self, search, questions: Sequence[str], k: int = ONE_SHOT_TOPK):
        self.search_tool, self.k = search, k
        unique = list(dict.fromkeys(questions))
        self.hits = dict(zip(unique, search.search(unique, k=k))) if unique else {}

    def search(self, queries, k=None):
        if k != self.k or any(q not in self.hits for q in queries):
            return self.search_tool.search(queries, k=k)
        return [self.hits[q] for q in queries]


def batch_information_gain(policy, items: Sequence[tuple], search, shortcuts: Sequence[str] = ALL_SHORTCUTS,
                           micro_batch: int = MICRO_BATCH) -> list[dict]:
    """Eq. 5 for many candidates ``items`` = [(chain, question, answer)]: the one-shot retrievals in
    one search batch, every context of every candidate (full evidence and each shortcut) pooled and
    scored in padded forwards of ``micro_batch`` rows. Same result as :func:`information_gain` per item.

    Example:
        >>> # batch_information_gain(policy, [(chain, "Where was Ann born?", "Rome")], search_tool)
    """
    if "one_shot" in shortcuts and search is not None and items:
        search = PrefetchedSearch(search, [q for _, q, _ in items])
    labelled, rows = [], []
    for chain, question, answer in items:
        mine = shortcut_contexts(chain, question, search, shortcuts)
        labelled.append([name for name, _ in mine])
        rows += [likelihood_row(policy, question, ctx, answer) for ctx in [list(chain.passages)] + [c for _, c in mine]]
    lls, out, at = rows_logliks(policy, rows, micro_batch), [], 0
    for names in labelled:
        full, rest = lls[at], dict(zip(names, lls[at + 1:at + 1 + len(names)]))
        at += 1 + len(names)
        strongest = max(rest, key=rest.get) if rest else None
        out.append({"gain": full - (rest[strongest] if rest else 0.0), "full": full, "shortcuts": rest,
                    "strongest": strongest})
    return out


def information_gain(policy, chain, question: str, answer: str, search,
                     shortcuts: Sequence[str] = ALL_SHORTCUTS) -> dict:
    """Eq. 5: Delta_B = log p(a | q, E) - max_b log p(a | q, b), E = all the chain's passages.

    Returns ``{"gain", "full", "shortcuts": {label: loglik}, "strongest": label}``; the full
    context and every shortcut context go through padded forwards of ``MICRO_BATCH`` rows. An
    empty shortcut set gives Delta = log p(a | q, E) (ours: nothing to compare against).

    Example:
        >>> # information_gain(policy, chain, "Where was Ann born?", "Rome", search_tool)["gain"]
    """
    return batch_information_gain(policy, [(chain, question, answer)], search, shortcuts)[0]


def info_gain_reward(gain: float, form: str = "positive_part", margin: float = 0.0) -> float:
    """The reward of a gain: positive only when Delta_B > margin (abstract, Fig. 3).

    ``form`` (ours; the paper gives no closed form in the text we have): ``positive_part`` =
    max(0, Delta_B - margin), ``indicator`` = 1[Delta_B > margin]. ``margin`` is ours (0).

    Example:
        >>> info_gain_reward(0.0), info_gain_reward(2.0, margin=0.5), info_gain_reward(0.3, "indicator")
        (0.0, 1.5, 1.0)
    """
    if form == "positive_part":
        return max(0.0, float(gain) - margin)
    if form == "indicator":
        return 1.0 if gain > margin else 0.0
    raise ValueError(f"unknown info-gain reward form {form!r}; use positive_part or indicator")
