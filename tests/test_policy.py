"""Tokenizer, tiny backbone, Policy save/load and the HF generation backend (issue 3)."""

import dataclasses

import pytest
import torch

from workbench.config import preset
from workbench.policy import protocol
from workbench.policy.model import Policy, tiny_config, tiny_model
from workbench.policy.tokenizer import train_tokenizer

CORPUS = ["Kavimo Rutel was born in Dagiju. Dagiju is the capital of Lorentia.",
          "The film Tesamu was directed by Kavimo Rutel in the city of Dagiju.",
          protocol.SOLVER_INSTRUCTION] * 20


@pytest.fixture(scope="module")
def tok():
    return train_tokenizer(CORPUS, vocab_size=500)


@pytest.fixture(scope="module")
def policy(tok):
    backbone = dataclasses.replace(preset("smoke").backbone, hidden_size=32, layers=2, heads=2, kv_heads=1)
    return Policy(tiny_model(backbone, tok, seed=0), tok, device="cpu")


def test_tokenizer_keeps_tags_whole_and_round_trips(tok):
    for tag in protocol.TAGS:
        assert tok.convert_ids_to_tokens(tok(tag, add_special_tokens=False)["input_ids"]) == [tag]
    text = ("<think>who?</think>\n<search> Kavimo Rutel </search>\n\n<information>Doc 1(Title: \"Dagiju\") "
            "Dagiju is ünïcode-safe.</information>\n\n<answer> Dagiju </answer>")
    ids = tok(text, add_special_tokens=False)["input_ids"]
    assert tok.decode(ids) == text
    assert tok.convert_ids_to_tokens(ids).count("<search>") == 1
    assert len(tok) <= 500 and tok.pad_token_id != tok.eos_token_id
    prompt = tok.apply_chat_template([{"role": "user", "content": "Q"}], tokenize=False, add_generation_prompt=True)
    assert prompt == "<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\n"


def test_tokenizer_rejects_too_small_vocab():
    with pytest.raises(ValueError, match="vocab_size=100 is too small"):
        train_tokenizer(CORPUS, vocab_size=100)


def test_tiny_param_counts_per_preset():
    big_corpus = [" ".join(f"w{i}x{j}" for j in range(40)) for i in range(400)]
    for name, low, high in (("smoke", 1e5, 1e6), ("tiny", 1e6, 1e7)):
        backbone = preset(name).backbone
        tok = train_tokenizer(big_corpus, vocab_size=backbone.vocab_size)
        n = tiny_config(backbone, tok).vocab_size
        model = tiny_model(backbone, tok, seed=0)
        params = sum(p.numel() for p in model.parameters())
        assert low <= params <= high, (name, params, n)
        assert model.config.tie_word_embeddings
        assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()


def test_tiny_model_is_deterministic_by_seed(tok):
    backbone = preset("smoke").backbone
    a, b, c = (tiny_model(backbone, tok, seed=s) for s in (1, 1, 2))
    assert torch.equal(a.model.embed_tokens.weight, b.model.embed_tokens.weight)
    assert not torch.equal(a.model.embed_tokens.weight, c.model.embed_tokens.weight)


def test_save_load_round_trip_gives_identical_logits(policy, tmp_path):
    policy.save(tmp_path / "m")
    loaded = Policy.load(tmp_path / "m", device="cpu")
    ids = torch.tensor([policy.encode(policy.chat_prompt("Where was Kavimo born?"))])
    with torch.no_grad():
        assert torch.equal(policy.model(ids).logits, loaded.model(ids).logits)
    assert loaded.chat_prompt("x") == policy.chat_prompt("x")
    assert loaded.encode("<search> Dagiju </search>") == policy.encode("<search> Dagiju </search>")


def test_load_bad_path_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match="cannot load a causal LM"):
        Policy.load(tmp_path / "missing", device="cpu")


def test_greedy_is_deterministic_and_batch_independent(policy):
    prompts = [policy.chat_prompt("Where was Kavimo born?"), policy.chat_prompt("Who?")]
    a = policy.generate(prompts, max_new_tokens=12, temperature=0, top_p=1)
    b = policy.generate(prompts, max_new_tokens=12, temperature=0, top_p=1)
    alone = policy.generate(prompts[1:], max_new_tokens=12, temperature=0, top_p=1)
    assert a == b
    assert a[1].token_ids == alone[0].token_ids  # left padding does not change the continuation
    assert all(len(g.token_ids) == len(g.logprobs) for g in a)


def test_sampling_is_deterministic_by_seed(policy):
    prompts = [policy.chat_prompt("Where was Kavimo born?")] * 4
    kw = dict(max_new_tokens=16, temperature=1.0, top_p=0.95)
    a = policy.generate(prompts, seed=7, **kw)
    assert a == policy.generate(prompts, seed=7, **kw)
    assert a != policy.generate(prompts, seed=8, **kw)
    assert len({tuple(g.token_ids) for g in a}) > 1  # rows of one batch sample independently


def test_logprobs_are_raw_policy_logprobs(policy):
    prompts = [policy.chat_prompt("Where was Kavimo born?"), policy.chat_prompt("Who?")]
    gens = policy.generate(prompts, max_new_tokens=10, temperature=0.6, top_p=0.9, seed=0)
    for prompt, gen in zip(prompts, gens):
        ids = torch.tensor([policy.encode(prompt) + gen.token_ids])
        with torch.no_grad():
            lp = policy.token_logprobs(ids, torch.ones_like(ids))[0, -len(gen.token_ids):]
        assert torch.allclose(lp, torch.tensor(gen.logprobs), atol=1e-4)


def test_stop_strings_are_respected(policy, tok):
    prompt = policy.chat_prompt("Where was Kavimo born?")
    free = policy.generate([prompt], max_new_tokens=30, temperature=1.0, top_p=1.0, seed=3)[0]
    assert free.finish_reason in ("length", "eos")
    # Stop on a string the free run is known to produce: generation must end right after it.
    target = free.text[5:8]
    assert target and target not in free.text[:7]
    cut = policy.generate([prompt], max_new_tokens=30, temperature=1.0, top_p=1.0, seed=3, stop=[target])[0]
    assert cut.finish_reason == "stop" and target in cut.text
    assert cut.token_ids == free.token_ids[:len(cut.token_ids)] and len(cut.token_ids) < len(free.token_ids)
    assert target not in policy.tokenizer.decode(cut.token_ids[:-1])
    # The prompt itself holds the stop tags (the instruction): they must not stop generation.
    tagged = policy.chat_prompt(protocol.solver_user_message("Q"))
    assert protocol.SEARCH_CLOSE in tagged
    kw = dict(max_new_tokens=8, temperature=0, top_p=1)
    plain = policy.generate([tagged], **kw)[0]
    assert not any(s in plain.text for s in protocol.STOP_STRINGS)
    assert policy.generate([tagged], stop=protocol.STOP_STRINGS, **kw)[0] == plain


def test_generate_rejects_bad_arguments(policy):
    with pytest.raises(ValueError, match="temperature"):
        policy.generate(["x"], max_new_tokens=4, temperature=-1, top_p=1)


def test_token_logprobs_entropy_over_the_masked_predictions(policy):
    """One routine gives the update its log-probs and entropy: entropy over the positions the mask
    selects, equal to the entropy of the full softmax at the preceding position."""
    ids = torch.tensor([[5, 6, 7, 8], [5, 6, 0, 0]])
    attn = torch.tensor([[1, 1, 1, 1], [1, 1, 0, 0]])
    mask = torch.tensor([[0, 0, 1, 1], [0, 1, 0, 0]])
    logp, entropy = policy.token_logprobs(ids, attn, entropy_mask=mask)
    assert torch.equal(logp, policy.token_logprobs(ids, attn))
    with torch.no_grad():
        logits = policy.model(input_ids=ids, attention_mask=attn).logits.float()
    full = torch.log_softmax(logits, dim=-1)
    ent = -(full.exp() * full).sum(-1)  # entropy of the prediction made at each position
    expected = (ent[0, 1] + ent[0, 2] + ent[1, 0]) / 3
    assert float(entropy) == pytest.approx(float(expected), rel=1e-5)
    assert logp[1, 2:].abs().sum() == 0  # padded positions are 0


def test_choices_constrain_only_what_follows_the_marker(policy, tok):
    """After a generated <answer>, only tokens continuing one of the row's choices survive; before
    it, and in rows without choices, nothing is masked."""
    from workbench.policy.generation import Choices, _ChoiceProcessor

    marker = tok("<answer>", add_special_tokens=False)["input_ids"]
    rome = tok("<answer>Rome</answer>", add_special_tokens=False)["input_ids"][len(marker):]
    proc = _ChoiceProcessor(tok, Choices("<answer>", [["Rome</answer>", "Ann</answer>"], []]), prompt_len=2)
    prompt = tok("<answer>x", add_special_tokens=False)["input_ids"][:2]  # a marker in the prompt does not count
    vocab = len(tok)
    before = torch.tensor([prompt + [5], prompt + [5]])
    assert torch.isfinite(proc(before, torch.zeros(2, vocab))).all()
    after = torch.tensor([prompt + marker + rome[:1], prompt + marker + rome[:1]])
    out = proc(after, torch.zeros(2, vocab))
    assert torch.isfinite(out[0]).sum() == 1 and torch.isfinite(out[0, rome[1]])  # only Rome's next token
    assert torch.isfinite(out[1]).all()  # no choices: free
