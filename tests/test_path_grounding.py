"""Eq. 8's path holds only entities grounded in the trajectory's retrieved passages (seed 000,
section 3.3), for the rule extractor and the LLM extractor alike (issue 40).

The LLM extractor is driven here by a scripted model: a deterministic generation function that
replies what an extractor shown the gold chain would write (every title it knows), so the tests
check what any reply can put on the path. The real smoke policy drives it in test_llm_judges.py.
"""

from __future__ import annotations

from types import SimpleNamespace

from hypothesis import given, settings
from hypothesis import strategies as st

from workbench.method.llm_judges import LLMPathExtractor
from workbench.method.loop import answer_candidates, extraction_item, score_trajectory
from workbench.method.path_support import EvidenceGraph, PathSupportParams, Record
from workbench.policy.rollout import Trajectory
from test_eog_graph import con, graph_policy  # noqa: F401 (fixtures: the overfitted graph-tool policy)

TITLES = {1: "Ann", 2: "Rome", 3: "Italy", 9: "Noise"}
PARAMS = PathSupportParams()  # tau_path 0.5


class ScriptedModel:
    """A generation backend that answers every prompt with ``reply`` and records the prompts."""

    def __init__(self, reply):
        self.reply, self.prompts = reply, []

    def chat_prompt(self, text):
        return text

    def generate(self, prompts, **kwargs):
        self.prompts += prompts
        return [SimpleNamespace(text=self.reply(p) if callable(self.reply) else self.reply) for p in prompts]


def trajectory(passages: dict[int, str], answer: str, queries=("Ann country",)) -> Trajectory:
    """A finished trajectory that retrieved ``passages`` (owner -> text), one search each."""
    blocks = [f'\n\n<information>Doc 1(Title: "{TITLES.get(e, e)}") {text}</information>\n\n'
              for e, text in passages.items()]
    text = "".join(f"<search> {q} </search>{b}" for q, b in zip(queries, blocks)) + f"<answer> {answer} </answer>"
    return Trajectory(0, 0, "p", [], text=text, queries=list(queries), entity_ids=list(passages),
                      answer=answer, retrieved=blocks, finished_reason="answer")


def llm_path(model, traj, chain):
    return LLMPathExtractor(model, max_new_tokens=8).extract_many(
        [extraction_item("In which country was the author born?", traj, chain, TITLES)])[0]


def test_an_ungrounded_gold_entity_cannot_lift_s_path_over_tau_with_the_llm_extractor():
    # G_t supports Ann -> Rome -> Italy; the trajectory found Ann's passage only, which names Italy
    graph = EvidenceGraph.from_records([Record([1, 2, 3], [(1, "Ann was born in Rome."), (2, "Rome is in Italy.")])],
                                       TITLES, PARAMS)
    assert graph.path_support([1, 2, 3]).passed and not graph.path_support([1, 3]).passed
    traj = trajectory({1: "Ann lived in Italy."}, "Italy")
    model = ScriptedModel("Ann\nRome\nItaly")  # an extractor that read the gold chain names Rome
    path = llm_path(model, traj, [1, 2, 3])
    assert "Rome" not in model.prompts[0].split("Candidates:")[1]  # the prompt lists no gold title
    assert path == [1, 3]  # Rome was never retrieved nor named by a retrieved passage
    score = score_trajectory(traj, ["Italy"], answer_candidates(traj, [1, 2, 3], TITLES), graph, path=path)
    assert score.r_ans == 1.0 and score.s_path < PARAMS.tau_path and not score.passed
    # a path handed in directly is filtered the same way
    assert score_trajectory(traj, ["Italy"], answer_candidates(traj, [1, 2, 3], TITLES), graph,
                            path=[1, 2, 3]).path == [1, 3]


def test_a_lucky_answer_the_search_never_found_ends_no_path_with_the_rule_extractor():
    graph = EvidenceGraph.from_records([Record([1, 3], [(1, "Ann was born in Italy.")])], TITLES, PARAMS)
    assert graph.path_support([1, 3]).passed
    traj = trajectory({1: "Ann was a writer."}, "Italy")  # correct, but nothing it read names Italy
    score = score_trajectory(traj, ["Italy"], answer_candidates(traj, [1, 3], TITLES), graph)
    assert score.r_ans == 1.0 and score.path == [1] and score.s_path == 0.0 and not score.passed
    found = trajectory({1: "Ann was born in Italy."}, "Italy")  # the same answer, found: it counts
    assert score_trajectory(found, ["Italy"], answer_candidates(found, [1, 3], TITLES), graph).passed


# ---------------------------------------------------------------- property over random trajectories

WORDS = st.sampled_from(["lorem", "ipsum", "dolor", "sit", "amet"])


@st.composite
def cases(draw):
    """A universe of entities (titles of one or two tokens unique to them), a trajectory that
    retrieved some passages (texts mixing title tokens and filler), a gold chain, queries, an answer,
    and the LLM extractor's reply (any titles, in any order)."""
    n = draw(st.integers(2, 8))
    titles = {e: (f"a{e}" if draw(st.booleans()) else f"a{e} b{e}") for e in range(1, n + 1)}
    tokens = [t for title in titles.values() for t in title.split()]
    owners = draw(st.lists(st.sampled_from(sorted(titles)), max_size=4))
    texts = [" ".join(draw(st.lists(st.one_of(st.sampled_from(tokens), WORDS), max_size=8)))
             for _ in range(draw(st.integers(0, 3)))]
    chain = draw(st.lists(st.sampled_from(sorted(titles)), max_size=4, unique=True))
    queries = [" ".join(draw(st.lists(st.sampled_from(tokens), max_size=3))) for _ in range(draw(st.integers(0, 3)))]
    answer = draw(st.one_of(st.none(), st.sampled_from(list(titles.values()))))
    reply = "\n".join(draw(st.lists(st.sampled_from(list(titles.values())), max_size=6)))
    edges = draw(st.lists(st.tuples(st.sampled_from(sorted(titles)), st.sampled_from(sorted(titles))), max_size=10))
    return titles, owners, texts, chain, queries, answer, reply, edges


def appears(title: str, texts: list[str]) -> bool:
    """The oracle: the title's tokens occur contiguously in one retrieved text."""
    want = title.lower().split()
    for text in texts:
        words = text.lower().split()
        if any(words[i:i + len(want)] == want for i in range(len(words) - len(want) + 1)):
            return True
    return False


@settings(max_examples=300, deadline=None)
@given(cases())
def test_no_entity_absent_from_the_retrieved_passages_is_ever_on_the_path(case):
    titles, owners, texts, chain, queries, answer, reply, edges = case
    traj = Trajectory(0, 0, "p", [], text=" ".join(texts), queries=queries, entity_ids=owners, answer=answer,
                      retrieved=texts)
    graph = EvidenceGraph({(u, v): 1.0 for u, v in edges if u != v}, PARAMS)
    candidates = answer_candidates(traj, chain, titles)
    rule = score_trajectory(traj, [answer or "x"], candidates, graph).path
    model = ScriptedModel(reply)
    llm = LLMPathExtractor(model, max_new_tokens=8).extract_many(
        [extraction_item("q?", traj, chain, titles)])[0]
    scored = score_trajectory(traj, [answer or "x"], candidates, graph, path=llm).path
    for path in (rule, llm, scored):
        for e in path:
            assert e in owners or appears(titles[e], texts), (e, titles[e], path)
    # the prompt lists the titles of retrieved passages only, never a gold-chain entity otherwise
    listed = model.prompts[0].split("Candidates:\n")[1].splitlines()
    assert set(listed) <= {titles[e] for e in owners}


def test_what_a_graph_tool_returned_grounds_the_path_too(graph_policy):
    """EoG's graph tools insert triples as DynaSearcher's KG tool does: what they returned is
    retrieved (``Trajectory.retrieved``), so the entities it names may end a path (issue 40)."""
    from test_eog_graph import QUESTION
    from workbench.policy.rollout import rollout

    policy, tools, search = graph_policy
    (t,) = rollout(policy, search, [QUESTION], 1, temperature=0.0, max_new_tokens=32, max_total_tokens=400,
                   graph=tools)
    assert len(t.retrieved) == len(t.kg_queries) == 2 and "Dagiju; Velor" in t.retrieved[1]
    titles = {1: "Kavimo Rutel", 2: "Dagiju", 3: "Lorentia", 5: "Velor"}
    assert answer_candidates(t, [1, 2, 3, 5], titles) == {1: "Kavimo Rutel", 2: "Dagiju", 5: "Velor"}
