"""The paper tier end to end on one GPU without pretrained weights (issue 16's proof).

A random-initialised model of the exact Qwen2.5-3B-Instruct shape (``--shape 3b``; ``7b`` for
Qwen2.5-7B; ``tiny`` for a CPU check) with a byte-level BPE tokenizer padded to that model's
vocabulary size, a synthetic knowledge source (``--source tinyworld``: TinyWorld at ``--entities``
pages, KILT's page / passage / hyperlink-edge schema; ``--source kilt``: a KILT replica of that many
pages in KILT's own file layout, with wiki-18 lines and QA files made from it, through ``workbench
data paper`` as a user's real files go; neither is KILT's text), dense retrieval with a random-initialised
encoder of e5-base-v2's shape (E5 prefixes on: the folder is named ``e5-...``), the paper preset
with the LLM verifier and the LLM path extractor: a few rounds, a checkpoint, a resume, an
evaluation of the best checkpoint, the figures. Each stage prints one JSON line with its seconds
and peak memory (process RSS, and CUDA's peak allocated / reserved when on a GPU); the last line
is the summary of all stages. Inside training, stderr logs each round stage's seconds as it ends and
each update micro-batch, so a call cut short still shows where its time went.

    PYTHONPATH=$PWD python3 scripts/paper_tier_smoke.py --out /tmp/paper-smoke --shape 3b --entities 100000
    PYTHONPATH=$PWD python3 scripts/paper_tier_smoke.py --out /tmp/kilt-smoke --shape 3b --source kilt --entities 100000
    PYTHONPATH=$PWD python3 scripts/paper_tier_smoke.py --out /tmp/wiki-smoke --shape 3b --source wiki --set search.index=bm25

``--source wiki`` runs the same path on real Wikipedia text: the sample ``workbench data wiki-sample``
converts (``--wiki``, default ``data/wiki_sample``), with template questions over its links as the
training sets and the hand-written questions (``data/wiki_questions``) as the test set ``wiki_hand``.

What it shows: the configuration, data path, engine and judges run at the real model shape and
corpus scale, with their time and memory. What it cannot show: accuracy (random weights answer
nothing; every EM is 0, as expected).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import multiprocessing
import os
import re
import resource
import sys
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from workbench.commands import log_to_stderr

ROOT = Path(__file__).resolve().parents[1]
from workbench.method.gpu_bench import SHAPES as PUBLISHED  # the published config.json values

SHAPES = {"3b": PUBLISHED["qwen2.5-3b"], "7b": PUBLISHED["qwen2.5-7b"],
          "tiny": dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,  # a CPU check
                       intermediate_size=128, vocab_size=2048, tie_word_embeddings=True)}
ENCODERS = {"3b": (768, 12, 12, 3072), "7b": (768, 12, 12, 3072), "tiny": (32, 1, 2, 64)}  # e5-base-v2: 768 x 12


class Stages:
    """Seconds and peak memory per stage, one JSON line each."""

    def __init__(self):
        self.rows = []

    def run(self, name, fn, *args, **kwargs):
        import torch

        cuda = torch.cuda.is_available()
        if cuda:
            torch.cuda.reset_peak_memory_stats()
        start = time.perf_counter()
        with contextlib.redirect_stdout(sys.stderr):  # stdout is the JSON lines alone (Unsloth prints its banner)
            out = fn(*args, **kwargs)
        row = {"stage": name, "seconds": round(time.perf_counter() - start, 2),
               "peak_rss_gib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2 ** 20, 2)}
        if cuda:
            row["cuda_peak_allocated_gib"] = round(torch.cuda.max_memory_allocated() / 2 ** 30, 2)
            row["cuda_peak_reserved_gib"] = round(torch.cuda.max_memory_reserved() / 2 ** 30, 2)
        self.rows.append(row)
        print(json.dumps(row), flush=True)
        return out

    def run_apart(self, name, fn, *args, **kwargs):
        """``run`` in a fresh process that exits after it, as separate ``workbench`` commands would:
        the GPU memory a stage's in-process vLLM engine holds is not released when the engine is
        deleted (vLLM issue 21073), so train, resume and evaluate in one process stacked three."""
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(1, mp_context=context, initializer=log_to_stderr, initargs=(logging.DEBUG,)) as pool:
            row = pool.submit(_stage_row, name, fn, args, kwargs).result()
        self.rows.append(row)


def _release_cuda_cache() -> None:
    import gc

    import torch

    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def _stage_row(name, fn, args, kwargs) -> dict:
    """One stage in a child process (``Stages.run_apart``): its row, printed there."""
    stages = Stages()
    stages.run(name, fn, *args, **kwargs)
    return stages.rows[0]


def make_model(folder: Path, shape: str) -> Path:
    """A random-initialised Qwen2 model of ``shape`` and a tokenizer of exactly its vocabulary size."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from workbench.kg.names import syllable_vocabulary
    from workbench.policy import protocol
    from workbench.policy.tokenizer import train_tokenizer

    spec = {k: v for k, v in SHAPES[shape].items() if k != "arch"}
    corpus = [protocol.SOLVER_INSTRUCTION, protocol.PROPOSER_INSTRUCTION, " ".join(syllable_vocabulary())] * 4
    tok = train_tokenizer(corpus, vocab_size=min(spec["vocab_size"], 8000))
    # pad with never-used special tokens up to the model's vocabulary, as Qwen's reserved ids are
    tok.add_tokens([f"<|reserved_{i}|>" for i in range(spec["vocab_size"] - len(tok))], special_tokens=True)
    assert len(tok) == spec["vocab_size"], (len(tok), spec["vocab_size"])
    cfg = Qwen2Config(**spec, max_position_embeddings=32768, rope_theta=1e6, rms_norm_eps=1e-6,
                      pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id, bos_token_id=None)
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(cfg).to(torch.bfloat16 if shape != "tiny" else torch.float32)
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


def make_encoder(folder: Path, shape: str, texts: list[str]) -> Path:
    """A random-initialised BERT of e5-base-v2's shape as a sentence-transformers folder (mean pooling),
    its WordPiece vocabulary the most frequent words of ``texts`` (up to BERT's 30,522 entries), so a
    passage is about as many tokens as e5's own tokenizer makes of English (a characters-only
    vocabulary made ~4x as many, and the index stage ~4x as slow as a real encoder's)."""
    from sentence_transformers import SentenceTransformer, models
    from transformers import BertConfig, BertModel, BertTokenizerFast

    hidden, layers, heads, inter = ENCODERS[shape]
    raw = folder.parent / (folder.name + "-hf")
    chars = [*"abcdefghijklmnopqrstuvwxyz0123456789", *".,;:'\"()-?!/&"]
    words = Counter(w for t in texts for w in re.findall(r"[a-z0-9]+", t.lower()))
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *chars, *(f"##{c}" for c in chars[:36])]
    vocab += [w for w, _ in words.most_common(30_522 - len(vocab)) if len(w) > 1]  # one character: in chars
    raw.mkdir(parents=True, exist_ok=True)
    (raw / "vocab.txt").write_text("\n".join(vocab) + "\n")
    BertTokenizerFast(str(raw / "vocab.txt")).save_pretrained(raw)
    BertModel(BertConfig(vocab_size=len(vocab), hidden_size=hidden, num_hidden_layers=layers,
                         num_attention_heads=heads, intermediate_size=inter)).save_pretrained(raw)
    word = models.Transformer(str(raw), max_seq_length=256)
    SentenceTransformer(modules=[word, models.Pooling(hidden, "mean")]).save(str(folder))
    return folder


def make_kilt_inputs(folder: Path, pages: int, questions: int) -> dict:
    """What ``workbench data paper`` reads, made from a KILT replica of ``pages`` pages alone:
    ``kilt.jsonl`` (``write_replica``), ``wiki18.jsonl`` in Search-R1's layout (each page's second
    paragraph under its title) and ``qa/`` in FlashRAG's layout (``nq/train``, ``hotpotqa/train``,
    ``nq/test``, a third of ``questions`` each) asking which page an article links under an anchor's
    words (the answer: a title the replica holds)."""
    from workbench.kg.kilt_replica import write_replica

    folder.mkdir(parents=True, exist_ok=True)
    replica = write_replica(folder / "kilt.jsonl", pages, seed=0)
    rows, passages = [], 0
    with open(folder / "kilt.jsonl", encoding="utf-8") as kilt, open(folder / "wiki18.jsonl", "w") as wiki:
        for line in kilt:
            page = json.loads(line)
            title, text = page["wikipedia_title"], page["text"]
            if len(text) > 1:
                wiki.write(json.dumps({"id": str(passages), "contents": f'"{title}"\n{text[1].strip()}'}) + "\n")
                passages += 1
            link = next((a for a in page["anchors"] if a.get("wikipedia_title")), None)
            if link and len(rows) < questions:
                rows.append({"id": str(len(rows)), "golden_answers": [link["wikipedia_title"]],
                             "question": f'Which page does the article {title} link as "{link["text"]}"?'})
    for k, (name, split) in enumerate((("nq", "train"), ("hotpotqa", "train"), ("nq", "test"))):
        (folder / "qa" / name).mkdir(parents=True, exist_ok=True)
        with open(folder / "qa" / name / f"{split}.jsonl", "w") as f:
            f.writelines(json.dumps(r) + "\n" for r in rows[k::3])
    return {"pages": replica["pages"], "kilt_bytes": replica["bytes"], "wiki18_passages": passages,
            "questions": len(rows)}


def make_wiki_inputs(folder: Path, sample: Path, questions: Path) -> dict:
    """What ``workbench data paper`` reads, from a converted real-text sample (``workbench data
    wiki-sample``): its KILT and wiki-18 files as they are, and ``qa/`` with training sets of template
    questions over its recovered links (``nq/train``, ``hotpotqa/train``: 'In the article T, which page
    does "S" refer to?', the answer the linked page's title; one per page, its first anchor) and the
    hand-written questions as the test set ``wiki_hand/test``."""
    import gzip
    import shutil

    from workbench.kg import wiki_sample

    if not wiki_sample.is_converted(sample):
        raise FileNotFoundError(f"--wiki {sample}: no converted sample; run `workbench data wiki-sample` first")
    folder.mkdir(parents=True, exist_ok=True)
    for name in (wiki_sample.KILT_FILE, wiki_sample.WIKI18_FILE):
        shutil.copyfile(sample / name, folder / name)
    rows, pages = [], 0
    with gzip.open(sample / wiki_sample.KILT_FILE, "rt", encoding="utf-8") as kilt:
        for line in kilt:
            page = json.loads(line)
            pages += 1
            if page["anchors"]:
                a = page["anchors"][0]
                rows.append({"id": str(len(rows)), "golden_answers": [a["wikipedia_title"]],
                             "question": f'In the article {page["wikipedia_title"]}, which page does "{a["text"]}" refer to?'})
    for k, name in enumerate(("nq", "hotpotqa")):
        (folder / "qa" / name).mkdir(parents=True, exist_ok=True)
        with open(folder / "qa" / name / "train.jsonl", "w") as f:
            f.writelines(json.dumps(r) + "\n" for r in rows[k::2])
    (folder / "qa" / "wiki_hand").mkdir(parents=True, exist_ok=True)
    shutil.copyfile(questions, folder / "qa" / "wiki_hand" / "test.jsonl")
    return {"pages": pages, "train_questions": len(rows),
            "test_questions": sum(1 for line in open(questions) if line.strip())}


def data_paper(db: Path, inputs: Path, encoder: Path, cfg, val: int, dataset: str = "nq",
               kilt: str = "kilt.jsonl", wiki18: str = "wiki18.jsonl") -> list[dict]:
    """``workbench data paper`` on ``make_kilt_inputs``'s (or ``make_wiki_inputs``') files, one test set."""
    from workbench import store
    from workbench.data_pipeline import paper_steps, run_steps

    steps = paper_steps(inputs / kilt, inputs / wiki18, inputs / "qa", encoder, cfg,
                        datasets=(dataset,), val=val, progress=False)
    con = store.connect(db)
    try:
        return [{k: v for k, v in r.items() if k != "report"} for r in run_steps(con, steps)]
    finally:
        con.close()


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True, help="working folder (store, models, runs, figures)")
    p.add_argument("--shape", choices=sorted(SHAPES), default="3b")
    p.add_argument("--entities", type=int, default=100_000, help="TinyWorld's entities, or the KILT replica's pages")
    p.add_argument("--source", choices=["tinyworld", "kilt", "wiki"], default="tinyworld",
                   help="tinyworld: a TinyWorld store; kilt: a KILT replica, wiki-18 lines and QA files made from it, "
                        "through workbench data paper (KILT import, wiki-18, E5 index, QA, seed pool, G_0); wiki: the "
                        "real-text sample (--wiki) through workbench data paper, tested on the hand-written questions")
    p.add_argument("--wiki", default=str(ROOT / "data" / "wiki_sample"),
                   help="--source wiki: the converted sample folder (default data/wiki_sample; --entities is ignored)")
    p.add_argument("--questions", default=str(ROOT / "data" / "wiki_questions" / "questions.jsonl"),
                   help="--source wiki: the test questions (default the hand-written ones)")
    p.add_argument("--rounds", type=int, default=2, help="rounds before the resume (one more after it)")
    p.add_argument("--slots", type=int, default=8, help="method.chains_per_round")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="SECTION.FIELD=VALUE")
    args = p.parse_args(argv)
    log_to_stderr(logging.DEBUG)  # each round stage's seconds as it ends and each update micro-batch
    os.environ.setdefault("VLLM_LOGGING_STREAM", "ext://sys.stderr")  # vLLM logs to stdout by default
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    for env, sub in (("WORKBENCH_DATA", "data"), ("WORKBENCH_RUNS", "runs"), ("WORKBENCH_FIGURES", "figures")):
        os.environ[env] = str(out / sub)

    from workbench import figures, store
    from workbench.evaluate import evaluate
    from workbench.kg.pool import build_pool
    from workbench.kg.tinyworld import build_world
    from workbench.method.train import train
    from workbench.search.retriever import make_retriever
    from workbench.config import preset

    stages = Stages()
    model = stages.run("model", make_model, out / "models" / f"qwen2.5-{args.shape}-random", args.shape)
    encoder = out / "models" / f"e5-base-random-{args.shape}"
    kilt = args.source in ("kilt", "wiki")  # both go through workbench data paper
    dataset = {"kilt": "nq", "wiki": "wiki_hand"}.get(args.source, "tinyworld")  # evaluation's test set
    if args.source == "wiki":
        args.entities = json.loads((Path(args.wiki) / "manifest.json").read_text())["pages"]
    overrides = {"method.steps": args.rounds, "method.chains_per_round": args.slots, "method.val_questions": 4,
                 "search.dense_model": str(encoder), "pool.walks": min(200_000, 4 * args.entities),
                 **({} if kilt else {"method.seed_dataset": "tinyworld", "method.val_dataset": "tinyworld"}),
                 **dict(kv.split("=", 1) for kv in args.overrides)}
    cfg = preset("paper", **overrides)
    db = out / "data" / "paper.duckdb"
    if kilt:
        import gzip

        from workbench.kg import wiki_sample

        inputs = out / "inputs"
        files = {"kilt": "kilt.jsonl", "wiki18": "wiki18.jsonl"}
        if args.source == "wiki":
            stages.run("wiki inputs", make_wiki_inputs, inputs, Path(args.wiki), Path(args.questions))
            files = {"kilt": wiki_sample.KILT_FILE, "wiki18": wiki_sample.WIKI18_FILE}
        else:
            stages.run("kilt inputs", make_kilt_inputs, inputs, args.entities, questions=3 * min(2000, args.entities))
        with (gzip.open if files["wiki18"].endswith(".gz") else open)(inputs / files["wiki18"], "rt") as f:
            sample = [json.loads(line)["contents"] for _, line in zip(range(20000), f)]
        stages.run("encoder", make_encoder, encoder, args.shape, sample)
        stages.run("data paper", data_paper, db, inputs, encoder, cfg, val=max(4, min(500, args.entities // 100)),
                   dataset=dataset, **files)
    else:
        con = store.connect(db)
        try:
            stages.run("world", build_world, con, preset="tiny", n_entities=args.entities)
            stages.run("pool G_0", build_pool, con, cfg.pool.walks, cfg.pool.min_hops, cfg.pool.max_hops, seed=0)
            sample = [t for (t,) in con.execute(
                "SELECT text FROM passages USING SAMPLE reservoir(20000 ROWS) REPEATABLE (0)").fetchall()]
            stages.run("encoder", make_encoder, encoder, args.shape, sample)
            stages.run("dense index", make_retriever, con, cfg.search)
        finally:
            con.close()
    _release_cuda_cache()  # the encoder's and index's cached blocks, before the child processes start
    kw = dict(run="paper-smoke", method="coevokg", preset="paper", model=str(model), progress=True)  # rounds on stderr
    stages.run_apart(f"train {args.rounds} rounds", train, str(db), overrides=overrides, **kw)
    stages.run_apart("resume +1 round", train, str(db), overrides={**overrides, "method.steps": args.rounds + 1},
                     resume=True, **kw)
    best = out / "runs" / "paper-smoke" / "best"
    stages.run_apart("evaluate best", evaluate, str(db), best if best.exists() else model, dataset, "test",
                     limit=8, preset="paper",
                     overrides={k: v for k, v in overrides.items() if not k.startswith("method.")},
                     backbone=f"qwen2.5-{args.shape}-random", method="coevokg")
    stages.run("figures", figures.build_all, db=str(db), out_dir=str(out / "figures"))
    print(json.dumps({"summary": stages.rows, "shape": args.shape, "source": args.source, "entities": args.entities}),
          flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
