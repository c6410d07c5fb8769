"""Does padding a tokenizer to a paper vocabulary with added tokens slow tokenisation? (issue 14)

The paper-shape models of ``bench.gpu.paper_shape_folder`` pad the tiny tokenizer with ~148k
added ``<|padN|>`` tokens to Qwen2.5's 151,936; vLLM with stop strings ran at half the speed of
vLLM with stop token ids on such a model (LOG.md, session 11), and the padding was one suspect.
This times, on this machine's CPU, the tokenizer as shipped and padded, each way the loop or an
engine uses it: encoding a 600-token prompt, decoding 64 tokens, a ``DecodeStream`` step (how a
streaming detokenizer adds one token) and decoding a short growing suffix per token (the older
incremental way). Prints JSON with the padded/plain ratios; the best of several repeats counts,
the two tokenizers measured twice, alternating.

    PYTHONPATH=$PWD python3 dev/tokenizer_pad_bench.py [--tokenizer DIR] [--vocab 151936]
"""

from __future__ import annotations

import argparse
import json
import time

from tokenizers.decoders import DecodeStream
from transformers import AutoTokenizer

from workbench import paths


def best(fn, repeats: int) -> float:
    """The fastest of ``repeats`` calls of ``fn``, in seconds."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def timings(tok, ids: list[int], prompt: str) -> dict[str, float]:
    """Per-operation times of one tokenizer on the same text."""
    def stream():
        ds = DecodeStream(skip_special_tokens=False)
        for i in ids[:2000]:
            ds.step(tok._tokenizer, i)

    def suffixes():
        for k in range(1, 400):
            tok.decode(ids[max(0, k - 6):k])

    return dict(encode_600_tokens_ms=1e3 * best(lambda: [tok(prompt)["input_ids"] for _ in range(50)], 5) / 50,
                decode_64_tokens_ms=1e3 * best(lambda: [tok.decode(ids[:64]) for _ in range(200)], 5) / 200,
                decodestream_step_us=1e6 * best(stream, 3) / 2000,
                suffix_decode_step_us=1e6 * best(suffixes, 3) / 399)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokenizer", default=str(paths.project_root() / "data/pretrained/warmstart/4a2ab7ba5bdebc8f"),
                    help="a tokenizer folder (default: the shipped tiny warm start's)")
    ap.add_argument("--vocab", type=int, default=151936, help="the padded vocabulary (default Qwen2.5's)")
    args = ap.parse_args()
    plain, padded = (AutoTokenizer.from_pretrained(args.tokenizer) for _ in range(2))
    padded.add_tokens([f"<|pad{i}|>" for i in range(args.vocab - len(plain))])
    ids = plain((paths.project_root() / "README.md").read_text()[:20000])["input_ids"][:4096]
    prompt = plain.decode(ids[:600])
    rows: dict[str, dict[str, float]] = {}
    for _ in range(2):  # alternating, so neither pays the first call's one-time costs alone
        for name, tok in (("plain", plain), ("padded", padded)):
            rows[name] = {k: min(v, rows.get(name, {}).get(k, v)) for k, v in timings(tok, ids, prompt).items()}
    print(json.dumps({"vocab": {"plain": len(plain), "padded": len(padded)}, **rows,
                      "padded_over_plain": {k: rows["padded"][k] / rows["plain"][k] for k in rows["plain"]}},
                     indent=1))


if __name__ == "__main__":
    main()
