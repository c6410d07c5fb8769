"""The CoEvoKG loop at smoke size: metrics, matched budgets, determinism and resume (issue 4)."""

import json

import pytest

from workbench import paths, store
from workbench.cli import main
from workbench.config import preset
from workbench.method.metrics import without_clock
from workbench.method.run_store import METRIC_KEYS, run_metrics
from workbench.method.train import ensure_world, train


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    path = tmp_path_factory.mktemp("loop") / "smoke.duckdb"
    con = store.connect(path)
    ensure_world(con, preset("smoke"))
    con.close()
    return str(path)


def test_coevokg_rounds_log_every_metric(db, capsys):
    rows = train(db, run="full", method="coevokg", preset="smoke", steps=2, progress=False, log=None)
    assert [r["round"] for r in rows] == [0, 1]
    for r in rows:
        assert set(METRIC_KEYS) <= set(r)
        assert r["kl_coef"] > 0 and r["kl_coef"] != preset("smoke").method.kl_coef  # the controller moved it
        assert 0.0 <= r["seed_fallback_rate"] <= 1.0 and 0.0 <= r["admitted_rate"] <= 1.0
        assert r["pool_chains"] > 0 and r["pool_evidence"] > 0
        # every slot's answer is a typed TinyWorld entity (bridge answers are year entities)
        types = {**r["answer_types_generated"], **r["answer_types_seed"]}
        assert "literal" not in types and "untyped" not in types
        n_slots = preset("smoke").method.chains_per_round * preset("smoke").method.admit_top_k
        assert sum(r["answer_types_generated"].values()) + sum(r["answer_types_seed"].values()) == n_slots
        assert sum(r["answer_types_seed"].values()) == round(r["seed_fallback_rate"] * n_slots)
    assert main(["runs", "show", "full", "--json", "--db", db]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert without_clock(shown) == without_clock(rows)
    con = store.connect(db, read_only=True)
    cfg = preset("smoke").method
    per_round = cfg.chains_per_round * cfg.admit_top_k * cfg.group_size
    counts = con.execute("SELECT round, count(*) FROM trajectories WHERE run = 'full' GROUP BY round "
                         "ORDER BY round").fetchall()
    assert counts == [(0, per_round), (1, per_round)]
    n_cand = con.execute("SELECT count(*) FROM candidates WHERE run = 'full'").fetchone()[0]
    assert n_cand == 2 * cfg.chains_per_round * cfg.candidates_per_chain
    con.close()


@pytest.mark.parametrize("method", ["search_r1", "ssp", "ssp_no_search"])
def test_baselines_run_on_the_same_budget(db, method):
    rows = train(db, run=f"b-{method}", method=method, preset="smoke", steps=1, progress=False, log=None)
    con = store.connect(db, read_only=True)
    cfg = preset("smoke").method
    n = con.execute("SELECT count(*) FROM trajectories WHERE run = ?", [f"b-{method}"]).fetchone()[0]
    assert n == cfg.chains_per_round * cfg.admit_top_k * cfg.group_size
    n_cand = con.execute("SELECT count(*) FROM candidates WHERE run = ?", [f"b-{method}"]).fetchone()[0]
    reasons = {r for (r,) in con.execute("SELECT DISTINCT reason FROM candidates WHERE run = ?", [f"b-{method}"]).fetchall()}
    con.close()
    if method == "search_r1":  # no proposer: every slot is a seed question
        assert rows[0]["seed_fallback_rate"] == 1.0 and n_cand == 0
    else:
        assert n_cand == cfg.chains_per_round * cfg.candidates_per_chain
    if method == "ssp":  # SSP's own checks and RAG check, never Eq. 6's gate (issue 40)
        from workbench.method.ssp import REASONS

        assert reasons <= set(REASONS) | {"ok"}


def test_resume_gives_the_uninterrupted_run(db):
    whole = train(db, run="whole", method="coevokg", preset="smoke", steps=2, progress=False, log=None)
    train(db, run="parts", method="coevokg", preset="smoke", steps=1, progress=False, log=None)
    resumed = train(db, run="parts", method="coevokg", preset="smoke", steps=2, resume=True, progress=False,
                    log=None)
    assert without_clock(resumed) == without_clock(whole)


def test_unknown_method_is_a_clear_error(db):
    with pytest.raises(ValueError, match="unknown method 'nope'"):
        train(db, run="x", method="nope", preset="smoke", steps=1, progress=False, log=None)


def test_a_run_whose_pool_filters_the_stores_g0_lacks_is_refused(db, tmp_path):
    """--set pool.functional_only=true on a store whose G_0 was built without it trained on the
    unfiltered pool, silently (issue 15's functional-only lead); now refused, the store untouched."""
    with pytest.raises(ValueError, match=r"pool.functional_only=True \(the store's G_0: False\): build G_0 "
                                         r"with those filters first \(workbench pool build --db .* --functional-only"):
        train(db, run="functional", method="coevokg", preset="smoke", steps=1, progress=False, log=None,
              overrides={"pool.functional_only": True})
    con = store.connect(db, read_only=True)
    assert con.execute("SELECT count(*) FROM runs WHERE run = 'functional'").fetchone()[0] == 0
    con.close()
    assert not (paths.runs_dir() / "functional").exists()  # refused before its folder was claimed
    built = tmp_path / "functional.duckdb"
    con = store.connect(built)
    ensure_world(con, preset("smoke"))
    con.close()
    assert main(["pool", "build", "--db", str(built), "--preset", "smoke", "--functional-only"]) == 0
    rows = train(str(built), run="functional", method="coevokg", preset="smoke", steps=1, progress=False, log=None,
                 overrides={"pool.functional_only": True})
    assert len(rows) == 1
    with pytest.raises(ValueError, match=r"pool.functional_only=False \(the store's G_0: True\)"):
        train(str(built), run="unfiltered", method="coevokg", preset="smoke", steps=1, progress=False, log=None)
    # Search-R1 reads the seed questions, not G_0: the store's pool is no concern of its settings
    assert len(train(str(built), run="seeds", method="search_r1", preset="smoke", steps=1, progress=False,
                     log=None)) == 1


def test_resume_refuses_other_settings(db):
    train(db, run="strict", method="c2", preset="smoke", steps=1, progress=False, log=None)
    with pytest.raises(ValueError, match=r"other settings \(method 'c2'; method.lr: 3e-05 -> 0.001\)"):
        train(db, run="strict", method="c2", preset="smoke", steps=2, resume=True, progress=False, log=None,
              overrides={"method.lr": 1e-3})
    rows = train(db, run="strict", method="c2", preset="smoke", steps=2, resume=True, progress=False, log=None)
    assert [r["round"] for r in rows] == [0, 1]
    con = store.connect(db, read_only=True)
    (config,) = con.execute("SELECT config FROM runs WHERE run = 'strict'").fetchone()
    con.close()
    assert json.loads(config)["method"]["anneal_steps"] == 1  # p*(t) keeps the first run's horizon


def test_resume_of_a_run_made_before_a_default_changed_names_the_set_that_continues_it(db):
    """method.verifier_vocabulary's default became 'forms_types' (config.CHANGED_DEFAULTS): a run
    stored with the old 'exact' is refused with the --set that resumes it, which then does."""
    older = dict(run="older-vocabulary", method="coevokg", preset="smoke", progress=False, log=None)
    exact = {"method.verifier_vocabulary": "exact"}  # what a run made before the change stored
    train(db, steps=1, overrides=exact, **older)
    with pytest.raises(ValueError, match=r"method.verifier_vocabulary: 'exact' -> 'forms_types'.*\(here --set "
                                         r"method.verifier_vocabulary=exact \(its default before 2026-12-02\)\)"):
        train(db, steps=2, resume=True, **older)
    rows = train(db, steps=2, resume=True, overrides=exact, **older)
    assert [r["round"] for r in rows] == [0, 1]
    # a run stored before the field existed ran with the default of then, not today's
    oldest = {**older, "run": "before-vocabulary"}
    train(db, steps=1, overrides=exact, **oldest)
    con = store.connect(db)
    (config,) = con.execute("SELECT config FROM runs WHERE run = 'before-vocabulary'").fetchone()
    stored = json.loads(config)
    del stored["method"]["verifier_vocabulary"]
    con.execute("UPDATE runs SET config = ? WHERE run = 'before-vocabulary'", [json.dumps(stored)])
    con.close()
    with pytest.raises(ValueError, match=r"'exact' -> 'forms_types'.*--set method.verifier_vocabulary=exact"):
        train(db, steps=2, resume=True, **oldest)
    assert [r["round"] for r in train(db, steps=2, resume=True, overrides=exact, **oldest)] == [0, 1]


def test_minibatches_take_that_many_optimiser_steps_per_round(db, caplog):
    import logging

    import torch

    from workbench.policy.model import model_labels
    from workbench.method.train import run_dir

    with caplog.at_level(logging.DEBUG, logger="workbench.method"):  # what a cut-short round leaves behind
        train(db, run="mb", method="search_r1", preset="smoke", steps=1, progress=False, log=None,
              overrides={"method.minibatches": 3, "method.lr": 1e-3, "method.warmup_steps": 4})
    stages = [m.split(":")[0] for m in caplog.messages if m.startswith(("round stage", "after round"))]
    assert stages[-8:] == ["round stage rollouts", "round stage rewards", "round stage update", "round stage sync",
                           "after round validation", "after round commit", "after round best", "after round checkpoint"]
    micro = [m for m in caplog.messages if m.startswith("round 0 update micro-batch")]
    assert len(micro) >= 3 and all(" sequences, " in m for m in micro)  # at least one per optimiser step
    saved = torch.load(run_dir("mb") / "checkpoints" / "round-000001" / "optimizer.pt")
    assert {float(s["step"]) for s in saved["state"].values()} == {3.0}
    assert saved["param_groups"][0]["lr"] == pytest.approx(3 / 4 * 1e-3)  # the third of 4 warm-up steps
    assert model_labels(run_dir("mb") / "best")["method"] == "search_r1"


@pytest.mark.parametrize("name", ["..", ".", "", "a/b", "batch", "quickstart", "-x", "a b", "x" * 129])
def test_a_run_name_is_a_plain_name(db, name):
    with pytest.raises(ValueError, match="--run"):
        train(db, run=name, method="search_r1", preset="smoke", steps=1, progress=False, log=None)


@pytest.mark.parametrize("steps", [0, -1, 1.5])
def test_steps_below_one_are_refused(db, steps):
    with pytest.raises(ValueError, match="--steps"):
        train(db, run="few", method="search_r1", preset="smoke", steps=steps, progress=False, log=None)


def test_an_existing_run_is_refused_unless_resumed_or_overwritten(db, tmp_path):
    from workbench.method.train import run_dir

    first = train(db, run="keep", method="search_r1", preset="smoke", steps=1, progress=False, log=None)
    before = sorted(p.relative_to(run_dir("keep")) for p in run_dir("keep").rglob("*"))
    with pytest.raises(ValueError, match="--resume.*--overwrite"):
        train(db, run="keep", method="search_r1", preset="smoke", steps=1, progress=False, log=None)
    con = store.connect(db, read_only=True)
    assert con.execute("SELECT count(*) FROM run_metrics WHERE run = 'keep'").fetchone()[0] == 1
    con.close()
    assert sorted(p.relative_to(run_dir("keep")) for p in run_dir("keep").rglob("*")) == before
    again = train(db, run="keep", method="search_r1", preset="smoke", steps=1, progress=False, log=None,
                  overwrite=True)
    assert without_clock(again) == without_clock(first)  # replaced by the same run, nothing doubled
    # another store's run of the same name never touches this one's folder
    other = tmp_path / "other.duckdb"
    con = store.connect(other)
    ensure_world(con, preset("smoke"))
    con.close()
    with pytest.raises(ValueError, match="belongs to the store"):
        train(str(other), run="keep", method="search_r1", preset="smoke", steps=1, progress=False, log=None,
              overwrite=True)
    assert (run_dir("keep") / "best").exists()


def test_a_folder_not_made_by_train_is_never_deleted(db):
    from workbench import paths

    mine = paths.runs_dir() / "notes"
    mine.mkdir()
    (mine / "todo.txt").write_text("mine")
    with pytest.raises(ValueError, match="run.json"):
        train(db, run="notes", method="search_r1", preset="smoke", steps=1, progress=False, log=None, overwrite=True)
    assert (mine / "todo.txt").read_text() == "mine"


def test_a_failed_run_is_marked_failed(db):
    with pytest.raises(ValueError, match="proposer reward"):
        train(db, run="bad-reward", method="coevokg", preset="smoke", steps=1, progress=False, log=None,
              overrides={"method.proposer_reward": "nope"})
    with pytest.raises(ValueError, match="limit"):  # fails inside the first round
        train(db, run="boom", method="search_r1", preset="smoke", steps=1, progress=False, log=None,
              overrides={"method.val_questions": 0})
    con = store.connect(db, read_only=True)
    assert con.execute("SELECT status FROM runs WHERE run = 'boom'").fetchall() == [("failed",)]
    assert con.execute("SELECT count(*) FROM runs WHERE run = 'bad-reward'").fetchone()[0] == 0
    con.close()


def test_rewards_and_verifier_are_configuration(db):
    """A registry entry and a config value select a variant; the round is unchanged."""
    rows = train(db, run="eog", method="c2", preset="smoke", steps=1, progress=False, log=None,
                 overrides={"method.proposer_reward": "eog_variance", "method.solver_reward": "exact_match",
                            "method.verifier": "open", "method.pool_sampling": "evidence"})
    assert rows[0]["s_path_correct_mean"] >= 0 and rows[0]["solver_reward"] in (rows[0]["r_ans"],)
    con = store.connect(db, read_only=True)
    stored = json.loads(con.execute("SELECT config FROM runs WHERE run = 'eog'").fetchone()[0])
    con.close()
    assert stored["method"]["proposer_reward"] == "eog_variance"


def test_a_round_with_admitted_candidates(db, monkeypatch):
    """Constructed proposer output (the smoke base writes none the gate admits): admitted
    questions are stored, posed to the solver, get Eq. 10's reward from their G rollouts, and
    their trajectories are offered to write-back."""
    from workbench.method import tasks

    real_gate = tasks.gate

    def gate(chain, candidates, *args, **kwargs):
        q = f"What is the {chain.relations[-1]} of the {chain.relations[0]} of {chain.titles[0]}?"
        return real_gate(chain, [(q, chain.titles[-1])] * len(candidates), *args, **kwargs)

    monkeypatch.setattr(tasks, "gate", gate)
    rows = train(db, run="admitted", method="coevokg", preset="smoke", steps=2, progress=False, log=None)
    assert all(r["admitted_rate"] > 0 and r["p_s_generated"] is not None for r in rows)
    assert all(r["seed_fallback_rate"] < 1 for r in rows)
    offered = sum(r["writeback_rejected"] + r["writeback_merged_evidence"] for r in rows)
    assert offered >= rows[0]["admitted_rate"] * 4 * 4  # G rollouts of each admitted question
    con = store.connect(db, read_only=True)
    rewards = con.execute("SELECT reward FROM candidates WHERE run = 'admitted' AND admitted").fetchall()
    generated = con.execute("SELECT count(*) FROM generated_questions WHERE run = 'admitted'").fetchone()[0]
    con.close()
    assert rewards and all(r is not None and 0 <= r <= 1 for (r,) in rewards)  # Eq. 10's bell
    assert generated == len(rewards)


def test_a_backend_whose_logprobs_are_not_the_trainers_recomputes_only_after_the_first_step(db, monkeypatch):
    """vLLM's log-probs are not the trainer's (NaN unless asked for), so the update needs the sampling
    policy's own: for the first optimiser step that is the policy being trained (its log-probs,
    detached: ratio 1), so only the later steps' rows are recomputed. Here the HF backend plays vLLM:
    told its log-probs are not the trainer's and giving NaN ones, so a step that read them would be
    skipped as non-finite. The same rollouts and new log-probs as a run with HF's own: the same KL
    and entropy; no clipped token."""
    import dataclasses

    from workbench.method.loop import Trainer
    from workbench.policy.generation import HFBackend

    recomputed = []
    real_recompute, real_generate = Trainer.recompute_old_logprobs, HFBackend.generate

    def counted(self, rows):
        recomputed.append(len(rows))
        return real_recompute(self, rows)

    def nan_logprobs(self, *args, **kwargs):
        return [dataclasses.replace(g, logprobs=[float("nan")] * len(g.logprobs))
                for g in real_generate(self, *args, **kwargs)]

    monkeypatch.setattr(Trainer, "recompute_old_logprobs", counted)
    one = {"method.minibatches": 1}
    (gen,) = train(db, run="own-gen", method="coevokg", preset="smoke", steps=1, overrides=one, progress=False,
                   log=None)
    monkeypatch.setattr(HFBackend, "trainer_logprobs", False)
    monkeypatch.setattr(HFBackend, "generate", nan_logprobs)
    (own,) = train(db, run="own-first", method="coevokg", preset="smoke", steps=1, overrides=one, progress=False,
                   log=None)
    assert recomputed == [] and own["skipped_update"] == 0 and own["clip_fraction"] == 0.0
    assert own["kl"] == pytest.approx(gen["kl"], rel=1e-6) and own["entropy"] == pytest.approx(gen["entropy"], rel=1e-6)
    (two,) = train(db, run="own-two", method="coevokg", preset="smoke", steps=1,
                   overrides={"method.minibatches": 2}, progress=False, log=None)
    cfg = preset("smoke").method
    rows = cfg.chains_per_round * cfg.admit_top_k * cfg.group_size  # the solver's; the proposer's too where scored
    assert two["skipped_update"] == 0 and len(recomputed) == 1
    assert rows // 2 <= recomputed[0] < rows + cfg.chains_per_round * cfg.candidates_per_chain


def test_the_seed_fallback_draws_only_the_families_named(db):
    rows = train(db, run="fam", method="search_r1", preset="smoke", steps=2, progress=False, log=None,
                 overrides={"method.seed_families": "comparison, two_hop"})
    con = store.connect(db, read_only=True)
    drawn = con.execute("SELECT DISTINCT q.family FROM trajectories t JOIN questions q USING (question_id) "
                        "WHERE t.run = 'fam' ORDER BY 1").fetchall()
    con.close()
    assert len(rows) == 2 and drawn == [("comparison",), ("two_hop",)]


def test_a_seed_family_the_pool_lacks_is_refused_before_any_round(db):
    with pytest.raises(ValueError, match=r"method.seed_families.*three_hops not among the seed pool's families"):
        train(db, run="fam-bad", method="search_r1", preset="smoke", steps=1, progress=False, log=None,
              overrides={"method.seed_families": "three_hops"})


def test_skip_zero_advantage_leaves_groups_of_equal_rewards_out_of_the_update(db, monkeypatch):
    """With ``method.skip_zero_advantage`` the update sees only the solver rollouts whose GRPO
    advantage is not 0: here the first group's rewards differ (1, 0, ..., 0), the others' are all 0."""
    import torch

    from workbench.method import loop, update

    real_adv, real_step, seen = loop.grpo_advantages, update.PolicyStep.__call__, {}

    def one_mixed_group(rewards, group_size, eps):
        return real_adv(torch.tensor([1.0] + [0.0] * (len(rewards) - 1)), group_size, eps)

    def step(self, t, rows, advantages, own_old=False):
        seen.setdefault(self.m.skip_zero_advantage, []).extend(float(a.abs().sum()) for a in advantages)
        return real_step(self, t, rows, advantages, own_old)

    monkeypatch.setattr(loop, "grpo_advantages", one_mixed_group)
    monkeypatch.setattr(update.PolicyStep, "__call__", step)
    for skip in (False, True):
        train(db, run=f"skip-{skip}", method="search_r1", preset="smoke", steps=1, progress=False, log=None,
              overrides={"method.skip_zero_advantage": skip})
    m = preset("smoke").method
    slots = m.chains_per_round * m.admit_top_k
    assert len(seen[False]) == slots * m.group_size and sum(a > 0 for a in seen[False]) == m.group_size
    assert len(seen[True]) == m.group_size and all(a > 0 for a in seen[True])


def test_weight_average_is_the_mean_of_the_rounds_weights_and_survives_a_resume(db):
    """``method.weight_average``: ``runs/<run>/average`` holds the mean of the policy's weights after
    each round; a run resumed from its checkpoint averages exactly what an uninterrupted one does."""
    from safetensors.torch import load_file

    on = {"method.weight_average": 1.0}
    train(db, run="avg-whole", method="coevokg", preset="smoke", steps=2, progress=False, log=None, overrides=on)
    train(db, run="avg-parts", method="coevokg", preset="smoke", steps=1, progress=False, log=None, overrides=on)
    runs = paths.runs_dir()
    first = load_file(runs / "avg-parts/checkpoints/round-000001/model/model.safetensors")
    assert json.loads((runs / "avg-parts/average/workbench.json").read_text())["rounds_averaged"] == 1
    train(db, run="avg-parts", method="coevokg", preset="smoke", steps=2, resume=True, progress=False, log=None,
          overrides=on)
    second = load_file(runs / "avg-parts/checkpoints/round-000002/model/model.safetensors")
    assert any(not (first[k] == second[k]).all() for k in first)  # the rounds moved the weights
    whole, parts = (load_file(runs / f"{r}/average/model.safetensors") for r in ("avg-whole", "avg-parts"))
    assert set(parts) == set(first)
    for k in first:
        assert (parts[k] == whole[k]).all()
        assert ((parts[k] - (first[k] + second[k]) / 2).abs() <= 1e-6).all()
    assert json.loads((runs / "avg-parts/average/workbench.json").read_text())["rounds_averaged"] == 2
    with pytest.raises(ValueError, match="method.weight_average with method.lora_rank=4"):
        train(db, run="avg-lora", method="coevokg", preset="smoke", steps=1, progress=False, log=None,
              overrides={**on, "method.lora_rank": 4})


def test_a_run_resumed_to_more_rounds_is_the_run_that_had_them_from_the_start(db):
    """``--resume --steps`` past a run's end keeps its running mean: 2 rounds averaging the last half,
    continued to 4, are the 4-round run that averages its last three (rounds 1-3), metric for metric
    and weight for weight. It also keeps Eq. 10's first horizon (``test_resume_refuses_other_settings``),
    so the whole run sets ``method.anneal_steps=2``; at smoke size every reward is 0 and the horizon
    moves nothing. LONG's 30-round seeds on the slower CPU were made this way (LOG.md, session 31)."""
    from safetensors.torch import load_file

    every = {"method.val_every": 2}
    whole = train(db, run="longer-whole", method="coevokg", preset="smoke", steps=4, progress=False, log=None,
                  overrides={**every, "method.weight_average": 0.75, "method.anneal_steps": 2})
    half = {**every, "method.weight_average": 0.5}
    train(db, run="longer-parts", method="coevokg", preset="smoke", steps=2, progress=False, log=None, overrides=half)
    parts = train(db, run="longer-parts", method="coevokg", preset="smoke", steps=4, resume=True, progress=False,
                  log=None, overrides=half)
    assert without_clock(parts) == without_clock(whole)
    runs = paths.runs_dir()
    a, b = (load_file(runs / f"{r}/average/model.safetensors") for r in ("longer-whole", "longer-parts"))
    assert set(a) == set(b) and all((a[k] == b[k]).all() for k in a)
    assert json.loads((runs / "longer-parts/average/workbench.json").read_text())["rounds_averaged"] == 3


def test_a_run_that_averages_validates_the_mean_it_saves(db, monkeypatch, capsys):
    """Each validated round of the averaged tail validates the policy, then the running mean with the
    weights ``runs/<run>/average`` holds (``val_em_average``); the other rounds record it as null."""
    from safetensors.torch import load_file

    import workbench.method.train as train_module

    seen = []  # (the weights validated, the EM returned)

    def validation_em(trainer, limit):
        seen.append(({k: v.detach().clone() for k, v in trainer.policy.model.state_dict().items()}, len(seen) / 10))
        return seen[-1][1]

    monkeypatch.setattr(train_module, "validation_em", validation_em)
    assert main(["train", "--db", db, "--preset", "smoke", "--run", "avg-val", "--steps", "4",
                 "--set", "method.weight_average=0.75", "--set", "method.val_every=2"]) == 0  # averages 1-3
    assert "avg-val: 4 rounds; last val EM 0.200 (the weights' mean 0.300)" in capsys.readouterr().out
    con = store.connect(db)
    metrics = run_metrics(con, "avg-val")
    con.close()
    runs = paths.runs_dir()
    average = load_file(runs / "avg-val/average/model.safetensors")
    policy = load_file(runs / "avg-val/checkpoints/round-000004/model/model.safetensors")
    assert [m["val_em"] for m in metrics] == [None, 0.0, None, 0.2]
    assert [m["val_em_average"] for m in metrics] == [None, 0.1, None, 0.3]
    assert len(seen) == 4 and all((seen[2][0][k] == policy[k]).all() for k in policy)
    assert all(((seen[3][0][k] - average[k]).abs() <= 1e-6).all() for k in average)
    assert any(not (seen[3][0][k] == policy[k]).all() for k in policy)  # the mean is not the last round
    plain = train(db, run="avg-val-off", method="coevokg", preset="smoke", steps=1, progress=False, log=None)
    assert "val_em_average" not in plain[0]


def test_weight_average_of_the_last_half_leaves_the_first_rounds_out(db):
    """``method.weight_average=0.5`` over two rounds: no ``average`` after round 1, which stays out of
    the mean; after round 2 the mean is round 2's weights alone."""
    from safetensors.torch import load_file

    runs = paths.runs_dir()
    first = train(db, run="avg-tail-1", method="coevokg", preset="smoke", steps=2, progress=False, log=None,
                  overrides={"method.weight_average": 0.5})
    assert len(first) == 2
    average = load_file(runs / "avg-tail-1/average/model.safetensors")
    last = load_file(runs / "avg-tail-1/checkpoints/round-000002/model/model.safetensors")
    assert all((average[k] == last[k]).all() for k in last)
    assert json.loads((runs / "avg-tail-1/average/workbench.json").read_text())["rounds_averaged"] == 1
    with pytest.raises(ValueError, match=r"method.weight_average.*a share of the rounds in \[0, 1\]"):
        train(db, run="avg-bad", method="coevokg", preset="smoke", steps=1, progress=False, log=None,
              overrides={"method.weight_average": 1.5})
