"""The quality gate (seed 000, section 3.2, Eq. 6): Q(q, a, c) = 1[no leak] * Verify(q, a, c).

Order, as the paper fixes it: a deterministic filter first (:func:`filter_candidate`: broken
candidates, an answer that is not a chain entity, answer leakage, not exactly one wh-question),
then a verifier judging every surviving candidate of a chain in ONE grouped call on four
dimensions in [0, 1]: chain faithfulness, a genuine multi-hop requirement, a single answer focus,
and clarity. Two verifiers share the :class:`Verifier` interface: :class:`StructuralVerifier`
(deterministic, for the tiny tier) and :class:`LLMVerifier` (a prompt and a parser, for capable
backbones). The top k candidates with Q above the threshold (strictly: section 3.2, "only
candidates scoring above a threshold are retained") are admitted.

Aggregation of the dimension scores (ours; the paper's is in its unavailable appendix): by name,
``geometric_mean`` (any dimension at 0 vetoes), ``mean`` (the presets' choice, ``MethodConfig``) or
``min``; Q stays in [0, 1], and a leak always vetoes. A zero multi-hop score vetoes too (ours:
section 3.2 lists "needs at least two hops" among the question's requirements but does not say the
verifier's multi-hop score is a hard constraint; ``method.gate_multi_hop_veto``, on by default).

Example:
    >>> from workbench.method.memory import ChainView
    >>> chain = ChainView(0, "h", [1, 2, 3], ["Ann", "Rome", "Italy"], ["born in", "located in"],
    ...                   ["Ann is an author born in Rome.", "Rome is a city located in Italy.", "Italy is a country."])
    >>> v = gate(chain, [("In which country is the city where the author was born located?", "Italy"),
    ...                  ("Where is Rome located?", "Italy"), None], StructuralVerifier(), 0.5, 1)
    >>> [(x.admitted, x.reason) for x in v]
    [(True, 'ok'), (False, "leak: names chain entity 'Rome'"), (False, 'extraction failed')]
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field, replace
from typing import Callable, Mapping, Protocol, Sequence

from workbench.config import VERIFIER_VOCABULARIES as VOCABULARIES
from workbench.method.path_support import word_key
from workbench.method.prompts import VERIFIER_PROMPT
from workbench.policy.protocol import render_chain
from workbench.scoring import normalize_answer

DIMENSIONS = ("faithfulness", "multi_hop", "answer_focus", "clarity")
WH_WORDS = frozenset({"what", "which", "who", "whom", "whose", "where", "when", "why", "how"})
# Function words carry no chain content (ours; used by the structural verifier).
STOPWORDS = frozenset(
    "a an the of in on at to by for from with as is was were are be been being and or but that this "
    "these those it its his her their there than then do does did has have had not no into onto "
    "also same one other another".split()) | WH_WORDS


@dataclass
class Verdict:
    """The gate's decision on one candidate; ``scores`` holds the four dimensions in [0, 1].
    ``passed``: it met the quality bar (Q > threshold, Q > 0); ``admitted``: passed and in the top k."""

    index: int
    question: str | None
    answer: str | None
    extracted: bool
    leak: bool = False
    scores: dict[str, float] = field(default_factory=dict)
    q: float = 0.0
    passed: bool = False
    admitted: bool = False
    reason: str = ""


class Verifier(Protocol):
    """Judges all candidates of one chain in one grouped call; verdict i is candidate i."""

    def judge(self, chain, candidates: Sequence[tuple[str, str]]) -> list[Verdict]: ...


def _words(text: str) -> list[str]:
    return re.findall(r"\w+", text.lower())


def _names(question: str, title: str) -> bool:
    """Whole-word, case-insensitive mention of ``title`` in ``question`` (path support's match)."""
    t = word_key(title)
    return t != "  " and t in word_key(question)


def answer_position(chain, answer: str) -> int | None:
    """Index of the chain entity whose normalised title equals the normalised answer, else None."""
    target = normalize_answer(answer)
    return next((i for i, t in enumerate(chain.titles) if target and normalize_answer(t) == target), None)


def check_candidate(candidate: tuple[str, str] | None,
                    checks: Callable[[str, str], tuple[str, bool] | None]) -> Verdict | None:
    """Eq. 6's deterministic checks around a task's own: a rejecting Verdict (index 0, Q 0), or
    None when the candidate passes. In order: 'extraction failed', 'empty', then ``checks(question,
    answer)`` (the task's answer and leakage rules: a ``(reason, leak)`` rejection or None), then
    'not one wh-question' (exactly one '?', ending the question, and a wh-word). The chain gate
    (:func:`filter_candidate`) and EoG's (``eog.filter_topology_candidate``) differ in ``checks`` only.

    Example:
        >>> check_candidate(("Who wrote it?", "Ann"), lambda q, a: None) is None
        True
        >>> check_candidate(("Who wrote it? Ann?", "Ann"), lambda q, a: None).reason
        'not one wh-question'
        >>> check_candidate((" ", "Ann"), lambda q, a: None).reason
        'empty'
    """
    if candidate is None:
        return Verdict(0, None, None, extracted=False, reason="extraction failed")
    question, answer = (candidate[0] or "").strip(), (candidate[1] or "").strip()
    if not question or not answer:
        return Verdict(0, question, answer, extracted=False, reason="empty")
    rejected = checks(question, answer)
    if rejected is not None:
        reason, leak = rejected
        return Verdict(0, question, answer, True, leak=leak, reason=reason)
    if question.count("?") != 1 or not question.endswith("?") or not WH_WORDS & set(_words(question)):
        return Verdict(0, question, answer, True, reason="not one wh-question")
    return None


def filter_candidate(chain, candidate: tuple[str, str] | None, allow_topic: bool = False,
                     leak_filter: bool = True) -> Verdict | None:
    """The deterministic filter: a rejecting Verdict (index 0, Q 0), or None when it passes.

    Rejections, in order: 'extraction failed', 'empty', 'answer not in chain' (Eq. 2 requires
    a in {e_1..e_L}), leakage (the normalised answer, or ANY chain entity title, named verbatim in
    the question, case-insensitive), 'not one wh-question' (exactly one '?', ending the question,
    and a wh-word).

    ``allow_topic`` (ours, off by default as in the paper) lets the question name the chain's
    first entity when it is not the answer, as human multi-hop benchmarks do ("In which country
    was X born?"): a backbone too small to describe an entity without its name can then still
    write admissible questions. The answer and every later chain entity stay forbidden.

    ``leak_filter=False`` skips both leakage checks: the SSP baseline, which the paper's build-up
    starts without the no-leakage gate (section 4.5: "each added component -- the no leakage
    quality gate (Eq. 6), ... -- removes one such exploit").

    Example:
        >>> from workbench.method.memory import ChainView
        >>> c = ChainView(0, "h", [1, 2], ["Ann", "Rome"], ["born in"], ["", ""])
        >>> filter_candidate(c, ("Where was Ann born?", "Rome")).reason
        "leak: names chain entity 'Ann'"
        >>> filter_candidate(c, ("Where was the author born?", "Rome")) is None
        True
    """
    def chain_checks(question: str, answer: str) -> tuple[str, bool] | None:
        position = answer_position(chain, answer)
        if position is None:
            return "answer not in chain", False
        if leak_filter:
            norm_q, norm_a = f" {normalize_answer(question)} ", normalize_answer(answer)
            if norm_a and f" {norm_a} " in norm_q:
                return "leak: answer in question", True
            named = next((t for i, t in enumerate(chain.titles) if _names(question, t)
                          and not (allow_topic and i == 0 and position != 0)), None)
            if named is not None:
                return f"leak: names chain entity {named!r}", True
        return None

    return check_candidate(candidate, chain_checks)


QUALITY_AGGREGATIONS: dict[str, Callable[[Sequence[float]], float]] = {
    "geometric_mean": lambda xs: math.prod(xs) ** (1.0 / len(xs)),
    "mean": lambda xs: sum(xs) / len(xs),
    "min": min,
}


def quality(verdict: Verdict, aggregation: str = "geometric_mean", multi_hop_veto: bool = True) -> float:
    """Eq. 6: Q = 1[no leak] * aggregate(the four dimension scores); a missing dimension scores 0.

    With ``multi_hop_veto`` (ours, ``method.gate_multi_hop_veto``), whatever the aggregation, a
    question with no multi-hop requirement (``multi_hop`` 0) scores 0, as a leak does: our reading
    of section 3.2's "needs at least two hops" as a hard property; Eq. 6 itself vetoes leaks only.

    Example:
        >>> quality(Verdict(0, "q", "a", True, scores={"faithfulness": 1, "multi_hop": 0.5,
        ...                                             "answer_focus": 1, "clarity": 0.5}))
        0.7071067811865476
    """
    if aggregation not in QUALITY_AGGREGATIONS:
        raise ValueError(f"unknown aggregation {aggregation!r}; expected one of {sorted(QUALITY_AGGREGATIONS)}")
    if verdict.leak or (multi_hop_veto and verdict.scores.get("multi_hop", 0.0) == 0.0):
        return 0.0
    return float(QUALITY_AGGREGATIONS[aggregation]([verdict.scores.get(d, 0.0) for d in DIMENSIONS]))


def clarity(question: str, n_words: int, min_words: int, max_words: int) -> float:
    """Eq. 6's clarity dimension, deterministic (ours): one question mark, at the end, and a length
    within [min_words, max_words].

    Example:
        >>> clarity("Who directed Kavimo?", 3, 3, 30), clarity("Who? What?", 2, 3, 30)
        (1.0, 0.0)
    """
    ok = question.count("?") == 1 and question.strip().endswith("?") and min_words <= n_words <= max_words
    return 1.0 if ok else 0.0


def weak_reason(scores: dict) -> str:
    """A verdict's reason: 'ok', or 'weak: ' and every dimension below 1 with its score."""
    weak = [d for d in DIMENSIONS if scores[d] < 1.0]
    return "ok" if not weak else "weak: " + ", ".join(f"{d}={scores[d]:.2f}" for d in weak)


MIN_STEM = 4  # ours: the shortest word another word may extend ('rise' -> 'rises'; 'set' only itself)
SHARED_PREFIX = 5  # ours: the shortest shared beginning of two forms of one word ('directed', 'director')


def same_word(a: str, b: str) -> bool:
    """Whether two lowercase words are forms of one word (ours; a crude stemmer without a word list,
    since the workbench ships none): equal, or the shorter of at least :data:`MIN_STEM` letters
    begins the longer ('rise'/'rises', 'citizen'/'citizenship'), or they share their first
    :data:`SHARED_PREFIX` letters ('directed'/'director', 'employed'/'employer'). Synonyms
    ('attend' for 'educated') and irregular forms ('wrote'/'written') stay apart.

    Example:
        >>> same_word("director", "directed"), same_word("rises", "rise"), same_word("born", "borders")
        (True, True, False)
        >>> same_word("set", "settled"), same_word("wrote", "written")
        (False, False)
    """
    if a == b:
        return True
    short, long_ = sorted((a, b), key=len)
    return (len(short) >= MIN_STEM and long_.startswith(short)) or (
        len(short) >= SHARED_PREFIX and short[:SHARED_PREFIX] == long_[:SHARED_PREFIX])


def _matches(word: str, words: set[str]) -> bool:
    return word in words or any(same_word(word, w) for w in words)


class StructuralVerifier:
    """Deterministic verifier for the tiny tier: checks the question against the chain.

    Scores (ours), from the question's content words (lowercase, stopwords and wh-words removed):

    * faithfulness: the fraction of content words found in the chain's relation labels or node
      passages, and 0 unless the answer is a chain entity;
    * multi_hop: relations touched / 2, capped at 1, where a relation is *touched* when one of its
      label's content words occurs in the question (at least two relations = a two-hop question);
    * answer_focus: 1 when a relation incident to the answer node is touched, else 0;
    * clarity: 1 when the question has one '?' at its end and min_words..max_words words, else 0.

    ``vocabulary`` (``method.verifier_vocabulary``, ours): 'exact' matches words as written (this
    class's default; the config's is 'forms_types'); 'forms' also counts another form of a word
    (:func:`same_word`: 'director' touches `directed by`); 'forms_types' also counts the chain nodes'
    entity types (``types``: entity_id -> type, e.g. 'city', 'university') as faithful words, since a
    question names what it asks for.

    Example:
        >>> from workbench.method.memory import ChainView
        >>> chain = ChainView(0, "", [1, 2, 3], ["Kavimo", "Ann Roe", "Uni of Bel"], ["directed by", "educated at"],
        ...                   ["Kavimo was released in 1990.", "Ann Roe grew up in Bel.", "Uni of Bel has a library."])
        >>> q = [("At which university was the director of Kavimo educated?", "Uni of Bel")]
        >>> types = {1: "film", 2: "person", 3: "university"}
        >>> [StructuralVerifier(vocabulary=v, types=types).judge(chain, q)[0].scores["faithfulness"]
        ...  for v in ("exact", "forms", "forms_types")]
        [0.5, 0.75, 1.0]
    """

    def __init__(self, min_words: int = 4, max_words: int = 40, vocabulary: str = "exact",
                 types: Mapping[int, str] | None = None):
        if vocabulary not in VOCABULARIES:
            raise ValueError(f"method.verifier_vocabulary: {vocabulary!r}; expected one of {list(VOCABULARIES)}")
        if vocabulary == "forms_types" and types is None:
            raise ValueError("vocabulary 'forms_types' needs the entities' types (entity_id -> type)")
        self.min_words, self.max_words = min_words, max_words
        self.forms, self.types = vocabulary != "exact", types if vocabulary == "forms_types" else None

    def judge(self, chain, candidates: Sequence[tuple[str, str]]) -> list[Verdict]:
        rel_words = [set(_words(r)) - STOPWORDS for r in chain.relations]
        vocab = set().union(*rel_words, *(set(_words(p)) for p in chain.passages))
        if self.types is not None:  # a type's words, as a question's ('film director', 'City')
            vocab = vocab.union(*(_words(self.types[e]) for e in chain.entity_ids if self.types.get(e)))
        found = _matches if self.forms else (lambda w, words: w in words)
        verdicts = []
        for i, (question, answer) in enumerate(candidates):
            words = _words(question)
            content = [w for w in words if w not in STOPWORDS]
            pos = answer_position(chain, answer)
            touched = {j for j, rw in enumerate(rel_words) if any(found(w, rw) for w in content)}
            incident = {pos - 1, pos} if pos is not None else set()
            scores = {
                "faithfulness": (sum(found(w, vocab) for w in content) / len(content)
                                 if content and pos is not None else 0.0),
                "multi_hop": min(len(touched), 2) / 2.0,
                "answer_focus": 1.0 if touched & incident else 0.0,
                "clarity": clarity(question, len(words), self.min_words, self.max_words),
            }
            verdicts.append(Verdict(i, question, answer, True, scores=scores, reason=weak_reason(scores)))
        return verdicts


class LLMVerifier:
    """The LLM verifier: one grouped prompt per chain, parsed per candidate.

    ``generate_fn(prompt) -> text`` runs the model (chat template applied by the caller's
    function). A candidate whose line is missing or unreadable scores 0 on every dimension, with
    the reason saying so, so model junk can never admit a candidate.
    """

    def __init__(self, generate_fn: Callable[[str], str]):
        self.generate_fn = generate_fn

    @staticmethod
    def prompt(chain, candidates: Sequence[tuple[str, str]]) -> str:
        """The grouped prompt listing the chain and every candidate (numbered from 1)."""
        lines = [f"{i + 1}. question: {q}\n   answer: {a}" for i, (q, a) in enumerate(candidates)]
        return (VERIFIER_PROMPT + "Chain:\n" + render_chain(chain.titles, chain.relations, chain.passages)
                + "\nCandidates:\n" + "\n".join(lines) + "\n")

    def judge(self, chain, candidates: Sequence[tuple[str, str]]) -> list[Verdict]:
        if not candidates:
            return []
        return parse_verdicts(self.generate_fn(self.prompt(chain, candidates)), candidates)


_OBJECT = re.compile(r"\{[^{}]*\}")
_FIELD = re.compile(r"""["']?(\w+)["']?\s*[:=]\s*("(?:[^"\\]|\\.)*"|'[^']*'|[^,}\s]+)""")


def _loose_object(text: str) -> dict:
    """key: value pairs from a JSON-ish object that json.loads refused (single quotes, True, ...)."""
    out = {}
    for key, raw in _FIELD.findall(text):
        raw = raw.strip("\"'")
        low = raw.lower()
        if low in ("true", "false", "yes", "no"):
            out[key] = low in ("true", "yes")
        else:
            try:
                out[key] = float(raw)
            except ValueError:
                out[key] = raw
    return out


def _unit(value) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return min(1.0, max(0.0, float(value)))


def parse_verdicts(text: str, candidates: Sequence[tuple[str, str]]) -> list[Verdict]:
    """Parse the verifier's per-candidate JSON(-ish) lines; junk -> scores 0 with a reason.

    Objects are matched to candidates by their ``id`` (1-based), else by order of appearance.
    Scores outside [0, 1] are clipped; a non-numeric or missing dimension makes the whole
    candidate score 0 (reason 'unreadable ...').

    Example:
        >>> out = ('{"id": 2, "faithfulness": 1, "multi_hop": 1, "answer_focus": 1, "clarity": 0.5, '
        ...        '"leak": false, "reason": "fine"}\\nI cannot judge the first one.')
        >>> [(v.scores["clarity"], v.reason) for v in parse_verdicts(out, [("q1?", "a"), ("q2?", "b")])]
        [(0.0, 'unreadable verifier output: no line for candidate 1'), (0.5, 'fine')]
    """
    objects: list[dict] = []
    for match in _OBJECT.finditer(text):
        try:
            obj = json.loads(match.group(0))
        except ValueError:
            obj = _loose_object(match.group(0))
        if isinstance(obj, dict):
            objects.append(obj)
    by_id: dict[int, dict] = {}
    unnumbered = []
    for obj in objects:
        ident = obj.get("id")
        if isinstance(ident, (int, float)) and not isinstance(ident, bool) and float(ident).is_integer() \
                and 1 <= int(ident) <= len(candidates) and int(ident) not in by_id:
            by_id[int(ident)] = obj
        elif "id" not in obj:
            unnumbered.append(obj)
    for i in range(1, len(candidates) + 1):
        if i not in by_id and unnumbered:
            by_id[i] = unnumbered.pop(0)
    verdicts = []
    for i, (question, answer) in enumerate(candidates):
        obj = by_id.get(i + 1)
        zero = {d: 0.0 for d in DIMENSIONS}
        if obj is None:
            verdicts.append(Verdict(i, question, answer, True, scores=zero,
                                    reason=f"unreadable verifier output: no line for candidate {i + 1}"))
            continue
        scores = {d: _unit(obj.get(d)) for d in DIMENSIONS}
        bad = [d for d, s in scores.items() if s is None]
        if bad:
            verdicts.append(Verdict(i, question, answer, True, scores=zero,
                                    reason=f"unreadable verifier output: {', '.join(bad)} missing or not a number"))
            continue
        leak = obj.get("leak")
        leak = leak if isinstance(leak, bool) else str(leak).strip().lower() in ("true", "yes", "1")
        reason = str(obj.get("reason", "")).strip() or "ok"
        verdicts.append(Verdict(i, question, answer, True, leak=leak, scores=scores, reason=reason))
    return verdicts


def gate(chain, candidates: Sequence[tuple[str, str] | None], verifier: Verifier, threshold: float,
         top_k: int, aggregation: str = "geometric_mean", allow_topic: bool = False,
         leak_filter: bool = True, prefilter=None, multi_hop_veto: bool = True) -> list[Verdict]:
    """Eq. 6 on all M candidates of one chain; the top k with Q > threshold are admitted (section
    3.2: "above a threshold"; a candidate exactly at the threshold is not).

    Returns one Verdict per candidate, in input order (``index`` = position). Ties in Q are broken
    by candidate order, so the gate is deterministic given the verifier. A candidate with Q = 0 (a
    leak, a vetoed multi-hop score: :func:`quality`) is never admitted, even at threshold 0. ``prefilter(chain, candidate)``
    (a rejecting Verdict or None) replaces :func:`filter_candidate`'s deterministic checks (EoG's
    topology gate passes its own).
    """
    if top_k < 0:
        raise ValueError(f"top_k must be >= 0, got {top_k!r}")
    verdicts: list[Verdict | None] = []
    survivors: list[int] = []
    for i, cand in enumerate(candidates):
        rejected = (prefilter(chain, cand) if prefilter is not None
                    else filter_candidate(chain, cand, allow_topic, leak_filter))
        verdicts.append(None if rejected is None else replace(rejected, index=i))
        if rejected is None:
            survivors.append(i)
    judged = verifier.judge(chain, [(candidates[i][0].strip(), candidates[i][1].strip()) for i in survivors])
    if len(judged) != len(survivors):
        raise ValueError(f"verifier returned {len(judged)} verdicts for {len(survivors)} candidates")
    for i, v in zip(survivors, judged):
        verdicts[i] = replace(v, index=i, q=quality(v, aggregation, multi_hop_veto), admitted=False)
    # Q = 0 (a leak, a vetoed dimension) is never admitted, even at threshold 0.
    ranked = sorted((v for v in verdicts if v.extracted and v.q > threshold and v.q > 0),
                    key=lambda v: (-v.q, v.index))
    for v in ranked:
        v.passed = True
    for v in ranked[:top_k]:
        v.admitted = True
    return verdicts
