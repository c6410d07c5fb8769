"""The LLM verifier (Eq. 6) and path extractor (Eq. 8), batched through a real policy (issue 16)."""

from __future__ import annotations

import pytest

from workbench import config
from workbench.config import preset
from workbench.method import llm_judges
from workbench.method.gate import gate
from workbench.method.llm_judges import BatchedLLMVerifier, LLMPathExtractor, parse_path
from workbench.method.memory import ChainView
from workbench.method.prompts import EXTRACTOR_PROMPT, VERIFIER_PROMPT
from workbench.policy.model import Policy, tiny_model
from workbench.policy.tokenizer import train_tokenizer

CHAINS = [ChainView(i, f"h{i}", [1, 2, 3], ["Ann", "Rome", "Italy"], ["born in", "located in"],
                    [f"Ann was born in Rome ({i}).", "Rome is in Italy.", "Italy is a country."]) for i in range(3)]
GOOD = ("In which country is the city where the author was born?", "Italy")


@pytest.fixture(scope="module")
def policy():
    tok = train_tokenizer([VERIFIER_PROMPT, EXTRACTOR_PROMPT, "Ann was born in Rome. Rome is in Italy."] * 5,
                          vocab_size=500)
    return Policy(tiny_model(preset("smoke").backbone, tok, seed=0), tok, device="cpu")


class CountingPolicy:
    """The real policy, with its generate calls and batch sizes recorded."""

    def __init__(self, policy):
        self.policy, self.batches = policy, []

    def chat_prompt(self, text):
        return self.policy.chat_prompt(text)

    def generate(self, prompts, **kw):
        self.batches.append(len(prompts))
        return self.policy.generate(prompts, **kw)


def test_names_match_the_config():
    assert config.PATH_EXTRACTORS == llm_judges.PATH_EXTRACTORS


def test_verifier_judges_a_rounds_chains_in_one_batch(policy):
    counting = CountingPolicy(policy)
    verifier = BatchedLLMVerifier(counting, max_new_tokens=8)
    cands = [[GOOD, ("Where is Rome?", "Italy"), None], [GOOD], [None]]  # leaks and failures never reach it
    verifier.prefetch([(c, k, False, True) for c, k in zip(CHAINS, cands)])
    assert counting.batches == [2]  # chains 0 and 1 have a survivor; chain 2 none
    verdicts = [gate(c, k, verifier, 0.5, 1) for c, k in zip(CHAINS, cands)]
    assert counting.batches == [2]  # gate read the cached replies
    assert verdicts[0][1].reason.startswith("leak") and verdicts[0][2].reason == "extraction failed"
    # a random model's reply is junk: it scores 0 and admits nothing (never a free pass)
    assert not any(v.admitted for vs in verdicts for v in vs)
    assert verdicts[0][0].reason.startswith("unreadable verifier output")
    gate(CHAINS[0], [("Which nation holds the birthplace of the writer?", "Italy")], verifier, 0.5, 1)
    assert counting.batches == [2, 1]  # not prefetched: generated alone


def test_extractor_runs_one_batch_and_grounds_every_entity(policy):
    """The real policy's replies, one batch: every entity on a path is the entity of a passage the
    trajectory retrieved or named by one (issue 40: not merely one of the chain's titles)."""
    from workbench.method.loop import extraction_item
    from workbench.policy.rollout import Trajectory

    counting = CountingPolicy(policy)
    extractor = LLMPathExtractor(counting, max_new_tokens=8)
    titles = {1: "Ann", 2: "Rome", 3: "Italy"}
    found = ["<information>Doc 1(Title: Ann) Ann lived in Italy.</information>"]
    trajs = [Trajectory(0, 0, "p", [], text="<search> Ann </search>" + found[0], queries=["Ann"], entity_ids=[1],
                        answer="Italy", retrieved=found),
             Trajectory(1, 0, "p", [], text="<search> Rome </search>", queries=["Rome"], answer="Nobody")]
    paths = extractor.extract_many([extraction_item(q, t, [1, 2, 3], titles) for q, t in zip(("Where?", "Who?"), trajs)])
    assert counting.batches == [2]
    assert paths[0][-1] == 3 and set(paths[0]) <= {1, 3} and paths[1] == []  # Rome: never retrieved nor named


def test_the_paper_preset_says_what_the_llm_call_does():
    """Seed 000 has one LLM call judge correctness and extract the path; here R_ans is exact match
    and the extractor's call extracts only: the stated value must not claim the paper's one call
    (issue 40)."""
    stated = config.PAPER_VALUES["method.path_extractor"][1]
    assert "exact match" in stated and "same LLM call that judges correctness" not in stated
    assert "exact match" in llm_judges.__doc__


def test_parse_path_rules():
    titles = {1: "Ann", 2: "Rome", 3: "Italy", 4: "The Beatles"}
    assert parse_path("1. Ann\n2. Rome\n3. Italy", titles, "Italy") == [1, 2, 3]
    assert parse_path("Italy\nAnn\nRome", titles, "Italy") == [1, 2, 3]  # the answer ends the path
    assert parse_path("- beatles\nParis\nAnn", titles, None) == [4, 1]  # normalised titles; unknown dropped
    assert parse_path("", titles, "nowhere") == []


def test_a_round_runs_with_both_llm_judges(tmp_path):
    from workbench import store
    from workbench.method.train import ensure_world, train

    db = tmp_path / "s.duckdb"
    con = store.connect(db)
    ensure_world(con, preset("smoke"))
    con.close()
    rows = train(str(db), run="judges", method="coevokg", preset="smoke", steps=1, progress=False, log=None,
                 overrides={"method.verifier": "llm", "method.path_extractor": "llm",
                            "method.verifier_max_new_tokens": 16, "method.extractor_max_new_tokens": 16})
    assert len(rows) == 1 and rows[0]["seed_fallback_rate"] <= 1.0


@pytest.mark.parametrize("method, solver_reward, built", [("search_r1", "", False), ("coevokg", "", True),
                                                          ("coevokg", "exact_match", False)])
def test_the_llm_extractor_runs_only_for_a_reward_that_reads_s_path(tmp_path, monkeypatch, method, solver_reward,
                                                                     built):
    """Search-R1's (and any reward's without S_path) rounds pay no extractor batch; its S_path
    metrics come from the deterministic extraction."""
    from workbench import store
    from workbench.method import loop
    from workbench.method.train import ensure_world, train

    made = []

    class Recording(LLMPathExtractor):
        def __init__(self, *args, **kwargs):
            made.append(self)
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(loop, "LLMPathExtractor", Recording)
    db = tmp_path / "s.duckdb"
    con = store.connect(db)
    ensure_world(con, preset("smoke"))
    con.close()
    rows = train(str(db), run=f"extractor-{method}-{solver_reward or 'own'}", method=method, preset="smoke", steps=1, progress=False, log=None,
                 overrides={"method.path_extractor": "llm", "method.extractor_max_new_tokens": 8,
                            "method.solver_reward": solver_reward, "method.val_questions": 1})
    assert bool(made) == built and 0 <= rows[0]["s_path_mean"] <= 1
