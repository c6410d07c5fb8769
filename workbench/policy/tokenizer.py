"""A byte-level BPE tokenizer for the tiny backbone, with the protocol tags kept whole.

The tiny backbone (issue 3, "Tiny backbone") is trained from scratch, so it needs its own
tokenizer: byte-level BPE (the scheme Qwen2 uses) trained with ``tokenizers`` on a corpus, plus

- the Search-R1 tags of ``protocol.TAGS`` as added tokens (one id each, never split, decoded as
  plain text so they stay in generated text),
- the chat special tokens ``<|endoftext|>`` (padding) and ``<|im_start|>`` / ``<|im_end|>`` (end of
  a turn, the eos), with a Qwen-like chat template (``<|im_start|>role\\n...<|im_end|>\\n``).

What corpus to pass matters (STACK.md, "Probe"): a tokenizer trained on the world's own entity
names merges frequent names into single tokens, and a warm start trained on fresh names never
learns to copy those tokens. Callers pass generic text plus name syllables (workbench/kg/names.py),
so names decompose the same way in demonstrations and in the world. This module trains on
whatever it is given.

Example:
    >>> tok = train_tokenizer(["Kavimo was born in Dagiju."] * 20, vocab_size=400)
    >>> tok.convert_ids_to_tokens(tok("<search> Kavimo </search>")["input_ids"])[0]
    '<search>'
    >>> tok.decode(tok("<answer> Dagiju </answer>")["input_ids"])
    '<answer> Dagiju </answer>'
"""

from __future__ import annotations

from typing import Iterable, Sequence

from workbench.policy import protocol

PAD, IM_START, IM_END = "<|endoftext|>", "<|im_start|>", "<|im_end|>"
SPECIAL_TOKENS = (PAD, IM_START, IM_END)

# Qwen2.5's template without its default system message (it would cost every prompt ~20 tokens).
CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)


def train_tokenizer(texts: Iterable[str], vocab_size: int, extra_tokens: Sequence[str] = ()):
    """Train a byte-level BPE tokenizer of at most ``vocab_size`` ids (tags and specials included).

    A small corpus may run out of merges before the budget; ``len(tok)`` is the true size.

    ``extra_tokens`` are kept whole like the protocol tags. Returns a
    ``transformers.PreTrainedTokenizerFast`` with pad ``<|endoftext|>``, eos ``<|im_end|>``, left
    padding (for batched generation) and the chat template.

    Example:
        >>> tok = train_tokenizer(["a small corpus"] * 5, vocab_size=300)
        >>> len(tok) <= 300, tok.eos_token, tok.pad_token
        (True, '<|im_end|>', '<|endoftext|>')
    """
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    whole = list(dict.fromkeys([*protocol.TAGS, *extra_tokens]))
    clash = [t for t in whole if t in SPECIAL_TOKENS]
    if clash:
        raise ValueError(f"extra_tokens {clash} clash with the chat special tokens {SPECIAL_TOKENS}")
    alphabet = pre_tokenizers.ByteLevel.alphabet()
    floor = len(alphabet) + len(SPECIAL_TOKENS) + len(whole)
    if vocab_size <= floor:
        raise ValueError(f"vocab_size={vocab_size} is too small: the 256 bytes, {len(SPECIAL_TOKENS)} "
                         f"special tokens and {len(whole)} tags need more than {floor} ids")

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(vocab_size=vocab_size - len(whole), special_tokens=list(SPECIAL_TOKENS),
                                  initial_alphabet=alphabet, show_progress=False)
    tok.train_from_iterator(texts, trainer=trainer)
    # Tags are added after training so BPE never sees them split; normalized=False keeps them exact.
    tok.add_tokens([AddedToken(t, single_word=False, lstrip=False, rstrip=False, normalized=False)
                    for t in whole])

    fast = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token=PAD, eos_token=IM_END,
                                   bos_token=None, unk_token=None,
                                   additional_special_tokens=[IM_START, IM_END], padding_side="left")
    fast.chat_template = CHAT_TEMPLATE
    return fast
