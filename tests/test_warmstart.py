"""Warm start: demonstrations and their masks, the SFT loop, caching, the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from workbench import store
from workbench.config import preset
from workbench.policy import protocol
from workbench.policy.warmstart import (demo_set, encode_demo, proposer_demo, sft, solver_demo, solver_queries,
                                        tokenizer_corpus, world_demos)


def _hand_store():
    con = store.connect(":memory:")
    con.execute("INSERT INTO entities VALUES (1, 'Kavimo', 'person', 'entity', 't'), "
                "(2, 'Dagiju', 'city', 'entity', 't'), (3, 'Velor', 'country', 'entity', 't'), "
                "(4, 'Rutel', 'person', 'entity', 't')")
    con.execute("INSERT INTO passages VALUES (1, 1, 0, 'Kavimo was born in Dagiju.'), "
                "(2, 2, 0, 'Dagiju is a city in Velor.'), (3, 3, 0, 'Velor is a country.'), "
                "(4, 4, 0, 'Rutel was born in Velor.')")
    con.execute("INSERT INTO edges VALUES (1, 2, 'born in', 't'), (2, 3, 'located in', 't'), (4, 3, 'born in', 't')")
    con.executemany("INSERT INTO questions VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", [
        (1, "tinyworld", "seed", "single_hop", "Where was Kavimo born?", ["Dagiju"], [1, 2], 1, "t"),
        (2, "tinyworld", "seed", "two_hop", "In which country was Kavimo born?", ["Velor"], [1, 2, 3], 2, "t"),
        (3, "tinyworld", "seed", "comparison", "Who was born in a city, Kavimo or Rutel?", ["Kavimo"], [1, 4], 1, "t")])
    return con


@pytest.fixture(scope="module")
def policy():
    from workbench.policy.model import Policy, tiny_model
    from workbench.policy.tokenizer import train_tokenizer

    con = _hand_store()
    from workbench.search.tool import SearchTool

    demos = world_demos(con, SearchTool(con, topk=2), ["single_hop", "two_hop", "comparison"], True, "<|im_end|>")
    tok = train_tokenizer(tokenizer_corpus(demos), vocab_size=420)
    return Policy(tiny_model(preset("smoke").backbone, tok, seed=0), tok, device="cpu")


def test_solver_queries_follow_the_chain():
    assert solver_queries("two_hop", ["Kavimo", "Dagiju", "Velor"], "Velor", path=True) == ["Kavimo", "Dagiju"]
    assert solver_queries("comparison", ["Kavimo", "Rutel"], "Rutel", path=False) == ["Kavimo", "Rutel"]


def test_long_families_are_demonstrated_at_their_rate():
    from workbench.search.tool import SearchTool

    con = _hand_store()
    tool = SearchTool(con, topk=2)
    families = lambda rate: [d.family for d in world_demos(con, tool, ["two_hop", "comparison"], False,  # noqa: E731
                                                            "<|im_end|>", long_rate=rate) if d.role == "solver"]
    assert families(1.0) == ["two_hop", "comparison"]
    assert families(0.0) == ["two_hop"]  # the short family is always kept


def test_demo_set_keeps_the_long_families_at_about_their_rate():
    from collections import Counter

    def count(rate, seed=0):
        demos, _ = demo_set(400, seed, families=["single_hop", "comparison"], proposer_share=0.0,
                            n_entities=150, long_rate=rate)
        return Counter(d.family for d in demos)

    half = count(0.5)
    assert count(0.5) == half  # deterministic by seed
    # each throwaway world has as many comparison as single-hop questions: at rate 0.5 about half
    assert 0.3 < half["comparison"] / half["single_hop"] < 0.7
    assert count(0.0)["comparison"] == 0


def test_world_demos_search_in_order_with_the_real_tool_and_answer():
    from workbench.search.tool import SearchTool

    con = _hand_store()
    tool = SearchTool(con, topk=2)
    demos = world_demos(con, tool, ["two_hop", "comparison"], True, "<|im_end|>")
    solver = [d for d in demos if d.role == "solver"]
    assert [d.family for d in solver] == ["two_hop", "comparison"]
    two = solver[0]
    assert two.user == protocol.solver_user_message("In which country was Kavimo born?")
    assert [t for t, trained in two.segments if trained] == [
        "<search> Kavimo </search>", "<search> Dagiju </search>", "<answer> Velor </answer>"]
    # The information blocks are what a rollout inserts for the same queries.
    blocks = [t for t, trained in two.segments if not trained]
    assert blocks == [protocol.information_block(tool.render(h)) for h in tool.search(["Kavimo", "Dagiju"])]
    assert 'Doc 1(Title: "Kavimo") Kavimo was born in Dagiju.' in blocks[0]
    # Proposer demonstrations only for path chains (the comparison chain has no edge Kavimo -> Rutel).
    prop = [d for d in demos if d.role == "proposer"]
    assert len(prop) == 1 and "--born in-->" in prop[0].user
    assert prop[0].segments == [(protocol.format_candidate("In which country was Kavimo born?", "Velor")
                                 + "<|im_end|>", True)]


def test_masks_cover_prompt_and_information(policy):
    from workbench.search.tool import SearchTool

    con = _hand_store()
    tool = SearchTool(con, topk=2)
    demo = solver_demo(tool, "In which country was Kavimo born?", "two_hop", ["Kavimo", "Dagiju", "Velor"],
                       "Velor", path=True)
    e = encode_demo(policy, demo)
    prompt = policy.encode(policy.chat_prompt(demo.user))
    assert e.input_ids[:len(prompt)] == prompt and not any(e.trained[:len(prompt)])
    tok = policy.tokenizer
    trained = tok.decode([t for t, m in zip(e.input_ids, e.trained) if m])
    masked = tok.decode([t for t, m in zip(e.input_ids[len(prompt):], e.trained[len(prompt):]) if not m])
    assert trained == "<search> Kavimo </search><search> Dagiju </search><answer> Velor </answer>"
    assert masked.count("<information>") == 2 and "<search>" not in masked and "Dagiju is a city in Velor" in masked
    # Proposer: only the candidate and the end-of-turn token are trained.
    p = encode_demo(policy, proposer_demo(["Kavimo", "Dagiju"], ["born in"], ["a", "b"], "Q?", "Dagiju",
                                          "single_hop", "<|im_end|>"))
    assert tok.decode([t for t, m in zip(p.input_ids, p.trained) if m]) == \
        "<question>Q?</question> <answer>Dagiju</answer><|im_end|>"


def test_sft_lowers_the_loss_and_is_deterministic(policy):
    from workbench.policy.model import tiny_model
    from workbench.search.tool import SearchTool

    con = _hand_store()
    demos = world_demos(con, SearchTool(con, topk=2), ["single_hop", "two_hop", "comparison"], True, "<|im_end|>")
    examples = [encode_demo(policy, d) for d in demos] * 4
    runs = []
    for _ in range(2):
        model = tiny_model(preset("smoke").backbone, policy.tokenizer, seed=0)
        runs.append(sft(model, examples, steps=40, batch=4, lr=3e-3, seed=0,
                        pad_id=policy.tokenizer.pad_token_id, log=None))
    losses = runs[0]
    assert np.mean(losses[-5:]) < 0.5 * np.mean(losses[:5])
    assert runs[0] == runs[1]
    with pytest.raises(ValueError, match="cannot fill one batch"):
        sft(model, examples[:2], steps=1, batch=4, lr=1e-3, seed=0, pad_id=0, log=None)


def test_warmstart_trains_caches_and_retrains_on_change(tmp_path, monkeypatch, capsys):
    from workbench.cli import main
    from workbench.kg.tinyworld import build_world
    from workbench.policy.model import Policy
    from workbench.policy.warmstart import warmstart

    monkeypatch.setenv("WORKBENCH_DATA", str(tmp_path / "data"))
    db = str(tmp_path / "w.duckdb")
    build_world(db, preset="smoke", seed=0, n_entities=120)
    cfg = preset("smoke", **{"backbone.sft_steps": 8})
    path = warmstart(db, cfg, seed=0, val_per_family=1, log=None)
    meta = json.loads((path / "workbench.json").read_text())
    assert meta["method"] == "base" and meta["steps"] == 8 and meta["demonstrations"] >= 64
    assert set(meta["val_em"]) >= {"single_hop", "two_hop", "macro"}
    assert meta["train_loss_last"] < meta["train_loss_first"]
    weights = (path / "model.safetensors").stat().st_mtime_ns
    assert warmstart(db, cfg, seed=0, val_per_family=1, log=None) == path  # reused, not retrained
    assert (path / "model.safetensors").stat().st_mtime_ns == weights
    assert warmstart(db, cfg, seed=0, val_per_family=1, retrain=True, log=None) == path  # trained again
    assert (path / "model.safetensors").stat().st_mtime_ns != weights
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # the old copy replaced, nothing left over
    other = warmstart(db, preset("smoke", **{"backbone.sft_steps": 9}), seed=0, val_per_family=1, log=None)
    assert other != path and json.loads((other / "workbench.json").read_text())["steps"] == 9
    policy = Policy.load(path, device="cpu")  # a standard HF directory with its chat template
    assert policy.chat_prompt("q").endswith("<|im_start|>assistant\n")
    # The CLI reuses the same warm start and copies it to --out.
    out = tmp_path / "base"
    assert main(["warmstart", "--db", db, "--preset", "smoke", "--steps", "8", "--val-per-family", "1",
                 "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert str(out) in printed and "val EM (greedy) per family" in printed and "reusing" in printed
    assert (out / "config.json").exists() and (out / "workbench.json").exists()
    with pytest.raises(ValueError, match="families"):
        warmstart(db, cfg, families=["five_hop"], log=None)


def test_a_warm_start_finished_first_by_another_process_is_kept(tmp_path, monkeypatch):
    import os

    from workbench.kg.tinyworld import build_world
    from workbench.policy import warmstart as ws

    monkeypatch.setenv("WORKBENCH_DATA", str(tmp_path / "data"))
    db = str(tmp_path / "w.duckdb")
    build_world(db, preset="smoke", seed=0, n_entities=120)
    real_replace = os.replace

    def other_process_wins(src, dst):  # the same key lands while this process saves its copy
        (Path(dst) / "workbench.json").parent.mkdir(parents=True)
        (Path(dst) / "workbench.json").write_text('{"other": true}')
        real_replace(src, dst)

    monkeypatch.setattr(ws.os, "replace", other_process_wins)
    path = ws.warmstart(db, preset("smoke", **{"backbone.sft_steps": 4}), seed=0, val_per_family=1, log=None)
    assert json.loads((path / "workbench.json").read_text()) == {"other": True}
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no half-written copy left


def test_shipped_warm_start_matches_the_code(tmp_path):
    """The shipped tiny warm start (data/pretrained/) is only used when its key equals the one the
    current code computes; this fails when a change makes it stale (regenerate it, see its README)."""
    from workbench import store
    from workbench.config import preset
    from workbench.kg.tinyworld import build_world
    from workbench.policy import warmstart as ws
    from workbench.search.index import load_corpus

    con = store.connect(tmp_path / "tiny.duckdb")
    build_world(con, preset="tiny", seed=0)
    cfg = preset("tiny")
    params = {"families": list(ws.DEMO_FAMILIES), "n_entities": ws.DEMO_ENTITIES, "epochs": ws.DEMO_EPOCHS,
              "proposer_share": ws.PROPOSER_SHARE, "val_per_family": ws.VAL_PER_FAMILY, "preset": "tiny"}
    key = ws.cache_key(load_corpus(con).content_hash(), cfg, 0, params)
    shipped = ws.shipped_dir() / key
    assert (shipped / "workbench.json").exists(), (
        f"no shipped warm start for key {key}: the code or settings changed since data/pretrained/ was made")
    assert (shipped / "model.safetensors").exists()


def test_recipe_fingerprint_is_recorded():
    """What the warm-start recipe makes is pinned: a change to the demonstrations, tokenizer, model
    or SFT loop must bump WARMSTART_VERSION (the cache key) and record the new fingerprint; a pure
    refactor of those modules passes unchanged."""
    from workbench.policy import warmstart as ws

    assert ws.recipe_fingerprint() == ws.RECIPE_FINGERPRINT, (
        "the warm-start recipe now makes something else: bump WARMSTART_VERSION, set RECIPE_FINGERPRINT "
        "to the new value, retrain and ship the tiny warm start (data/pretrained/README.md)")


def test_recipe_fingerprint_sees_a_change_in_the_demonstrations(monkeypatch):
    from workbench.policy import protocol
    from workbench.policy import warmstart as ws

    monkeypatch.setattr(protocol, "SOLVER_INSTRUCTION", protocol.SOLVER_INSTRUCTION + " Be brief.")
    assert ws.recipe_fingerprint() != ws.RECIPE_FINGERPRINT
