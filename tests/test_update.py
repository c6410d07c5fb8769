"""Section 3.5: Eqs. 11-12 by hand, the probability scale, the clipped surrogate with k3 KL, TRL
1.16's GRPO loss on the same batch, and the non-finite guard."""

import doctest
import math

import pytest
import torch

from workbench.method import update
from workbench.method.update import (NonFiniteGuard, grpo_advantages, is_finite_step, policy_loss,
                                     probability_scale, reinforce_pp_advantages)


def test_doctests():
    assert doctest.testmod(update).failed == 0


def test_grpo_advantages_eq11():
    # group 1: [1, 0, 0, 0]: mean .25; sample std sqrt((.5625 + 3 * .0625) / 3) = sqrt(.25) = .5
    #   -> [1.5, -.5, -.5, -.5]
    # group 2: [2, 2, 2, 2]: std 0 -> all 0 (eps keeps it finite)
    a = grpo_advantages([1.0, 0.0, 0.0, 0.0, 2.0, 2.0, 2.0, 2.0], group_size=4, eps=1e-6)
    assert torch.allclose(a, torch.tensor([1.5, -0.5, -0.5, -0.5, 0, 0, 0, 0]), atol=1e-5)
    # R_s values of Eq. 7: [1.1, 1.2, 0, 0]: mean .575; deviations .525 .625 -.575 -.575;
    # squares .275625 .390625 .330625 .330625 = 1.3275 / 3 = .4425; std .665207
    b = grpo_advantages([1.1, 1.2, 0.0, 0.0], group_size=4, eps=0.0)
    assert torch.allclose(b, torch.tensor([0.525, 0.625, -0.575, -0.575]) / math.sqrt(0.4425), atol=1e-5)
    with pytest.raises(ValueError):
        grpo_advantages([1.0, 0.0, 1.0], group_size=2)


@pytest.mark.parametrize("reward", [0.7, 1.2, 0.1, 1 / 3])
def test_a_group_of_equal_rewards_gets_advantage_exactly_zero(reward):
    # Eq. 7's R_s = EM + beta S_path is rarely a float the group mean reproduces exactly: the mean's
    # rounding divided by eps (std 0) gave every row of such a group the same advantage, 0.056 for
    # eight rewards of 0.7 and 0.106 for 1.2, pushing the whole group up or down
    a = grpo_advantages([reward] * 8 + [1.0, 0.0] * 4, group_size=8)
    assert a[:8].tolist() == [0.0] * 8 and torch.allclose(a[8:], torch.tensor([1.0, -1.0] * 4) * math.sqrt(7 / 8),
                                                          atol=1e-5)


def test_reinforce_pp_advantages_eq12():
    mask = torch.tensor([[1, 1, 1], [1, 1, 0]])
    # gamma .5: seq 1 reward 1 at t=2 -> G = [.25, .5, 1]; seq 2 reward -1 at t=1 -> G = [-.5, -1, -]
    # valid G: .25 .5 1 -.5 -1 -> mean .05; deviations .2 .45 .95 -.55 -1.05;
    # squares .04 .2025 .9025 .3025 1.1025 = 2.55 / 5 = .51 -> sigma .714143
    a = reinforce_pp_advantages(torch.tensor([1.0, -1.0]), mask, gamma=0.5, eps=0.0)
    s = math.sqrt(0.51)
    expected = torch.tensor([[0.2 / s, 0.45 / s, 0.95 / s], [-0.55 / s, -1.05 / s, 0.0]])
    assert torch.allclose(a, expected, atol=1e-5)
    # whitened over the global batch: valid tokens have mean 0, (population) std 1
    valid = a[mask.bool()]
    assert abs(float(valid.mean())) < 1e-6 and float(valid.std(unbiased=False)) == pytest.approx(1.0, abs=1e-5)
    with pytest.raises(ValueError, match="no valid token"):
        reinforce_pp_advantages(torch.tensor([1.0]), torch.zeros(1, 3))


def test_probability_scale():
    lp = torch.log(torch.tensor([[0.1, 0.9]]))
    # low .2, high 1: .2 + .8 * .1 = .28 and .2 + .8 * .9 = .92
    assert torch.allclose(probability_scale(lp, 0.2, 1.0), torch.tensor([[0.28, 0.92]]))
    assert torch.equal(probability_scale(lp, 1.0, 1.0), torch.ones(1, 2))  # disabled
    lp.requires_grad_(True)
    assert not probability_scale(lp).requires_grad  # a weight, not a gradient path
    with pytest.raises(ValueError):
        probability_scale(lp, 1.0, 0.5)


def test_policy_loss_by_hand():
    # two tokens of one sequence, A = 1: token 1 ratio exp(.5) = 1.6487 > 1.2 -> clipped to 1.2;
    # token 2 ratio exp(-.5) = .6065 (A > 0: min(.6065, .8) = .6065, unclipped)
    new = torch.tensor([[-0.5, -1.5]])
    old = torch.tensor([[-1.0, -1.0]])
    ref = torch.tensor([[-1.0, -1.0]])
    mask = torch.ones(1, 2)
    loss, st = policy_loss(new, old, ref, torch.tensor([1.0]), mask, clip_eps=0.2, kl_coef=0.0)
    # pg per token: -1.2, -.606531 -> mean -.903265
    assert float(loss) == pytest.approx(-(1.2 + math.exp(-0.5)) / 2, rel=1e-5)
    assert st["clip_fraction"] == 0.5
    # k3: d = ref - new = [-.5, .5]: exp(-.5) + .5 - 1 = .106531; exp(.5) - .5 - 1 = .148721 -> mean .127626
    kl_mean = (math.exp(-0.5) + 0.5 - 1 + math.exp(0.5) - 0.5 - 1) / 2
    loss2, st2 = policy_loss(new, old, ref, torch.tensor([1.0]), mask, 0.2, kl_coef=0.5)
    assert st2["kl"] == pytest.approx(kl_mean, rel=1e-5)
    assert float(loss2) == pytest.approx(float(loss) + 0.5 * kl_mean, rel=1e-5)
    # A = -1: token 1 ratio 1.6487: -min(-1.6487, -1.2) = 1.6487 (unclipped side); token 2 ratio .6065 <
    # .8 with A < 0 -> -min(-.6065, -.8) = .8 (clipped); mean (1.648721 + .8) / 2
    loss3, st3 = policy_loss(new, old, None, torch.tensor([-1.0]), mask, 0.2, 0.0)
    assert float(loss3) == pytest.approx((math.exp(0.5) + 0.8) / 2, rel=1e-5)
    assert st3["clip_fraction"] == 0.5


def test_policy_loss_aggregation_and_mask():
    # seq 1 has 3 valid tokens with per-token loss -1 (ratio 1, A 1); seq 2 one token with loss +2 (A -2)
    z = torch.zeros(2, 3)
    mask = torch.tensor([[1, 1, 1], [1, 0, 0]])
    adv = torch.tensor([[1.0, 1.0, 1.0], [-2.0, 99.0, 99.0]])  # masked positions must not count
    tok, _ = policy_loss(z, z, z, adv, mask, 0.2, 0.1)
    seq, _ = policy_loss(z, z, z, adv, mask, 0.2, 0.1, aggregation="seq-mean-token-mean")
    assert float(tok) == pytest.approx((-3 + 2) / 4)  # token-mean over 4 valid tokens
    assert float(seq) == pytest.approx((-1 + 2) / 2)  # mean of per-sequence means
    with pytest.raises(ValueError, match="token-mean"):
        policy_loss(z, z, z, adv, mask, 0.2, 0.1, aggregation="sum")


def test_non_finite_guard():
    assert is_finite_step(1.0, torch.tensor(0.5)) and not is_finite_step(torch.tensor(float("nan")))
    g = NonFiniteGuard(max_consecutive=3)
    assert g.check(0.1, 0.0)
    assert not g.check(float("nan"), 0.0) and not g.check(0.1, float("inf"))
    assert g.check(0.2, 0.0) and g.consecutive == 0 and g.skipped == 2  # a finite step resets the run
    assert not g.check(float("inf")) and not g.check(float("nan"))
    with pytest.raises(RuntimeError, match="3 consecutive steps had a non-finite loss or KL \\(last at step 9\\)"):
        g.check(float("nan"), 0.0, step=9)


# --- TRL 1.16's own GRPO loss on the same batch --------------------------------------------------

@pytest.fixture(scope="module")
def trl_trainers(tmp_path_factory):
    """Two real GRPOTrainers (loss_type 'bnpo' and 'grpo') on one tiny random Qwen2 saved to disk."""
    import os
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from datasets import Dataset
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM
    from trl import GRPOConfig, GRPOTrainer

    root = tmp_path_factory.mktemp("trl")
    vocab = {f"w{i}": i for i in range(62)} | {"<pad>": 62, "<eos>": 63}
    raw = Tokenizer(models.WordLevel(vocab, unk_token="w0"))
    raw.pre_tokenizer = pre_tokenizers.Whitespace()
    tok = PreTrainedTokenizerFast(tokenizer_object=raw, pad_token="<pad>", eos_token="<eos>")
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(Qwen2Config(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                         num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=64))
    model.save_pretrained(root / "model")
    tok.save_pretrained(root / "model")
    trainers = {}
    for loss_type in ("bnpo", "grpo"):
        # use_bias_correction_kl=False: TRL 1.16 multiplies k3 by the ratio by default; the paper's k3 does not
        args = GRPOConfig(output_dir=str(root / loss_type), use_cpu=True, bf16=False, beta=0.1, epsilon=0.2,
                          loss_type=loss_type, use_bias_correction_kl=False, per_device_train_batch_size=4,
                          num_generations=4, max_completion_length=8, report_to=[], save_strategy="no")
        trainers[loss_type] = GRPOTrainer(model=str(root / "model"), args=args, processing_class=tok,
                                          reward_funcs=[lambda completions, **kw: [0.0] * len(completions)],
                                          train_dataset=Dataset.from_dict({"prompt": ["w1 w2"] * 4}))
    return trainers


# slow: importing TRL, transformers and datasets alone costs ~11 s of CPU here (35 s wall on the shared cores)
@pytest.mark.slow
@pytest.mark.parametrize("loss_type, aggregation", [("bnpo", "token-mean"), ("grpo", "seq-mean-token-mean")])
def test_solver_loss_equals_trl_grpo_loss(trl_trainers, loss_type, aggregation):
    trainer = trl_trainers[loss_type]
    model = trainer.model
    model.eval()  # TRL's eval path: no gradient-accumulation normaliser; dropout is 0 in this config anyway
    g = torch.Generator().manual_seed(1)
    B, P, T = 4, 3, 5
    rewards = torch.tensor([1.2, 0.0, 1.0, 0.0])  # one group of G = 4 solver rewards (Eq. 7 values)
    inputs = {
        "prompt_ids": torch.randint(0, 62, (B, P), generator=g), "prompt_mask": torch.ones(B, P, dtype=torch.long),
        "completion_ids": torch.randint(0, 62, (B, T), generator=g),
        # ragged completions; zeros also stand for retrieved tokens masked out of the loss
        "completion_mask": torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0], [1, 1, 1, 1, 0], [1, 0, 0, 0, 0]]),
        "advantages": grpo_advantages(rewards, group_size=4),
        # old policy differs from the current one, so the clip is active on some tokens
        "old_per_token_logps": -torch.rand(B, T, generator=g) * 6,
        "ref_per_token_logps": -torch.rand(B, T, generator=g) * 6,
    }
    model.zero_grad()
    trl_loss = trainer._compute_loss(model, inputs)
    trl_loss.backward()
    trl_grads = [p.grad.clone() for p in model.parameters()]

    model.zero_grad()
    ids = torch.cat([inputs["prompt_ids"], inputs["completion_ids"]], dim=1)
    logits = model(input_ids=ids, attention_mask=torch.ones_like(ids)).logits[:, P - 1:-1]
    new = torch.log_softmax(logits.float(), dim=-1).gather(-1, inputs["completion_ids"][..., None]).squeeze(-1)
    adv = inputs["advantages"] * probability_scale(new, 1.0, 1.0)[:, 0]  # scaling disabled: definitions coincide
    ours, stats = policy_loss(new, inputs["old_per_token_logps"], inputs["ref_per_token_logps"], adv,
                              inputs["completion_mask"], clip_eps=0.2, kl_coef=0.1, aggregation=aggregation)
    ours.backward()

    assert float(ours.detach()) == pytest.approx(float(trl_loss.detach()), rel=1e-5, abs=1e-6)
    for ours_g, trl_g in zip((p.grad for p in model.parameters()), trl_grads):
        assert torch.allclose(ours_g, trl_g, rtol=1e-4, atol=1e-6)
    metrics = trainer._metrics["eval"]
    assert stats["kl"] == pytest.approx(metrics["kl"][-1], rel=1e-5)
    assert stats["clip_fraction"] == pytest.approx(metrics["clip_ratio/region_mean"][-1], rel=1e-6)
    assert 0 < stats["clip_fraction"] < 1


def test_warmup_rises_linearly_then_holds_and_refuses_negative_steps():
    from workbench.method.update import warmup_lr

    assert [warmup_lr(2.0, s, 2) for s in range(4)] == [1.0, 2.0, 2.0, 2.0]
    assert warmup_lr(2.0, 0, 0) == 2.0
    with pytest.raises(ValueError, match="warmup_steps"):
        warmup_lr(1.0, 0, -1)


def test_adaptive_kl_moves_towards_its_target_by_at_most_the_clipped_error():
    from workbench.method.update import AdaptiveKL

    c = AdaptiveKL(0.1, target=0.02, horizon=10)
    assert c.update(kl=0.03, n=5) == pytest.approx(0.1 * (1 + 0.2 * 0.5))  # 0.5 above target, clipped to 0.2
    assert c.update(kl=0.019, n=5) == pytest.approx(0.11 * (1 - 0.05 * 0.5))  # 5% below: not clipped
    before = c.coef
    assert c.update(kl=float("nan"), n=5) == before  # a skipped (non-finite) step leaves it
    fixed = AdaptiveKL(0.1, target=0.0)
    assert fixed.update(kl=5.0, n=100) == 0.1
    with pytest.raises(ValueError, match="horizon"):
        AdaptiveKL(0.1, target=0.1, horizon=0)
