"""Property-based tests of the trajectory and answer parsers (issue 12, "Proof").

``policy.protocol.parse_action`` / ``parse_candidate`` and ``scoring.extract_answer`` read whatever
a model generates: for any text they return a well-formed value (never raise), and what the
protocol writes (``format_candidate``, an ``<answer>`` block) reads back as written.
"""

from __future__ import annotations

import pytest

hypothesis = pytest.importorskip(
    "hypothesis", reason="hypothesis is not installed: add hypothesis to pyproject.toml's pins to run these")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from workbench.policy.protocol import (ANSWER_CLOSE, ANSWER_OPEN, QUESTION_CLOSE, QUESTION_OPEN,  # noqa: E402
                                       SEARCH_CLOSE, SEARCH_OPEN, TAGS, Action, format_candidate, parse_action,
                                       parse_candidate)
from workbench.scoring import extract_answer  # noqa: E402

# Generated text: protocol tags (whole, or cut), spaces and any characters, in any order.
pieces = st.sampled_from(TAGS) | st.sampled_from([t[:3] for t in TAGS]) | st.text(max_size=8) | st.just(" ")
texts = st.lists(pieces, max_size=20).map("".join)
plain = st.text(max_size=30).filter(lambda t: "<" not in t)  # cannot contain a tag


@settings(max_examples=300, deadline=None)
@given(texts)
def test_parse_action_always_returns_a_well_formed_action(text):
    action = parse_action(text)
    assert isinstance(action, Action) and action.kind in ("search", "answer", "invalid")
    if action.kind == "invalid":
        assert action.text == ""
    else:
        assert action.text and action.text == action.text.strip()
        closing = SEARCH_CLOSE if action.kind == "search" else ANSWER_CLOSE
        assert closing not in action.text and closing in text


@settings(max_examples=300, deadline=None)
@given(texts, plain, st.sampled_from(["search", "answer"]))
def test_the_last_complete_action_wins(prefix, query, kind):
    opening, closing = (SEARCH_OPEN, SEARCH_CLOSE) if kind == "search" else (ANSWER_OPEN, ANSWER_CLOSE)
    # the closing tags first end whatever the prefix left open (parse_action's blocks, unlike
    # extract_answer's, may hold an opening tag: "<answer><answer>x</answer>" answers "<answer>x")
    action = parse_action(prefix + ANSWER_CLOSE + SEARCH_CLOSE + opening + query + closing)
    assert action == (Action(kind, query.strip()) if query.strip() else Action("invalid"))


@settings(max_examples=300, deadline=None)
@given(texts)
def test_parse_candidate_returns_none_or_two_nonempty_strings(text):
    out = parse_candidate(text)
    assert out is None or (len(out) == 2 and all(isinstance(s, str) and s and s == s.strip() for s in out))


@settings(max_examples=300, deadline=None)
@given(plain, plain, texts)
def test_a_formatted_candidate_reads_back(question, answer, tail):
    out = parse_candidate(format_candidate(question, answer) + tail)
    if question.strip() and answer.strip():  # else a later candidate in ``tail`` may be the one read
        assert out == (question.strip(), answer.strip())


@settings(max_examples=300, deadline=None)
@given(texts | st.none())
def test_extract_answer_returns_none_or_a_stripped_string(text):
    out = extract_answer(text)
    assert out is None or (isinstance(out, str) and out == out.strip() and ANSWER_CLOSE not in out)
    if out is not None:
        assert ANSWER_OPEN in text and ANSWER_CLOSE in text


@settings(max_examples=300, deadline=None)
@given(texts, plain)
def test_the_last_answer_block_is_the_answer(prefix, answer):
    assert extract_answer(prefix + ANSWER_OPEN + answer + ANSWER_CLOSE) == answer.strip()


def test_tags_used_here_are_the_protocol_s():
    assert {QUESTION_OPEN, QUESTION_CLOSE, ANSWER_OPEN, ANSWER_CLOSE, SEARCH_OPEN, SEARCH_CLOSE} <= set(TAGS)
