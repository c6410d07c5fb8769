"""Dr. Free's information-gain proposer reward (seed 002, Eq. 5; issue 17): the shortcut contexts,
the masked teacher-forced likelihood checked by hand, the gain's positivity rule, the registry
entry and one smoke round with ``method.proposer_reward=dr_free``."""

import dataclasses
import doctest

import pytest
import torch

from workbench.config import preset
from workbench.method import drfree
from workbench.method.memory import ChainView
from workbench.method.rewards import PROPOSER_REWARDS, ProposerInputs, Schedule
from workbench.policy import protocol
from workbench.policy.model import Policy, tiny_model
from workbench.policy.tokenizer import train_tokenizer
from workbench.search.tool import Hit

CORPUS = ["Kavimo Rutel was born in Dagiju. Dagiju is the capital of Lorentia.",
          "The film Tesamu was directed by Kavimo Rutel in the city of Dagiju.",
          protocol.SOLVER_INSTRUCTION] * 20
CHAIN = ChainView(0, "h", [1, 2, 3], ["Tesamu", "Kavimo Rutel", "Dagiju"], ["directed by", "born in"],
                  ["The film Tesamu was directed by Kavimo Rutel.", "Kavimo Rutel was born in Dagiju.",
                   "Dagiju is the capital of Lorentia."])
QUESTION = "Where was the director of Tesamu born?"


class FakeSearch:
    """Returns five hits of ``words`` words each and records the queries."""

    def __init__(self, words=400):
        self.words, self.queries = words, []

    def search(self, queries, k=None):
        self.queries.append((list(queries), k))
        return [[Hit(i, i, f"T{i}", " ".join(["w"] * self.words), 1.0) for i in range(5)] for _ in queries]


@pytest.fixture(scope="module")
def policy():
    tok = train_tokenizer(CORPUS, vocab_size=500)
    backbone = dataclasses.replace(preset("smoke").backbone, hidden_size=32, layers=2, heads=2, kv_heads=1)
    return Policy(tiny_model(backbone, tok, seed=0), tok, device="cpu")


def test_doctests():
    assert doctest.testmod(drfree).failed == 0


def test_shortcut_contexts_text():
    search = FakeSearch()
    ctx = dict(drfree.shortcut_contexts(CHAIN, QUESTION, search))
    assert list(ctx) == ["closed_book", "source_only", "one_shot", "per_hop:1", "per_hop:2"]
    assert ctx["closed_book"] == []
    assert ctx["source_only"] == [CHAIN.passages[0]]
    # one context per hop's evidence (hops 1..L-1); the source document (hop 0) is source-only's
    assert [ctx[f"per_hop:{i}"] for i in (1, 2)] == [[p] for p in CHAIN.passages[1:]]
    # one retrieval of the question itself, top 3, each cut to 340 whitespace-delimited words
    assert search.queries == [([QUESTION], 3)]
    assert len(ctx["one_shot"]) == 3
    assert all(len(p.split()) == 340 for p in ctx["one_shot"])
    assert ctx["one_shot"][0].startswith('"T0" w')  # the hit's contents: title line, then text
    short = FakeSearch(words=5)
    assert drfree.one_shot(CHAIN, QUESTION, short)[0][0].split()[-5:] == ["w"] * 5  # short passages whole
    assert [n for n, _ in drfree.shortcut_contexts(CHAIN, QUESTION, None, ["per_hop"])] == \
        ["per_hop:1", "per_hop:2"]
    with pytest.raises(ValueError, match="unknown shortcut"):
        drfree.shortcut_contexts(CHAIN, QUESTION, None, ["nope"])
    with pytest.raises(ValueError, match="search tool"):
        drfree.shortcut_contexts(CHAIN, QUESTION, None, ["one_shot"])


# Questions and answers over CHAIN, enough that under the seeded model some candidate's strongest
# shortcut is the source document (which of the contexts wins is the model's, not ours)
LOO_ITEMS = [(QUESTION, a) for a in ("Dagiju", "Lorentia", "Kavimo Rutel", "Tesamu")] + \
    [("Who directed Tesamu?", a) for a in ("Kavimo Rutel", "Dagiju", "Lorentia", "Tesamu")]


def test_leaving_out_source_only_changes_the_shortcut_set_and_the_reward(policy):
    """Issue 40: the per-hop contexts held the source document too, so without ``source_only`` the
    set B kept the same strongest context and ``dr_free_wo_source_only`` gave ``dr_free``'s reward."""
    search = FakeSearch()
    full = dict(drfree.shortcut_contexts(CHAIN, QUESTION, search))
    loo = dict(drfree.shortcut_contexts(CHAIN, QUESTION, search, [s for s in drfree.ALL_SHORTCUTS if s != "source_only"]))
    assert [CHAIN.passages[0]] in full.values()
    assert [CHAIN.passages[0]] not in loo.values()  # no context of B without source-only is the source alone
    xs = [ProposerInputs(Schedule(0, 10), None, CHAIN, q, a, policy, FakeSearch()) for q, a in LOO_ITEMS]
    with_src = [PROPOSER_REWARDS["dr_free"](x) for x in xs]
    without = [PROPOSER_REWARDS["dr_free_wo_source_only"](x) for x in xs]
    infos = [drfree.information_gain(policy, CHAIN, q, a, FakeSearch()) for q, a in LOO_ITEMS]
    assert any(i["strongest"] == "source_only" for i in infos)
    for i, w, r in zip(infos, with_src, without):
        rest = max(v for k, v in i["shortcuts"].items() if k != "source_only")
        assert r == pytest.approx(max(0.0, i["full"] - rest), abs=1e-4)  # B less the source document
        assert w == pytest.approx(max(0.0, i["gain"]), abs=1e-4)
    assert with_src != pytest.approx(without, abs=1e-4)  # the two rows differ on the same chains


def _by_hand(policy, question, passages, answer):
    """Sum of the answer tokens' log-probs, one sequence at a time (no padding), via token_logprobs."""
    prefix = policy.chat_prompt(protocol.solver_user_message(question))
    if passages:
        prefix += protocol.information_block(drfree.render_context(passages))
    pre = policy.encode(prefix + "<answer>")
    ans = policy.encode(answer)
    ids = torch.tensor([pre + ans + policy.encode("</answer>")])
    with torch.no_grad():
        lp = policy.token_logprobs(ids, torch.ones_like(ids))[0]
    return float(lp[len(pre):len(pre) + len(ans)].sum())


def test_masked_likelihood_matches_a_hand_computation(policy):
    contexts = [[], [CHAIN.passages[0]], list(CHAIN.passages)]  # different lengths: padding in the batch
    got = drfree.answer_logliks(policy, QUESTION, "Dagiju", contexts)
    for ctx, value in zip(contexts, got):
        assert value == pytest.approx(_by_hand(policy, QUESTION, ctx, "Dagiju"), abs=1e-4)
        assert value < 0
    # the closing tag is masked out: the answer's log-prob alone, not the tag's
    pre, ans, close = drfree.likelihood_pieces(policy, QUESTION, [], "Dagiju")
    ids = torch.tensor([pre + ans + close])
    with torch.no_grad():
        lp = policy.token_logprobs(ids, torch.ones_like(ids))[0]
    assert got[0] != pytest.approx(float(lp[len(pre):].sum()), abs=1e-6)
    # one forward for all contexts
    calls = []
    real = policy.token_logprobs
    policy.token_logprobs = lambda *a, **k: calls.append(a[0].shape) or real(*a, **k)
    try:
        drfree.answer_logliks(policy, QUESTION, "Dagiju", contexts)
    finally:
        del policy.token_logprobs
    assert calls == [torch.Size([3, calls[0][1]])]


def test_gain_is_full_minus_the_strongest_shortcut(policy):
    info = drfree.information_gain(policy, CHAIN, QUESTION, "Dagiju", FakeSearch())
    assert info["gain"] == pytest.approx(info["full"] - max(info["shortcuts"].values()))
    assert info["shortcuts"][info["strongest"]] == max(info["shortcuts"].values())
    assert info["full"] == pytest.approx(_by_hand(policy, QUESTION, list(CHAIN.passages), "Dagiju"), abs=1e-4)
    # the positivity rule (ours: max(0, gain)), its indicator form and margin
    assert drfree.info_gain_reward(-0.953) == 0.0  # Table 11: a rejected case
    assert drfree.info_gain_reward(0.0) == 0.0
    assert drfree.info_gain_reward(1.422) == pytest.approx(1.422)
    assert drfree.info_gain_reward(1.422, form="indicator") == 1.0
    assert drfree.info_gain_reward(-0.1, form="indicator") == 0.0
    assert drfree.info_gain_reward(1.0, margin=1.5) == 0.0
    with pytest.raises(ValueError, match="form"):
        drfree.info_gain_reward(1.0, form="nope")


def test_registry_entry_through_proposer_inputs(policy):
    x = ProposerInputs(Schedule(0, 10), None, CHAIN, QUESTION, "Dagiju", policy, FakeSearch())
    info = drfree.information_gain(policy, CHAIN, QUESTION, "Dagiju", FakeSearch())
    r = PROPOSER_REWARDS["dr_free"](x)  # no solver outcome needed
    assert r == pytest.approx(max(0.0, info["gain"]), abs=1e-5)
    # a leave-one-out row compares against fewer shortcuts, so its gain can only be larger
    for name in ("closed_book", "source_only", "one_shot", "per_hop"):
        assert PROPOSER_REWARDS[f"dr_free_wo_{name}"](x) >= r - 1e-5
    # Table 11's mechanism: dropping the shortcut that was strongest can flip the sign
    loo = drfree.information_gain(policy, CHAIN, QUESTION, "Dagiju", FakeSearch(),
                                  [s for s in drfree.ALL_SHORTCUTS if not info["strongest"].startswith(s)])
    assert loo["gain"] >= info["gain"]
    with pytest.raises(ValueError, match="dr_free needs"):
        PROPOSER_REWARDS["dr_free"](ProposerInputs(Schedule(0, 10)))


def test_a_smoke_round_with_dr_free(tmp_path, monkeypatch):
    """One smoke round with the gate admitting a constructed candidate (as test_loop's
    test_a_round_with_admitted_candidates): every admitted candidate gets a reward >= 0."""
    from workbench import store
    from workbench.method import loop
    from workbench.method.train import ensure_world, train

    db = str(tmp_path / "smoke.duckdb")
    con = store.connect(db)
    ensure_world(con, preset("smoke"))
    con.close()
    real_gate = loop.gate

    def gate(chain, candidates, *args, **kwargs):
        q = f"What is the {chain.relations[-1]} of the {chain.relations[0]} of {chain.titles[0]}?"
        return real_gate(chain, [(q, chain.titles[-1])] * len(candidates), *args, **kwargs)

    monkeypatch.setattr(loop, "gate", gate)
    rows = train(db, run="drfree", method="coevokg", preset="smoke", steps=1, progress=False, log=None,
                 overrides={"method.proposer_reward": "dr_free"})
    assert rows[0]["admitted_rate"] > 0
    con = store.connect(db, read_only=True)
    rewards = con.execute("SELECT reward FROM candidates WHERE run = 'drfree' AND admitted").fetchall()
    stored = con.execute("SELECT config FROM runs WHERE run = 'drfree'").fetchone()[0]
    con.close()
    assert rewards and all(r is not None and r >= 0 for (r,) in rewards)
    assert '"proposer_reward": "dr_free"' in stored


def test_the_shipped_leave_source_only_out_rows_differ_from_dr_free_round_by_round():
    from workbench import reference

    ref = reference.load("tiny_drfree_10rounds.json")  # remade after issue 40's fix (the 20-round file predates it)
    for seed in (0, 1, 2, 3):
        rows = {m: (lambda d: d[d.seed == seed])(ref.of(m)).sort_values("round") for m in ("drfree", "drfree_wo_source_only")}
        a, b = (rows[m][["proposer_reward", "val_em"]].to_numpy() for m in rows)
        assert len(a) == len(b) == 10
        differ = (abs(a - b) > 1e-9).any(axis=1)
        assert differ.mean() >= 0.5, f"seed {seed}: the two rows agree in {int((~differ).sum())} of 10 rounds"
