"""Eq. 6 (the quality gate), the verifiers, stored verdicts, and the proposer's parts (Eq. 2)."""

import doctest
import json
import math

import pytest

from workbench import store
from workbench.method import gate as gate_module
from workbench.method import proposer as proposer_module
from workbench.method.gate import (LLMVerifier, StructuralVerifier, Verdict, filter_candidate, gate,
                                   parse_verdicts, quality)
from workbench.method.loop import OpenGate
from workbench.method.memory import ChainView
from workbench.method.proposer import parse_candidates, proposer_prompts, proposer_rewards
from workbench.method.rewards import GroupOutcome, Schedule
from workbench.method.run_store import store_verdicts

CHAIN = ChainView(5, "h", [1, 2, 3], ["Ann", "Rome", "Italy"], ["born in", "located in"],
                  ["Ann is an author born in Rome.", "Rome is a city located in Italy.", "Italy is a country."])
GOOD = ("In which country is the city where the author was born located?", "Italy")
ONE_HOP = ("Which city is the author born in?", "Rome")
VAGUE = ("What is the country?", "Italy")


def test_doctests():
    assert doctest.testmod(gate_module).failed == 0
    assert doctest.testmod(proposer_module).failed == 0


@pytest.mark.parametrize("candidate, reason, leak", [
    (None, "extraction failed", False),
    (("  ", "Italy"), "empty", False),
    (("Which country?", ""), "empty", False),
    (("In which country is the city of the author?", "France"), "answer not in chain", False),
    (("Which country contains the city where ANN was born?", "Italy"), "leak: names chain entity 'Ann'", True),
    (("Which country holds rome?", "Italy"), "leak: names chain entity 'Rome'", True),
    (("Which country is Italy?", "Italy"), "leak: answer in question", True),
    (("Which country is the Italy of Europe?", "the italy"), "leak: answer in question", True),
    (("Tell me the country of the author's city.", "Italy"), "not one wh-question", False),
    (("Who is the author? Where was the author born?", "Rome"), "not one wh-question", False),
    (("Is the author's city in a country?", "Italy"), "not one wh-question", False),
])
def test_filter_rejections(candidate, reason, leak):
    v = filter_candidate(CHAIN, candidate)
    assert v is not None and v.reason == reason and v.leak is leak
    assert v.extracted is (reason not in ("extraction failed", "empty"))


def test_filter_passes_and_whole_words():
    assert filter_candidate(CHAIN, GOOD) is None
    # 'Romeo' and 'Annals' contain titles but do not name them
    assert filter_candidate(CHAIN, ("Which country is home to the Romeo in the Annals?", "Italy")) is None
    # the answer may be any chain entity (Eq. 2), the first one included
    assert filter_candidate(CHAIN, ("Who was born in the city located in the country?", "ann")) is None


def test_structural_verifier_scores_by_hand():
    v = StructuralVerifier().judge(CHAIN, [GOOD, ONE_HOP, VAGUE])
    # GOOD: content words country, city, author, born, located: all in the chain's passages/labels -> 1;
    # touches 'born in' and 'located in' -> multi_hop 1; 'located in' is incident to Italy -> focus 1;
    # 12 words, one '?' at the end -> clarity 1
    assert v[0].scores == {"faithfulness": 1.0, "multi_hop": 1.0, "answer_focus": 1.0, "clarity": 1.0}
    # ONE_HOP: touches only 'born in' -> multi_hop 1/2; Q = (1 * .5 * 1 * 1) ** (1/4) = 0.840896
    assert v[1].scores["multi_hop"] == 0.5 and v[1].scores["answer_focus"] == 1.0
    assert quality(v[1]) == pytest.approx(0.5 ** 0.25)
    # VAGUE: touches no relation -> multi_hop 0 and answer_focus 0 -> Q 0
    assert v[2].scores["multi_hop"] == 0.0 and quality(v[2]) == 0.0
    assert v[2].reason.startswith("weak: multi_hop=0.00")


def test_structural_verifier_is_deterministic():
    cands = [GOOD, ONE_HOP, VAGUE]
    assert StructuralVerifier().judge(CHAIN, cands) == StructuralVerifier().judge(CHAIN, cands)
    assert gate(CHAIN, cands, StructuralVerifier(), 0.5, 2) == gate(CHAIN, cands, StructuralVerifier(), 0.5, 2)


def test_quality_aggregations():
    v = Verdict(0, "q?", "a", True, scores={"faithfulness": 0.9, "multi_hop": 0.4, "answer_focus": 1.0,
                                             "clarity": 0.5})
    # geometric: (0.9 * 0.4 * 1 * 0.5) ** .25 = 0.18 ** .25 = 0.651349; mean 2.8 / 4 = 0.7; min 0.4
    assert quality(v) == pytest.approx(0.18 ** 0.25)
    assert quality(v, "mean") == pytest.approx(0.7)
    assert quality(v, "min") == 0.4
    v.leak = True  # Eq. 6's 1[no leak]
    assert quality(v) == 0.0
    with pytest.raises(ValueError, match="geometric_mean"):
        quality(v, "max")


def test_gate_top_k_and_threshold():
    cands = [VAGUE, ONE_HOP, None, GOOD, ("Where was Ann born?", "Rome")]
    out = gate(CHAIN, cands, StructuralVerifier(), threshold=0.5, top_k=1)
    assert [v.index for v in out] == [0, 1, 2, 3, 4]
    assert [v.admitted for v in out] == [False, False, False, True, False]  # GOOD has Q = 1
    assert out[3].q == 1.0 and out[1].q == pytest.approx(0.5 ** 0.25)
    assert out[2].reason == "extraction failed" and out[4].leak and out[4].q == 0.0
    two = gate(CHAIN, cands, StructuralVerifier(), threshold=0.5, top_k=2)
    assert [v.index for v in two if v.admitted] == [1, 3]
    # a threshold above ONE_HOP's 0.8409 admits GOOD only; threshold 0 still never admits Q = 0
    assert [v.index for v in gate(CHAIN, cands, StructuralVerifier(), 0.9, 5) if v.admitted] == [3]
    assert [v.index for v in gate(CHAIN, cands, StructuralVerifier(), 0.0, 5) if v.admitted] == [1, 3]


def test_a_candidate_exactly_at_the_threshold_is_not_admitted():
    """Section 3.2: only candidates scoring *above* the threshold are retained (issue 40)."""
    out = gate(CHAIN, [GOOD, ONE_HOP], StructuralVerifier(), threshold=1.0, top_k=2)
    assert out[0].q == 1.0 and not out[0].passed and not out[0].admitted
    at = gate(CHAIN, [ONE_HOP], StructuralVerifier(), threshold=0.5 ** 0.25, top_k=1)[0]
    assert at.q == 0.5 ** 0.25 and not at.passed
    assert gate(CHAIN, [ONE_HOP], StructuralVerifier(), threshold=0.84, top_k=1)[0].admitted


def test_the_multi_hop_veto_is_a_named_setting_of_ours():
    """A zero multi-hop score vetoes (Q = 0) only under method.gate_multi_hop_veto (ours, on by
    default); Eq. 6 itself vetoes leaks only (issue 40)."""
    from workbench.config import MethodConfig

    assert MethodConfig().gate_multi_hop_veto is True
    flat = Verdict(0, "q", "a", True, scores={"faithfulness": 1, "multi_hop": 0, "answer_focus": 1, "clarity": 1})
    assert quality(flat, "mean") == 0.0 and quality(flat, "mean", multi_hop_veto=False) == 0.75
    one_relation = ("Which city is the author born in?", "Rome")  # touches one relation: multi_hop 0.5
    bare = ("What is the birthplace of the author?", "Rome")  # touches none: multi_hop 0
    judged = StructuralVerifier().judge(CHAIN, [bare])[0]
    assert judged.scores["multi_hop"] == 0.0
    assert not gate(CHAIN, [bare], StructuralVerifier(), 0.5, 1, "mean")[0].admitted
    assert gate(CHAIN, [bare, one_relation], StructuralVerifier(), 0.0, 2, "mean",
                multi_hop_veto=False)[0].q == quality(judged, "mean", multi_hop_veto=False) > 0


class CountingVerifier:
    """A real verifier wrapper that records how many grouped calls the gate made."""

    def __init__(self):
        self.calls = []

    def judge(self, chain, candidates):
        self.calls.append(list(candidates))
        return StructuralVerifier().judge(chain, candidates)


def test_gate_makes_one_grouped_call_for_survivors():
    verifier = CountingVerifier()
    gate(CHAIN, [GOOD, None, ONE_HOP, ("Where was Ann born?", "Rome")], verifier, 0.5, 1)
    assert verifier.calls == [[GOOD, ONE_HOP]]


# A verifier model's raw reply: chatter, a JSON line, a JSON-ish line (single quotes, True, '='),
# an out-of-range score, and no line for the fourth candidate.
CANNED = """Sure! Here are my judgements.
{"id": 1, "faithfulness": 0.9, "multi_hop": 1, "answer_focus": 0.8, "clarity": 1.0, "leak": false, "reason": "two hops, clear"}
{'id': 2, 'faithfulness': 0.7, 'multi_hop': 0.5, answer_focus=1, 'clarity': 7, 'leak': True, 'reason': 'names the city'}
{"id": 3, "faithfulness": "high", "multi_hop": 1, "answer_focus": 1, "clarity": 1}
That is all."""


def test_llm_verifier_parses_canned_output():
    cands = [GOOD, ONE_HOP, VAGUE, ("Which country is it?", "Italy")]
    prompts = []

    def generate(prompt):
        prompts.append(prompt)
        return CANNED

    out = LLMVerifier(generate).judge(CHAIN, cands)
    assert len(prompts) == 1  # all candidates in ONE grouped call
    for i, (q, a) in enumerate(cands, 1):
        assert f"{i}. question: {q}" in prompts[0] and f"answer: {a}" in prompts[0]
    assert "--born in-->" in prompts[0]
    assert out[0].scores == {"faithfulness": 0.9, "multi_hop": 1.0, "answer_focus": 0.8, "clarity": 1.0}
    assert out[0].reason == "two hops, clear" and not out[0].leak
    # (0.9 * 1 * 0.8 * 1) ** .25 = 0.72 ** .25
    assert quality(out[0]) == pytest.approx(0.72 ** 0.25)
    assert out[1].leak and out[1].scores["clarity"] == 1.0 and quality(out[1]) == 0.0  # 7 clipped to 1
    assert out[2].scores == dict.fromkeys(out[2].scores, 0.0) and "faithfulness" in out[2].reason
    assert out[3].reason == "unreadable verifier output: no line for candidate 4" and quality(out[3]) == 0.0


def test_llm_verifier_junk_and_unnumbered():
    junk = parse_verdicts("I refuse. {not json at all}", [GOOD, ONE_HOP])
    assert all(quality(v) == 0.0 and v.reason.startswith("unreadable") for v in junk)
    line = '{"faithfulness": 1, "multi_hop": 1, "answer_focus": 1, "clarity": 1, "leak": "no"}'
    plain = parse_verdicts(line + "\n" + line.replace('"clarity": 1', '"clarity": 0.5'), [GOOD, ONE_HOP])
    assert [v.scores["clarity"] for v in plain] == [1.0, 0.5] and not plain[0].leak
    assert parse_verdicts('{"id": 1, "faithfulness": NaN}', [GOOD])[0].q == 0.0


def test_llm_verifier_through_gate():
    reply = CANNED.replace('"id": 1', '"id": 2').replace("'id': 2", "'id': 1")  # first candidate leaks now
    out = gate(CHAIN, [GOOD, ONE_HOP], LLMVerifier(lambda p: reply), 0.5, 1)
    assert out[0].leak and not out[0].admitted
    assert out[1].admitted and out[1].q == pytest.approx(0.72 ** 0.25)


def test_store_verdicts():
    con = store.connect(":memory:")
    out = gate(CHAIN, [GOOD, None, ONE_HOP], StructuralVerifier(), 0.5, 1)
    ids = store_verdicts(con, "r", 3, CHAIN.chain_id, out, rewards=[0.8, -0.1, None], p_s=[0.5, None, None])
    assert ids == [0, 1, 2]
    rows = con.execute("SELECT candidate_id, run, round, chain_id, idx, extracted, admitted, scores, reason, p_s, "
                       "reward FROM candidates ORDER BY candidate_id").fetchall()
    assert rows[0][:7] == (0, "r", 3, 5, 0, True, True)
    assert json.loads(rows[0][7]) == {"answer_focus": 1.0, "clarity": 1.0, "faithfulness": 1.0, "multi_hop": 1.0}
    assert rows[0][9:] == (0.5, 0.8)
    assert rows[1][5:7] == (False, False) and rows[1][8] == "extraction failed" and rows[1][10] == -0.1
    assert rows[2][9] is None and rows[2][10] is None
    assert store_verdicts(con, "r", 3, 5, out)[0] == 3  # ids continue
    with pytest.raises(ValueError, match="rewards has 1 values for 3"):
        store_verdicts(con, "r", 3, 5, out, rewards=[1.0])
    assert con.execute("SELECT count(*) FROM candidates").fetchall() == [(6,)]


def test_proposer_prompts_and_parsing():
    prompts = proposer_prompts(lambda u: f"<|user|>{u}<|assistant|>", [CHAIN, CHAIN], m=2)
    assert len(prompts) == 4 and prompts[0] == prompts[1]
    assert "[1] Ann: Ann is an author born in Rome." in prompts[0] and "--located in-->" in prompts[0]
    assert parse_candidates(["<question> Who? </question> <answer> Rome </answer>", "<question></question>"
                             "<answer>x</answer>", ""]) == [("Who?", "Rome"), None, None]
    with pytest.raises(ValueError):
        proposer_prompts(str, [CHAIN], m=0)


def test_proposer_rewards():
    verdicts = gate(CHAIN, [None, GOOD, ONE_HOP, ("Where was Ann born?", "Rome")], StructuralVerifier(), 0.5, 1)
    sched = Schedule(step=3, total_steps=10, p_start=0.7, p_end=0.4, sigma=0.2)
    two_of_eight = GroupOutcome((True, True) + (False,) * 6)
    r = proposer_rewards(verdicts, {1: two_of_eight}, sched, extraction_penalty=-0.1)
    # failed extraction -> penalty; admitted and posed -> Eq. 10 at p_s .25, t 3 = exp(-1.62);
    # extracted but not admitted (beyond top k, or leaking) -> excluded
    assert r[0] == -0.1 and r[1] == pytest.approx(math.exp(-1.62)) and r[2:] == [None, None]
    assert proposer_rewards(verdicts, {1: two_of_eight}, sched, -0.1, reward="ssp_adversarial")[1] == 0.75
    assert proposer_rewards(verdicts, {}, sched, -0.1)[1] is None  # admitted but not posed
    with pytest.raises(ValueError, match="did not admit"):
        proposer_rewards(verdicts, {2: two_of_eight}, sched, -0.1)
    with pytest.raises(ValueError, match="unknown proposer reward"):
        proposer_rewards(verdicts, {}, sched, -0.1, reward="nope")
    # penalize_rejected (ours): the leaking candidate failed the bar -> penalty; ONE_HOP passed the bar
    # (Q 0.84 >= 0.5) and is only beyond top k -> still excluded
    assert [v.passed for v in verdicts] == [False, True, True, False]
    r = proposer_rewards(verdicts, {1: two_of_eight}, sched, -0.1, penalize_rejected=True)
    assert r[0] == -0.1 and r[1] == pytest.approx(math.exp(-1.62)) and r[2:] == [None, -0.1]


def test_allow_topic_admits_the_first_entity_but_never_the_answer_or_later_ones():
    from workbench.method.gate import filter_candidate
    from workbench.method.memory import ChainView

    c = ChainView(0, "h", [1, 2, 3], ["Ann", "Rome", "Italy"], ["born in", "located in"], ["", "", ""])
    q = ("In which country was Ann born?", "Italy")
    assert filter_candidate(c, q).reason == "leak: names chain entity 'Ann'"  # the paper's rule
    assert filter_candidate(c, q, allow_topic=True) is None
    assert filter_candidate(c, ("Which city in Italy was Ann born in?", "Rome"), allow_topic=True).leak
    assert filter_candidate(c, ("Who was born in Rome?", "Ann"), allow_topic=True).leak


@pytest.mark.parametrize("aggregation", ["mean", "geometric_mean", "min"])
def test_ssp_open_gate_admits_under_every_aggregation(aggregation):
    """OpenGate (SSP's verifier) scores the gate's own dimensions, so its candidates pass under
    every aggregation and threshold (it once scored 'single_answer' while the gate read
    'answer_focus', and admitted nothing under geometric_mean or min)."""
    chain = ChainView(-1, "", [1], ["Ann"], [], ["Ann was born in Rome."])
    verdicts = gate(chain, [("Who was born in Rome?", "Ann")], OpenGate(), 0.99, 1, aggregation)
    assert verdicts[0].admitted and verdicts[0].q == 1.0


def test_ssp_runs_without_the_leak_filter_that_c1_adds():
    """Section 4.5: the no-leakage gate is part of what C1 adds to SSP, so SSP's candidates may leak."""
    from workbench.method.methods import method_spec

    chain = ChainView(-1, "", [1], ["Ann"], [], ["Ann was born in Rome."])
    leaky = [("Who is Ann, born in Rome?", "Ann")]
    assert not gate(chain, leaky, OpenGate(), 0.5, 1)[0].admitted
    assert gate(chain, leaky, OpenGate(), 0.5, 1, leak_filter=False)[0].admitted
    assert not method_spec("ssp").leak_filter and method_spec("c1").leak_filter


def test_the_verifier_vocabulary_counts_word_forms_then_entity_types():
    """method.verifier_vocabulary (ours): 'exact' as before; 'forms' lets 'director' touch
    `directed by`, turning a one-relation reading into a two-hop one; 'forms_types' also counts the
    chain nodes' entity types ('university') as faithful words."""
    chain = ChainView(0, "", [1, 2, 3], ["Kavimo", "Ann Roe", "Uni of Bel"], ["directed by", "educated at"],
                      ["Kavimo was released in 1990.", "Ann Roe grew up in Bel.", "Uni of Bel has a library."])
    cand = [("At which university was the director of Kavimo educated?", "Uni of Bel")]
    types = {1: "film", 2: "person", 3: "university"}
    exact, forms, typed = (StructuralVerifier(vocabulary=v, types=types).judge(chain, cand)[0].scores
                           for v in ("exact", "forms", "forms_types"))
    assert (exact["multi_hop"], forms["multi_hop"], typed["multi_hop"]) == (0.5, 1.0, 1.0)
    assert (exact["faithfulness"], forms["faithfulness"], typed["faithfulness"]) == (0.5, 0.75, 1.0)
    assert [gate(chain, cand, StructuralVerifier(vocabulary=v, types=types), 0.95, 1, allow_topic=True)[0].admitted
            for v in ("exact", "forms", "forms_types")] == [False, False, True]
    assert StructuralVerifier().judge(chain, cand) == StructuralVerifier(vocabulary="exact", types=types).judge(chain, cand)
    with pytest.raises(ValueError, match="method.verifier_vocabulary: 'stems'"):
        StructuralVerifier(vocabulary="stems")
    with pytest.raises(ValueError, match="needs the entities' types"):
        StructuralVerifier(vocabulary="forms_types")
    # an imported store's types: some missing, some capitalised or of several words
    imported = StructuralVerifier(vocabulary="forms_types", types={1: None, 2: "Person", 3: "Public University"})
    assert imported.judge(chain, cand)[0].scores["faithfulness"] == 1.0


def test_the_loop_reads_the_types_from_the_store_and_config_checks_the_name():
    from workbench.config import preset
    from workbench.method.loop import make_verifier

    con = store.connect(":memory:")
    con.execute("INSERT INTO entities VALUES (1, 'Kavimo', 'film', 'entity', 'test'), (3, 'Uni of Bel', 'university', 'entity', 'test')")
    assert make_verifier("structural", None, vocabulary="forms_types", con=con).types == {1: "film", 3: "university"}
    assert make_verifier("structural", None).types is None
    con.execute("INSERT INTO entities VALUES (4, 'Imported', NULL, 'entity', 'kilt')")
    assert 4 not in make_verifier("structural", None, vocabulary="forms_types", con=con).types
    assert type(make_verifier("open", None, vocabulary="forms")).__name__ == "OpenGate"  # matches no words
    assert preset("tiny").method.verifier_vocabulary == "forms_types"  # the default since 2026-12-02
    assert preset("paper").method.verifier_vocabulary == "exact"  # its LLM verifier reads the words itself
    with pytest.raises(ValueError, match="config field 'method.verifier_vocabulary': expected one of"):
        preset("tiny", **{"method.verifier_vocabulary": "stems"})
