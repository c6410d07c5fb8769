"""Answer scoring: the SQuAD / Search-R1 normalisation and its traps."""

from __future__ import annotations

import doctest

import pytest

from workbench import scoring
from workbench.scoring import cover_exact_match, exact_match, extract_answer, f1_score, normalize_answer


def test_docstring_examples():
    assert doctest.testmod(scoring).failed == 0


@pytest.mark.parametrize("raw, normed", [
    ("The Beatles", "beatles"),
    ("a  An THE", ""),
    ("Theatre", "theatre"),            # an article only as a whole word
    ("anthem of the sea", "anthem of sea"),
    ("U.S.A.", "usa"),                 # punctuation is deleted, not replaced by a space
    ("rock-and-roll", "rockandroll"),
    ("  New\tYork\n City ", "new york city"),
    ("Zürich", "zürich"),              # non-ASCII letters survive, lowercased
    ("ÉCOLE", "école"),
    ("Côte d’Ivoire", "côte d’ivoire"),  # typographic apostrophe kept, as Search-R1 keeps it
    ("1,000", "1000"),
])
def test_normalize_answer(raw, normed):
    assert normalize_answer(raw) == normed


def test_exact_match_traps():
    assert exact_match("the  Beatles!", ["Beatles"]) == 1.0
    assert exact_match("Beatles", "The Beatles") == 1.0            # a single gold string works
    assert exact_match("Paris", ["London", "paris"]) == 1.0        # any gold
    assert exact_match("Paris France", ["Paris"]) == 0.0
    assert exact_match(None, ["Paris"]) == 0.0
    assert exact_match("", ["Paris"]) == 0.0
    assert exact_match("the", ["Paris"]) == 0.0                    # normalises to nothing
    assert exact_match("Zurich", ["Zürich"]) == 0.0                # no accent folding (SQuAD)


@pytest.mark.parametrize("golds", [[], [""], ["the"], [" . "], None, [None], [3]])
def test_golds_without_a_usable_answer_are_an_error(golds):
    for fn in (exact_match, cover_exact_match, f1_score):
        with pytest.raises(ValueError):
            fn("x", golds)


def test_unusable_golds_are_skipped_when_another_is_usable():
    assert exact_match("Paris", ["", "Paris"]) == 1.0
    assert exact_match("", ["", "Paris"]) == 0.0  # an empty prediction never matches the empty gold


def test_cover_exact_match():
    assert cover_exact_match("I believe it is the Eiffel Tower.", ["Eiffel Tower"]) == 1.0
    assert cover_exact_match("Eiffel", ["Eiffel Tower"]) == 0.0
    assert cover_exact_match("1990", ["19"]) == 1.0  # character substring, exactly as Search-R1
    assert cover_exact_match(None, ["x"]) == 0.0


def test_f1_score():
    assert f1_score("Eiffel Tower", ["The Eiffel Tower"]) == 1.0
    assert f1_score("tower", ["Eiffel Tower"]) == pytest.approx(2 / 3)
    assert f1_score("a b c", ["c d", "b"]) == pytest.approx(2 / 3)  # "b c": best gold "b" (2/3), not "c d" (1/2)
    assert f1_score("new new york", ["new york"]) == pytest.approx(0.8)  # token counts, not sets
    assert f1_score("the", ["Paris"]) == 0.0
    assert f1_score(None, ["Paris"]) == 0.0


def test_extract_answer_reads_the_last_complete_block():
    assert extract_answer("<think>x</think><answer> Oslo </answer>") == "Oslo"
    assert extract_answer("<answer>A</answer> no, <answer>B</answer>") == "B"
    assert extract_answer("<answer>A</answer> then cut off: <answer>B") == "A"
    assert extract_answer("<answer>unclosed") is None
    assert extract_answer("</answer> stray close") is None
    assert extract_answer("<answer><answer>inner</answer>") == "inner"
    assert extract_answer("<answer>\nmulti\nline\n</answer>") == "multi\nline"
    assert extract_answer("<answer></answer>") == ""
    assert extract_answer("<ANSWER>x</ANSWER>") is None  # tags are exact, as in the protocol
    assert extract_answer("") is None and extract_answer(None) is None


def test_prompt_example_is_never_scored_when_only_generated_text_is_passed():
    prompt = "Answer inside tags, for example <answer> Beijing </answer>.\nQuestion: capital of Saffa?"
    generated = "<think>I must search.</think><search> Saffa capital </search>"
    assert extract_answer(prompt + generated) == "Beijing"  # the trap the contract avoids
    assert extract_answer(generated) is None


# ---------------------------------------------------------------- Hit@1 and set F1 (seed 004)

from workbench.scoring import hit_at_1, set_f1  # noqa: E402


def test_hit_at_1_any_member_of_the_set_counts():
    golds = ["Kavimo Rutel", "Dagiju", "Oslo"]
    assert hit_at_1("dagiju", golds) == 1.0
    assert hit_at_1("The Oslo.", golds) == 1.0  # normalisation as EM's
    assert hit_at_1("Bergen", golds) == 0.0
    assert hit_at_1("Kavimo", golds) == 0.0  # a part of a member is no hit


def test_hit_at_1_reads_only_the_top_prediction():
    assert hit_at_1(["Bergen", "Oslo"], ["Oslo"]) == 0.0
    assert hit_at_1(["Oslo", "Bergen"], ["Oslo"]) == 1.0
    assert hit_at_1([], ["Oslo"]) == 0.0


def test_set_f1_hand_computed():
    # one answer of a 4-member set: P = 1, R = 1/4, F1 = 2 * 1/4 / (5/4) = 0.4
    assert set_f1("a1", ["a1", "a2", "a3", "a4"]) == pytest.approx(0.4)
    # P = {a1, a2, x}, A = {a1, a2, a3, a4}: P 2/3, R 1/2, F1 = 2 * (1/3) / (7/6) = 4/7
    assert set_f1(["a1", "a2", "x"], ["a1", "a2", "a3", "a4"]) == pytest.approx(4 / 7)
    # duplicates count once on both sides; the exact set scores 1
    assert set_f1(["a1", "A1", "a2"], ["a2", "a1", "a1"]) == pytest.approx(1.0)
    assert set_f1(["x"], ["a1"]) == 0.0


def test_set_f1_equals_hit_at_1_on_a_singleton_set_and_bounds_it():
    for pred in ("Oslo", "Bergen", None):
        assert set_f1(pred, ["Oslo"]) == hit_at_1(pred, ["Oslo"])
    assert set_f1("Oslo", ["Oslo", "Bergen"]) < hit_at_1("Oslo", ["Oslo", "Bergen"])


def test_set_metrics_refuse_an_unusable_answer_set():
    for fn in (hit_at_1, set_f1):
        with pytest.raises(ValueError, match="no usable gold"):
            fn("x", [])
        with pytest.raises(ValueError, match="no usable gold"):
            fn("x", ["the"])
