"""Dr. Free's run-level parts (seed 002; issue 40): its chain construction used by its rows, HRPO,
iterations with the anchor, and the "w/o KG" row's searching proposer."""

import dataclasses
import doctest

import numpy as np
import pytest
import torch

from workbench import store
from workbench.config import preset
from workbench.kg import chain_checks
from workbench.kg.pool import build_pool, load_pool
from workbench.kg.tinyworld import build_world
from workbench.method import iterations, loop, methods, tasks
from workbench.method.round import Candidate, ChainTask
from workbench.method.gate import Verdict
from workbench.method.memory import ChainView
from workbench.method.update import PolicyStep, reinforce_pp_advantages
from workbench.peers.drfree import construction as drfree_loop, tasks as drfree_tasks
from workbench.peers.drfree.hrpo import hrpo_advantages
from workbench.policy.model import Policy, tiny_model
from workbench.policy.rollout import Trajectory, rollout
from workbench.policy.tokenizer import train_tokenizer
from workbench.search.tool import SearchTool


def test_doctests():
    for module in (drfree_loop, drfree_tasks, iterations):
        assert doctest.testmod(module).failed == 0


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    con = store.connect(tmp_path_factory.mktemp("dl") / "smoke.duckdb")
    build_world(con, preset="smoke", seed=0)
    build_pool(con, 2000, 2, 3, seed=0)
    yield con
    con.close()


@pytest.fixture(scope="module")
def policy(world):
    texts = [t for (t,) in world.execute("SELECT text FROM passages LIMIT 300").fetchall()]
    tok = train_tokenizer(texts, vocab_size=600)
    backbone = dataclasses.replace(preset("smoke").backbone, hidden_size=32, layers=2, heads=2, kv_heads=1)
    return Policy(tiny_model(backbone, tok, seed=0), tok, device="cpu")


def test_selection_keeps_only_chains_passing_every_check(world):
    search = SearchTool(world, topk=3, cache=False)
    sel = chain_checks.drfree_selection(world, search, topk=3)
    chains = {c.chain_id: c for c in load_pool(world, evidence=False)}
    assert sel["considered"] == len(chains) and 0 < len(sel["ids"]) < len(chains)
    functional = dict(world.execute("SELECT label, functional FROM relations").fetchall())
    objects = dict(((s, r), n) for s, r, n in world.execute(
        "SELECT src, relation, count(DISTINCT dst) FROM edges GROUP BY ALL").fetchall())
    first = dict(world.execute("SELECT entity_id, arg_min(text, paragraph) FROM passages GROUP BY 1").fetchall())
    for cid in sel["ids"]:
        c = chains[cid]
        assert all(functional[r] for r in c.relations)  # the whitelist
        assert all(objects[(e, r)] == 1 for e, r in zip(c.entity_ids, c.relations))  # unique grounding
        assert c.titles[1].lower() in first[c.entity_ids[0]].lower()  # the source names the bridge
        for i in range(1, len(c.entity_ids) - 1):  # each later hop reachable by one retrieval
            hits = search.search([f"{c.titles[i]} {c.relations[i]}"], k=3)[0]
            assert any(h.entity_id == c.entity_ids[i + 1] or c.titles[i + 1].lower() in h.text.lower() for h in hits)
    assert set(sel["rejections"]) <= set(chain_checks.SELECTION_REASONS)
    assert sel["rejections"]["non_functional"] > 0 and sel["rejections"]["source_mention"] > 0
    assert sum(sel["rejections"].values()) == sel["considered"] - len(sel["ids"])
    hops = np.bincount(sel["hops"])[2:]
    assert (hops == hops[0]).all() and sel["shares"] == {2: 0.5, 3: 0.5}  # equal shares by default
    assert chain_checks.drfree_selection(world, search, topk=3) == sel  # deterministic
    skew = chain_checks.drfree_selection(world, search, topk=3, ratio="2:1")
    c2, c3 = np.bincount(skew["hops"], minlength=4)[2:]
    assert abs(c2 - 2 * c3) <= 1
    with pytest.raises(ValueError, match="hop_ratio"):
        chain_checks.drfree_selection(world, search, topk=3, ratio="1:1:1")  # two hop counts here


def _trainer(world, policy, method, **overrides):
    cfg = preset("smoke", **overrides)
    return loop.Trainer(world, cfg, methods.method_spec(method), "t", policy, policy, SearchTool(world, topk=3))


def test_drfree_rows_draw_only_their_chains_and_others_the_whole_pool(world, policy):
    selected = set(chain_checks.drfree_selection(world, SearchTool(world, topk=3, cache=False), topk=3)["ids"])
    for method in ("drfree", "drfree_difficulty", "drfree_ig_difficulty", "drfree_no_proposer_training"):
        trainer = _trainer(world, policy, method, **{"method.chains_per_round": 8})
        drawn = {c.chain_id for t in range(6) for c in trainer.tasks.draw(t)}
        assert drawn <= selected and len(drawn) > 8, method
    drawn = {c.chain_id for t in range(6) for c in _trainer(world, policy, "coevokg",
                                                            **{"method.chains_per_round": 8}).tasks.draw(t)}
    assert drawn - selected  # CoEvoKG draws G_0 whole
    forced = _trainer(world, policy, "c2", **{"method.chains_per_round": 8, "method.chain_selection": "drfree"})
    assert {c.chain_id for c in forced.tasks.draw(0)} <= selected
    with pytest.raises(ValueError, match="chain_selection=drfree"):
        _trainer(world, policy, "coevokg", **{"method.chain_selection": "drfree"})  # write-back draws G_t
    with pytest.raises(ValueError, match="chains_per_round"):
        _trainer(world, policy, "drfree", **{"method.chains_per_round": 500}).tasks.draw(0)


def test_hrpo_advantages_standardise_within_hop_groups():
    r, h = [1.0, 0.0, 3.0, 1.0, 5.0, 0.2], [2, 2, 3, 3, 3, 4]
    adv = hrpo_advantages(r, h, eps=0.0)
    for hop in set(h):
        g = torch.tensor([x for x, y in zip(r, h) if y == hop])
        got = adv[torch.tensor(h) == hop]
        want = torch.zeros_like(g) if len(g) < 2 else (g - g.mean()) / g.std()
        assert torch.allclose(got, want), hop
    # the baseline is the hop group, not the batch: the same rewards under other labels differ
    assert not torch.allclose(adv, hrpo_advantages(r, [2] * 6, eps=0.0))
    assert hrpo_advantages([1.0, 1.0], [2, 2]).tolist() == [0.0, 0.0]
    with pytest.raises(ValueError, match="one hop count per reward"):
        hrpo_advantages([1.0, 2.0], [2])


def _candidate(policy, reward, n_tokens):
    seq = Trajectory(0, 0, "p", policy.encode("prompt"), list(range(5, 5 + n_tokens)), [1] * n_tokens,
                     [-1.0] * n_tokens)
    return Candidate(seq, Verdict(0, "q?", "a", True, admitted=True), reward)


def test_update_gives_the_drfree_proposer_hrpo_advantages(world, policy, monkeypatch):
    two = ChainView(1, "h", [1, 2, 3], ["A", "B", "C"], ["r", "s"], ["", "", ""])
    three = ChainView(2, "g", [1, 2, 3, 4], ["A", "B", "C", "D"], ["r", "s", "u"], ["", "", "", ""])
    rewards = [0.5, 0.0, 2.0, 1.0, 0.25]
    chains = [two, two, three, three, three]
    seen = {}
    for method in ("drfree", "coevokg"):
        trainer = _trainer(world, policy, method)
        # rows come permuted into minibatches: key each advantage by its row (distinct lengths 3..7)
        monkeypatch.setattr(PolicyStep, "__call__", lambda self, t, rows, adv, own_old=False: seen.__setitem__(
            method, {len(r.response_ids): a for r, a in zip(rows, adv)}) or
            {"loss": 0.0, "kl": 0.0, "entropy": 0.0, "clip_fraction": 0.0, "skipped": 0})
        tasks = [ChainTask(c, [_candidate(policy, r, 3 + i)]) for i, (c, r) in enumerate(zip(chains, rewards))]
        trainer.cfg = dataclasses.replace(trainer.cfg, method=dataclasses.replace(trainer.cfg.method, minibatches=1))
        trainer.update(0, tasks, [])
    want = hrpo_advantages(rewards, [2, 2, 3, 3, 3], preset("smoke").method.adv_eps)
    got = seen["drfree"]
    assert sorted(got) == [3, 4, 5, 6, 7]
    for i in range(5):  # one value per question, on every generated token
        assert torch.allclose(got[3 + i], torch.full((3 + i,), float(want[i])))
    # CoEvoKG's proposer keeps REINFORCE++ (Eq. 12): whitened over the batch's tokens
    mask = torch.zeros(5, 7)
    for i in range(5):
        mask[i, :3 + i] = 1
    pp = reinforce_pp_advantages(torch.tensor(rewards), mask, eps=preset("smoke").method.adv_eps)
    for i in range(5):
        assert torch.allclose(seen["coevokg"][3 + i], pp[i, :3 + i])
    assert not torch.allclose(seen["coevokg"][3], seen["drfree"][3])


def test_iteration_bounds_and_kept_checkpoints(tmp_path):
    assert iterations.iteration_ends(20, 3) == [7, 14, 20]
    assert [iterations.iteration_of(t, [7, 14, 20]) for t in (0, 6, 7, 13, 14, 19)] == [1, 1, 2, 2, 3, 3]
    with pytest.raises(ValueError, match="method.iterations=4"):
        iterations.iteration_ends(3, 4)
    assert drfree_loop.anchor_for(tmp_path, 6, [7, 14, 20]) is None
    assert drfree_loop.anchor_for(tmp_path, 20, [7, 14, 20]) == tmp_path / "iterations" / "iter-2"
    with pytest.raises(FileNotFoundError, match="no best checkpoint"):
        iterations.save_iteration(tmp_path, 1)
    (tmp_path / "best").mkdir()
    (tmp_path / "best" / "w.bin").write_bytes(b"one")
    kept = iterations.save_iteration(tmp_path, 1)
    assert (kept / "w.bin").read_bytes() == b"one"
    # best is replaced by a rename (train._save_best), never written in place: the kept copy stays
    (tmp_path / "best").rename(tmp_path / "old")
    (tmp_path / "best").mkdir()
    (tmp_path / "best" / "w.bin").write_bytes(b"two")
    assert (kept / "w.bin").read_bytes() == b"one"
    assert (iterations.save_iteration(tmp_path, 1) / "w.bin").read_bytes() == b"two"  # a resumed round: replaced
    settings = methods.resolve(methods.METHODS["drfree"], preset("smoke", **{"method.steps": 2}).method)
    assert settings.iterations == 2  # the method's three, but a 2-round run has two


@pytest.fixture
def forced_gate(monkeypatch):
    """The gate sees a constructed question per candidate (as test_drfree_method's)."""
    real_gate = tasks.gate

    def gate(chain, candidates, *args, **kwargs):
        if chain.chain_id >= 0:
            q, a = f"What is the {chain.relations[-1]} of the {chain.relations[0]} of {chain.titles[0]}?", chain.titles[-1]
        else:  # a searched candidate's evidence (w/o KG): the seed document and what it found
            q, a = "Which entity do these documents describe last?", chain.titles[-1]
        return real_gate(chain, [(q, a)] * len(candidates), *args, **kwargs)

    monkeypatch.setattr(tasks, "gate", gate)
    monkeypatch.setattr(drfree_tasks, "gate", gate)


def test_iterations_keep_checkpoints_and_move_the_anchor_across_a_resume(tmp_path, monkeypatch, forced_gate):
    from workbench.method.train import run_dir, train

    monkeypatch.setenv("WORKBENCH_RUNS", str(tmp_path / "runs"))
    db = str(tmp_path / "s.duckdb")
    scorers, anchors = [], []
    real_reward, real_set, real_round = (loop.Trainer.reward_proposer, drfree_tasks.DrFreeAnchor.set_anchor,
                                         loop.Trainer.run_round)

    def reward_proposer(self, t, tasks):
        scorers.append((t, "anchor" if self.scorer is self.extensions[0].anchor else
                        "base" if self.scorer is self.reference else "live"))
        real_reward(self, t, tasks)

    def crash_at_round_1(self, t):
        if t == 1:
            raise RuntimeError("stopped")
        return real_round(self, t)

    monkeypatch.setattr(loop.Trainer, "reward_proposer", reward_proposer)
    monkeypatch.setattr(drfree_tasks.DrFreeAnchor, "set_anchor", lambda self, path: anchors.append(path) or real_set(self, path))
    monkeypatch.setattr(loop.Trainer, "run_round", crash_at_round_1)
    kw = dict(run="it", method="drfree", preset="smoke", steps=2, progress=False, log=None)
    with pytest.raises(RuntimeError, match="stopped"):
        train(db, **kw)
    folder = run_dir("it")
    assert (folder / "iterations" / "iter-1" / "config.json").exists()
    assert anchors == [folder / "iterations" / "iter-1"]  # set as iteration 1 ended
    monkeypatch.setattr(loop.Trainer, "run_round", real_round)
    anchors.clear()
    rows = train(db, resume=True, **kw)
    assert anchors == [folder / "iterations" / "iter-1"]  # restored by the resume, before round 1
    assert scorers == [(0, "base"), (1, "anchor")]
    assert [r["iteration"] for r in rows] == [1, 2]
    assert {f.name for f in (folder / "iterations").iterdir()} == {"iter-1", "iter-2"}
    best, last = folder / "best" / "model.safetensors", folder / "iterations" / "iter-2" / "model.safetensors"
    assert best.read_bytes() == last.read_bytes()  # the last iteration's checkpoint is the run's best
    # the other anchors: the base throughout (fixed), the current policy (live)
    scorers.clear()
    train(db, run="fx", method="drfree", preset="smoke", steps=1, progress=False, log=None,
          overrides={"method.drfree_anchor": "live"})
    assert scorers == [(0, "live")]


def test_rollout_takes_another_user_turn(policy):
    class NoSearch:
        def search(self, queries, k=None):
            return [[] for _ in queries]

        def render(self, hits):
            return ""

    msgs = drfree_loop.search_proposer_messages([ChainView(-1, "", [1], ["Ann"], [], ["Ann was born in Rome."])])
    trajs = rollout(policy, NoSearch(), ["Ann"], 2, max_turns=1, max_new_tokens=4, user_messages=msgs)
    assert all(t.prompt == policy.chat_prompt(msgs[0]) for t in trajs)
    assert rollout(policy, NoSearch(), ["Ann"], 1, max_turns=1, max_new_tokens=4)[0].prompt != trajs[0].prompt
    with pytest.raises(ValueError, match="user_messages"):
        rollout(policy, NoSearch(), ["Ann", "Bo"], 1, user_messages=msgs)


def test_wo_kg_row_searches_before_it_writes_and_is_scored_on_what_it_found(tmp_path, monkeypatch, forced_gate):
    from workbench.method.train import train

    monkeypatch.setenv("WORKBENCH_RUNS", str(tmp_path / "runs"))
    spec = methods.method_spec("drfree_wo_kg")
    assert (spec.task_source, spec.proposer_reward, spec.proposer_algorithm) == ("seed_document", "dr_free", "hrpo")
    seen = []
    real_reward = loop.Trainer.reward_proposer

    def reward_proposer(self, t, tasks):
        real_reward(self, t, tasks)
        seen.extend((task.chain, c) for task in tasks for c in task.candidates)

    monkeypatch.setattr(loop.Trainer, "reward_proposer", reward_proposer)
    # what the untrained smoke model searches for is whatever it samples: on an AVX2 CPU (other float
    # rounding) every query was empty to bm25s, so nothing was found; "born" is in every person's passages
    from workbench.search.tool import Retriever
    real_search = Retriever.search
    monkeypatch.setattr(Retriever, "search", lambda self, queries, k=None: real_search(
        self, [f"{q} born" for q in queries], k))
    db = str(tmp_path / "s.duckdb")
    rows = train(db, run="wokg", method="drfree_wo_kg", preset="smoke", steps=1, progress=False, log=None,
                 overrides={"method.chains_per_round": 4, "method.candidates_per_chain": 3})
    assert len(seen) == 12 and rows[0]["admitted_rate"] > 0
    for doc, c in seen:
        ev = c.evidence
        assert (ev.entity_ids[0], ev.passages[0]) == (doc.entity_ids[0], doc.passages[0])  # the seed document first
        assert len(ev.passages) == 1 + len(set(c.sequence.passage_ids))  # then each passage it found
        assert c.hops == max(1, len(c.sequence.queries))
        if c.verdict.passed:
            assert c.reward is not None and c.reward >= 0
            if len(ev.passages) == 1:  # no search: E is the source document alone, so the gain is <= 0
                assert c.reward == 0.0
    assert any(len(c.evidence.passages) > 1 and c.reward is not None for _, c in seen)  # searched, scored
    assert any(len(c.evidence.passages) == 1 and c.reward == 0.0 for _, c in seen)  # not searched: nothing
    assert "proposer_searches" in rows[0] and rows[0]["proposer_searches"] == pytest.approx(
        np.mean([len(c.sequence.queries) for _, c in seen]))
    con = store.connect(db, read_only=True)
    chain_ids = {c for (c,) in con.execute("SELECT chain_id FROM generated_questions WHERE run = 'wokg'").fetchall()}
    con.close()
    assert chain_ids == {-1}  # no G_0 chain behind a searched question
