"""The solver's prompts, stops and loss masks under real instruction-tuned chat templates (issue 16).

The tokenizers are built here with ``tokenizers`` (byte-level BPE, as both real ones are) and carry
Qwen2.5-Instruct's and Llama-3.1-Instruct's special tokens and chat templates (their Jinja, minus
the tool-calling branches); the protocol tags are plain text to them, as to the real ones.
"""

from __future__ import annotations

import pytest

from workbench.config import preset
from workbench.policy import protocol
from workbench.policy.generation import _first_stop_prefix
from workbench.policy.model import Policy, tiny_model
from workbench.policy.rollout import rollout

QWEN_TEMPLATE = (
    "{%- if messages[0]['role'] == 'system' %}"
    "{{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}"
    "{%- else %}"
    "{{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- for message in messages %}"
    "{%- if not (message.role == 'system' and loop.first) %}"
    "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}")

LLAMA_TEMPLATE = (
    "{{- bos_token }}"
    "{%- set date_string = '26 Jul 2024' %}"
    "{{- '<|start_header_id|>system<|end_header_id|>\\n\\n' }}"
    "{{- 'Cutting Knowledge Date: December 2023\\n' }}"
    "{{- 'Today Date: ' + date_string + '\\n\\n' }}"
    "{{- '<|eot_id|>' }}"
    "{%- for message in messages %}"
    "{{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' + message['content'] | trim + '<|eot_id|>' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{%- endif %}")

CORPUS = [protocol.SOLVER_INSTRUCTION, protocol.INVALID_ACTION, "Who founded Rome? Romulus founded Rome.",
          "<think>x</think><search> Rome </search> <answer> Romulus </answer>"] * 20


def _tokenizer(kind: str):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    specials = {"qwen": ["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
                "llama": ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>",
                          "<|eot_id|>"]}[kind]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(CORPUS, trainers.BpeTrainer(vocab_size=600, special_tokens=specials,
                                                        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                                        show_progress=False))
    if kind == "qwen":  # Qwen2.5-Instruct: pad <|endoftext|>, eos <|im_end|>, no bos
        fast = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<|endoftext|>", eos_token="<|im_end|>",
                                       additional_special_tokens=specials[1:])
        fast.chat_template = QWEN_TEMPLATE
    else:  # Llama-3.1-Instruct: bos <|begin_of_text|>, eos <|eot_id|>, no pad token
        fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<|begin_of_text|>", eos_token="<|eot_id|>",
                                       additional_special_tokens=specials[2:])
        fast.chat_template = LLAMA_TEMPLATE
    return fast


@pytest.fixture(scope="module", params=["qwen", "llama"])
def policy(request):
    tok = _tokenizer(request.param)
    model = tiny_model(preset("smoke").backbone, tok, seed=0)
    if request.param == "llama":  # Llama-3.1's generation_config ends a turn at either token
        model.generation_config.eos_token_id = [tok.convert_tokens_to_ids("<|end_of_text|>"), tok.eos_token_id]
    return request.param, Policy(model, tok, device="cpu")


def test_chat_prompt_has_the_real_structure_and_one_of_each_special(policy):
    kind, p = policy
    text = p.chat_prompt(protocol.solver_user_message("Who founded Rome?"))
    ids = p.encode(text)
    tok = p.tokenizer
    if kind == "qwen":
        assert text.endswith("<|im_start|>user\n" + protocol.solver_user_message("Who founded Rome?")
                             + "<|im_end|>\n<|im_start|>assistant\n")
        assert ids.count(tok.convert_tokens_to_ids("<|im_start|>")) == 3  # system, user, assistant
    else:
        assert text.startswith("<|begin_of_text|><|start_header_id|>system<|end_header_id|>")
        assert text.endswith("<|start_header_id|>assistant<|end_header_id|>\n\n")
        assert ids.count(tok.bos_token_id) == 1  # the template's; encode adds no second one
        assert p.tokenizer.pad_token == p.tokenizer.eos_token == "<|eot_id|>"  # Policy's pad for a pad-less tokenizer
    assert tok.decode(ids) == text  # specials are single ids that decode to themselves


def test_stop_strings_cut_at_the_first_complete_tag(policy):
    _, p = policy
    ids = p.encode("<think>x</think><search> Rome </search>\n\nRomulus founded it")
    k = _first_stop_prefix(p.tokenizer, ids, protocol.STOP_STRINGS)
    assert "</search>" in p.tokenizer.decode(ids[:k]) and "</search>" not in p.tokenizer.decode(ids[:k - 1])
    assert protocol.parse_action(p.tokenizer.decode(ids[:k])) == protocol.Action("search", "Rome")


def test_rollout_masks_exactly_the_inserted_text(policy):
    """A random model writes no valid action: every turn ends in the corrective message, inserted
    with mask 0; everything the model wrote (its eos included) has mask 1."""
    kind, p = policy
    trajs = rollout(p, None, ["Who founded Rome?", "Where is Rome?"], 2, max_turns=3, topk=1, temperature=1.0,
                    max_new_tokens=12, max_total_tokens=400, seed=1)
    corrective = p.encode(protocol.INVALID_ACTION)
    eos = set(p.model.generation_config.eos_token_id if isinstance(p.model.generation_config.eos_token_id, list)
              else [p.tokenizer.eos_token_id])
    for t in trajs:
        assert len(t.response_ids) == len(t.loss_mask) == len(t.old_logprobs)
        i, inserted = 0, 0
        while i < len(t.response_ids):
            if t.loss_mask[i] == 0:
                assert t.response_ids[i:i + len(corrective)] == corrective
                assert all(lp == 0.0 for lp in t.old_logprobs[i:i + len(corrective)])
                i += len(corrective)
                inserted += 1
            else:
                assert t.old_logprobs[i] < 0.0
                i += 1
        assert inserted == t.turns - 1 + (t.finished_reason not in ("max_turns", "answer", "length"))
        ended = [x for x in t.response_ids if x in eos]
        assert all(t.loss_mask[t.response_ids.index(x)] == 1 for x in ended)
        assert "<|" not in t.text  # special tokens never reach the parsed text
