"""Warm start of the tiny backbone: the role of the paper's instruction-tuned base (seed 000, 4.1).

The paper starts from instruction-tuned models that already follow the search protocol a little.
The tiny backbone starts from random weights, so the workbench gives it that ability by supervised
fine-tuning on demonstrations, then leaves the rest to RL. Two kinds of demonstration:

- solver: the Search-R1 protocol (workbench/policy/protocol.py) played perfectly on a TinyWorld
  question: search the chain's entities in order (the query is the entity's title, read from the
  question or copied from the previous passage), with the real search tool's rendered top-k
  inside ``<information>`` exactly as a rollout inserts it, then answer. Loss only on what the
  model generates; the prompt and every information block are masked (label -100).
- proposer: a chain (titles, relations, node passages; ``protocol.proposer_user_message``) ->
  ``protocol.format_candidate(question, answer)`` and the end-of-turn token.

Design forced by the probe (STACK.md, "Probe: can a from-scratch tiny LM learn to search?"):

1. Demonstrations come from many small throwaway TinyWorlds (fresh seeds, hence fresh names), never
   from the evaluated world, so the model must copy names out of passages instead of memorising
   facts. Each world yields few questions and each demonstration is seen once: a first version
   took ~1,200 questions from each 300-entity world and showed each twice; it reached train loss
   0.1 by memorising the throwaway worlds and scored 0 EM on every val family (measured
   2026-11-30, LOG.md).
2. The tokenizer is trained on generic text (the protocol, the throwaway worlds' passages and
   questions) plus the name-syllable inventory (workbench/kg/names.py), never on the evaluated
   world, so names split into the same pieces in demonstrations and in the world.
3. The base is validated on held-out entities of the actual world: greedy EM per question family
   on its val split.

Measured (2026-11-30, one H200, tiny preset sizes, seed 0, batch 16, lr 1e-3): with single- and
two-hop demonstrations only (v1), copying emerged between steps 1,500 and 3,000 (loss 2.2 -> 0.47;
with 2,000 steps val EM was 0 everywhere); with every family in the mix it comes later (loss
0.58 at 4,000 steps), hence the tiny preset's 6,000. The shipped model's own loss curve and val EM per family are in its
``workbench.json``; LOG.md keeps every version's numbers.

Leaving room for RL: a first version saw only single_hop and two_hop demonstrations and scored
0 EM on the other three families, which left GRPO no successful rollout to reinforce there (and
RL did not move it, LOG.md). So the demonstrations cover every family, but the three longer
ones (``LONG_FAMILIES``) only at the rate ``backbone.sft_long_rate`` (the share of their
questions kept): the base can solve some of them, and RL has the rest to learn.

The SFT loop is a plain torch AdamW loop (ours, documented here rather than TRL's SFTTrainer):
the masks are built by segment, so a collator would add nothing, and on 2 CPU cores the loop's
lack of overhead matters. Linear warm-up then cosine decay to 10%, gradient clipping at 1.0,
length-bucketed batches (ours).

Cache: the result lives in ``paths.cache_dir()/warmstart/<key>`` where ``key`` (``cache_key``)
hashes the evaluated world's passages, the settings that shape the model, the seed, the warm-start
parameters and ``WARMSTART_VERSION``, a number bumped by hand when the recipe changes what it makes
(``recipe_fingerprint``, pinned by a test, tells when). A second call with the same inputs loads it
instead of training.

Example:
    >>> from workbench.policy.warmstart import solver_queries
    >>> solver_queries("two_hop", ["Kavimo", "Dagiju", "Velor"], "Velor", path=True)
    ['Kavimo', 'Dagiju']
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import tempfile
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Protocol, Sequence

import numpy as np

from workbench import paths, store
from workbench.policy import protocol

DEMO_FAMILIES = ("single_hop", "two_hop", "three_hop", "comparison", "bridge")
LONG_FAMILIES = ("three_hop", "comparison", "bridge")  # kept at backbone.sft_long_rate (ours)
DEMO_ENTITIES = 150  # ours: entities per throwaway world
DEMO_PRESET = "smoke"  # ours: throwaway worlds get the smoke preset's question count (20 per family
# and split), so each entity appears in only one or two demonstrations
DEMO_EPOCHS = 1.0  # ours: each demonstration seen once (fresh names per example)
PROPOSER_SHARE = 0.2  # ours: share of proposer demonstrations in the mix
VAL_PER_FAMILY = 40  # ours: val questions per family for the warm start's report
MAX_WORLDS = 2000  # ours: safety cap on throwaway worlds
WORLD_SEED_OFFSET = 1_000_003  # throwaway worlds use seeds far from any evaluated world's


# ---------------------------------------------------------------- demonstrations as text segments

@dataclass
class Demo:
    """One demonstration as text segments: ``(text, trained)``; the first is the user message
    (wrapped in the chat template at tokenisation), the rest are assistant-side pieces."""

    role: str  # 'solver' or 'proposer'
    family: str
    user: str
    segments: list[tuple[str, bool]] = field(default_factory=list)


def solver_queries(family: str, titles: Sequence[str], answer: str, path: bool) -> list[str]:
    """The searches of a perfect solver: every chain entity in order, except the last one of a
    path chain when it is the answer (its name is already in the previous passage).

    Example:
        >>> solver_queries("comparison", ["Rutel", "Kavimo"], "Kavimo", path=False)
        ['Rutel', 'Kavimo']
    """
    titles = list(titles)
    if path and titles and titles[-1].strip().lower() == answer.strip().lower():
        titles = titles[:-1]
    return titles


def solver_demo(search, question: str, family: str, titles: Sequence[str], answer: str,
                path: bool, kg=None) -> Demo:
    """A perfect solver trajectory: search, read the real tool's hits, ..., answer.

    With ``kg`` (DynaSearcher's KG tool, seed 003) the prompt offers both tools, and a hop of a
    path chain that is a relation lookup -- the KG tool's filtered answer for the hop's entity
    names the next entity -- is taken with ``<kg_search>`` instead of document search.

    Example:
        >>> # solver_demo(SearchTool(con), "Where was Kavimo born?", "single_hop",
        >>> #             ["Kavimo", "Dagiju"], "Dagiju", path=True).segments[0]
        >>> # ('<search> Kavimo </search>', True)
    """
    if kg is not None:
        return _kg_solver_demo(search, kg, question, family, titles, answer, path)
    demo = Demo("solver", family, protocol.solver_user_message(question))
    queries = solver_queries(family, titles, answer, path)
    results = search.search(queries) if queries else []
    for query, hits in zip(queries, results):
        demo.segments.append((f"{protocol.SEARCH_OPEN} {query} {protocol.SEARCH_CLOSE}", True))
        demo.segments.append((protocol.information_block(search.render(hits)), False))
    demo.segments.append((f"{protocol.ANSWER_OPEN} {answer} {protocol.ANSWER_CLOSE}", True))
    return demo


def _kg_solver_demo(search, kg, question: str, family: str, titles: Sequence[str], answer: str,
                    path: bool) -> Demo:
    demo = Demo("solver", family, protocol.solver_user_message(question, kg=True))
    queries = solver_queries(family, titles, answer, path)
    for i, query in enumerate(queries):
        hit = kg.search([query], [question])[0] if path and i + 1 < len(titles) else None
        if hit is not None and any(titles[i + 1] in (t.head, t.tail) for t in hit.triples):
            demo.segments.append((f"{protocol.KG_SEARCH_OPEN} {query} {protocol.KG_SEARCH_CLOSE}", True))
            demo.segments.append((protocol.information_block(kg.render(hit)), False))
        else:
            demo.segments.append((f"{protocol.SEARCH_OPEN} {query} {protocol.SEARCH_CLOSE}", True))
            demo.segments.append((protocol.information_block(search.render(search.search([query])[0])), False))
    demo.segments.append((f"{protocol.ANSWER_OPEN} {answer} {protocol.ANSWER_CLOSE}", True))
    return demo


# ours: entities a graph-tool demonstration passes on per call or answers (10 names: ~40 tokens of a turn's 64)
DEMO_MAX_LISTED = 10


def names_relation(question: str, relation: str) -> bool:
    """Whether ``question`` names ``relation``: every content word of the label occurs in it (ours:
    a perfect graph-tool solver then follows it at once, else it lists the entity's relations first).

    Example:
        >>> names_relation("Where was Ann born?", "born in"), names_relation("Where is Acme based?", "headquartered in")
        (True, False)
    """
    from workbench.search.kg_search import content_words

    label = content_words(relation)
    return bool(label) and label <= content_words(question)


def tool_demo(calls: Sequence[tuple[str, str, str]], answers: Sequence[str]) -> list[tuple[str, bool]]:
    """A graph-tool trajectory's segments: each ``(kind, text, rendered)`` call as ``<kind> text
    </kind>`` (trained) and its rendered result as an information block (not trained), then the
    answers, ``;``-separated, inside ``<answer>`` (trained).

    Example:
        >>> tool_demo([("neighbors", "Ann | born in", "Ann --born in--> Rome\\n")], ["Rome"])[0]
        ('<neighbors> Ann | born in </neighbors>', True)
    """
    segments = []
    for kind, text, rendered in calls:
        segments.append((f"<{kind}> {text} </{kind}>", True))
        segments.append((protocol.information_block(rendered), False))
    segments.append((f"{protocol.ANSWER_OPEN} {'; '.join(answers)} {protocol.ANSWER_CLOSE}", True))
    return segments


def graph_solver_demo(graph, question: str, family: str, chain: Sequence[int], relations: Sequence[str | None],
                      answer: str) -> Demo | None:
    """A perfect solver with EoG's graph tools (``search.graph_tools.GraphTools``) on a question of the
    five families, or None where it is not one (ours): along a path chain, each hop lists the entity's
    relations first unless the question names the hop's relation (:func:`names_relation`), then follows
    it with ``<neighbors>``; a comparison reads each subject's one year relation (``... in year``) the
    same way, then answers. None when a hop reaches more than the chain's next entity (the graph does
    not single out the gold answer), or a subject has no single year relation.

    Example:
        >>> # graph_solver_demo(GraphTools(con), "Where was Ann born?", "single_hop", [1, 2], ["born in"], "Rome")
    """
    titles = graph.titles
    calls: list[tuple[str, str, str]] = []

    def follow(entity: int, relation: str) -> tuple[int, ...]:
        if not names_relation(question, relation):
            hit = graph.call("relations", titles[entity])
            calls.append(("relations", titles[entity], graph.render(hit)))
        text = f"{titles[entity]} | {relation}"
        hit = graph.call("neighbors", text)
        calls.append(("neighbors", text, graph.render(hit)))
        return hit.found

    if family == "comparison":
        for subject in chain:
            years = [r for r in graph.relation_counts(subject) if r.endswith(" in year")]
            if len(years) != 1 or len(follow(subject, years[0])) != 1:
                return None
    else:
        if not relations or any(r is None for r in relations):
            return None
        for i, relation in enumerate(relations):
            if follow(chain[i], relation) != (chain[i + 1],):
                return None
    demo = Demo("solver", family, protocol.solver_user_message(question, graph=True))
    demo.segments = tool_demo(calls, [answer])
    return demo


def proposer_demo(titles: Sequence[str], relations: Sequence[str], passages: Sequence[str],
                  question: str, answer: str, family: str, eos: str) -> Demo:
    """Chain -> one candidate (Eq. 2's output format), ending with the end-of-turn token.

    Example:
        >>> d = proposer_demo(["A", "B"], ["born in"], ["A was born in B.", "B is a city."],
        ...                   "Where was A born?", "B", "single_hop", "<|im_end|>")
        >>> d.segments
        [('<question>Where was A born?</question> <answer>B</answer><|im_end|>', True)]
    """
    demo = Demo("proposer", family, protocol.proposer_user_message(titles, relations, passages))
    demo.segments.append((protocol.format_candidate(question, answer) + eos, True))
    return demo


def hop_relations(con, chains: Sequence[Sequence[int]]) -> list[list[str | None]]:
    """Each entity chain's relation label hop by hop, as the proposer's demonstrations read them: a
    pair linked by several relations reads as the first in sort order, an unlinked pair as None.

    Example:
        >>> import duckdb
        >>> con = duckdb.connect()
        >>> _ = con.execute("CREATE TABLE edges AS SELECT * FROM (VALUES (1, 2, 'born in'), "
        ...                 "(2, 3, 'located in'), (2, 3, 'capital of')) t(src, dst, relation)")
        >>> hop_relations(con, [[1, 2, 3], [3, 1], []])
        [['born in', 'capital of'], [None], []]
    """
    ids = sorted({e for chain in chains for e in chain})
    edge = {(s, d): r for s, d, r in con.execute(
        "SELECT src, dst, min(relation) FROM edges WHERE src IN (SELECT unnest(?)) GROUP BY src, dst",
        [ids]).fetchall()}
    return [[edge.get(pair) for pair in zip(chain, chain[1:])] for chain in chains]


def world_demos(con, search, families: Sequence[str], with_proposer: bool, eos: str,
                long_rate: float = 1.0, seed: int = 0, kg=None, graph=None) -> list[Demo]:
    """Solver (and proposer) demonstrations from the questions of ``families`` in a store; a
    question of ``LONG_FAMILIES`` is kept with probability ``long_rate`` (deterministic by seed);
    ``kg``: the store's KG tool, for demonstrations that use both tools (:func:`solver_demo`);
    ``graph``: the store's graph tools (EoG), for demonstrations that use them alone
    (:func:`graph_solver_demo`; a question they cannot demonstrate gets no solver demonstration)."""
    rows = con.execute(
        "SELECT question, family, answers, chain FROM questions WHERE family IN (SELECT unnest(?)) "
        "ORDER BY question_id", [list(families)]).fetchall()
    ids = sorted({e for *_, chain in rows for e in (chain or [])})
    titles = dict(con.execute("SELECT entity_id, title FROM entities WHERE entity_id IN (SELECT unnest(?))",
                              [ids]).fetchall())
    first_passage = dict(con.execute(
        "SELECT entity_id, arg_min(text, paragraph) FROM passages WHERE entity_id IN (SELECT unnest(?)) "
        "GROUP BY entity_id", [ids]).fetchall())
    hops = hop_relations(con, [list(chain or []) for *_, chain in rows])
    demos = []
    keep = np.random.default_rng(seed).random(len(rows))
    for (question, family, answers, chain), rels, u in zip(rows, hops, keep):
        chain = list(chain or [])
        if not chain or not answers or (family in LONG_FAMILIES and u >= long_rate):
            continue
        names = [titles[e] for e in chain]
        path = all(r is not None for r in rels)
        if graph is not None:
            demo = graph_solver_demo(graph, question, family, chain, rels, answers[0])
            demos += [demo] if demo is not None else []
        else:
            demos.append(solver_demo(search, question, family, names, answers[0], path, kg))
        if with_proposer and path and len(chain) >= 2:
            demos.append(proposer_demo(names, rels, [first_passage.get(e, "") for e in chain],
                                       question, answers[0], family, eos))
    return demos


class ExtraDemos(Protocol):
    """Proposer demonstrations of another prompt, made in each throwaway world by a higher layer (EoG's
    topology queries: ``method.eog_warmstart.TopologyDemos``). ``name`` and ``settings`` enter the cache
    key (``params[name]``); ``share`` is their share of the proposer demonstrations; each demonstration's
    family starts with ``name + ':'`` (the warm start's report counts them by family).

    Optional (read with defaults, None and 0): ``graph``, the settings of EoG's graph tools
    (``search.graph_tools``): every solver demonstration then uses them instead of document search, the
    tokenizer keeps their tags whole and validation offers them; ``solver_share``, the share of the solver
    demonstrations that are the extra's own (its demonstrations of role 'solver')."""

    name: str
    settings: dict
    share: float

    def __call__(self, con, seed: int, eos: str) -> list[Demo]: ...


def demo_set(n_solver: int, seed: int, families: Sequence[str] = DEMO_FAMILIES,
             proposer_share: float = PROPOSER_SHARE, n_entities: int = DEMO_ENTITIES,
             index: str = "bm25", topk: int = 3, eos: str = "<|im_end|>",
             long_rate: float = 1.0, kg: dict | None = None,
             extra: ExtraDemos | None = None) -> tuple[list[Demo], int]:
    """At least ``n_solver`` solver demonstrations (plus proposer ones, ``proposer_share`` of the
    mix) from throwaway TinyWorlds of ``n_entities`` entities, seeds derived from ``seed``; the
    longer families' questions kept at ``long_rate``. Returns (demos, worlds built). Deterministic by seed.
    ``kg`` (``KGSearch`` keyword arguments) makes the solver demonstrations use the KG tool too.
    ``extra`` takes ``extra.share`` of the proposer demonstrations (the chain ones keep the rest, so
    the mix's size and its solver demonstrations are the default's); with ``extra.graph`` every solver
    demonstration uses EoG's graph tools, and ``extra.solver_share`` of them are the extra's own.
    """
    from workbench.kg.tinyworld import build_world
    from workbench.search.tool import SearchTool

    graph = getattr(extra, "graph", None)
    if graph is not None and kg is not None:
        raise ValueError("warm start: kg_tool and EoG's graph tools (extra_demos.graph): one solver protocol, not both")
    n_all = int(round(n_solver * proposer_share / max(1e-9, 1 - proposer_share)))
    n_extra = int(round(n_all * extra.share)) if extra is not None else 0
    n_proposer = n_all - n_extra
    n_extra_solver = int(round(n_solver * getattr(extra, "solver_share", 0.0))) if extra is not None else 0
    n_solver -= n_extra_solver
    solver, proposer, extras, extra_solver, worlds = [], [], [], [], 0
    while (len(solver) < n_solver or len(proposer) < n_proposer or len(extras) < n_extra
           or len(extra_solver) < n_extra_solver):
        if worlds >= MAX_WORLDS:
            raise ValueError(f"warm start: {MAX_WORLDS} throwaway worlds gave only {len(solver)} solver, "
                             f"{len(proposer)} proposer and {len(extras) + len(extra_solver)} "
                             f"{extra.name if extra else 'other'} demonstrations; lower sft_steps or raise n_entities")
        con = store.connect(":memory:")
        try:
            world_seed = WORLD_SEED_OFFSET * (seed + 1) + worlds
            build_world(con, preset=DEMO_PRESET, seed=world_seed, n_entities=n_entities)
            search = SearchTool(con, index=index, topk=topk)
            kg_tool = None
            if kg is not None:
                from workbench.search.kg_search import KGSearch

                kg_tool = KGSearch(con, **kg)
            graph_tools = None
            if graph is not None:
                from workbench.search.graph_tools import GraphTools

                graph_tools = GraphTools(con, **graph)
            for demo in world_demos(con, search, families, n_proposer > len(proposer), eos, long_rate, world_seed,
                                    kg_tool, graph_tools):
                (solver if demo.role == "solver" else proposer).append(demo)
            if len(extras) < n_extra or len(extra_solver) < n_extra_solver:
                for demo in extra(con, world_seed, eos):
                    (extra_solver if demo.role == "solver" else extras).append(demo)
        finally:
            con.close()
        worlds += 1
    rng = np.random.default_rng(seed)
    demos = solver[:n_solver] + extra_solver[:n_extra_solver] + proposer[:n_proposer] + extras[:n_extra]
    return [demos[i] for i in rng.permutation(len(demos))], worlds


# ---------------------------------------------------------------- tokenisation with masks

def tokenizer_corpus(demos: Sequence[Demo], limit: int = 3000, kg: bool = False, graph: bool = False) -> list[str]:
    """Text the tokenizer is trained on: the protocol's fixed strings, name syllables and the
    throwaway worlds' demonstrations (never the evaluated world); ``kg`` adds the KG tool's,
    ``graph`` EoG's graph tools'."""
    from workbench.kg.names import syllable_vocabulary

    fixed = [protocol.SOLVER_INSTRUCTION, protocol.PROPOSER_INSTRUCTION, protocol.INVALID_ACTION]
    if kg:
        fixed += [protocol.SOLVER_INSTRUCTION_KG, protocol.INVALID_ACTION_KG]
    if graph:
        fixed += [protocol.SOLVER_INSTRUCTION_GRAPH, protocol.INVALID_ACTION_GRAPH]
    texts = fixed * 20 + [" ".join(syllable_vocabulary())] * 20
    for demo in demos[:limit]:
        texts.append(demo.user + "".join(text for text, _ in demo.segments))
    return texts


@dataclass
class Encoded:
    """Token ids and the loss mask (True where the model generates) of one demonstration."""

    input_ids: list[int]
    trained: list[bool]
    role: str
    family: str


def encode_demo(policy, demo: Demo) -> Encoded:
    """Tokenise segment by segment, as a rollout does (it appends the ids of each generated turn
    and each information block and never re-tokenises the whole text).

    Example:
        >>> # e = encode_demo(policy, demo); sum(e.trained) counts the supervised tokens
    """
    ids = policy.encode(policy.chat_prompt(demo.user))
    trained = [False] * len(ids)
    for text, train in demo.segments:
        piece = policy.encode(text)
        ids += piece
        trained += [train] * len(piece)
    return Encoded(ids, trained, demo.role, demo.family)


# ---------------------------------------------------------------- the SFT loop

def _batches(lengths: Sequence[int], batch: int, steps: int, seed: int) -> list[np.ndarray]:
    """``steps`` batches of indices: shuffled epochs, length-bucketed within windows of 16
    batches so padding stays small, windows and batches in seeded random order."""
    rng = np.random.default_rng(seed)
    lengths = np.asarray(lengths)
    out: list[np.ndarray] = []
    while len(out) < steps:
        order = rng.permutation(len(lengths))
        window = batch * 16
        epoch = []
        for start in range(0, len(order), window):
            chunk = order[start:start + window]
            chunk = chunk[np.argsort(lengths[chunk], kind="stable")]
            epoch += [chunk[i:i + batch] for i in range(0, len(chunk), batch) if len(chunk[i:i + batch]) == batch]
        out += [epoch[i] for i in rng.permutation(len(epoch))]
    return out[:steps]


def sft(model, examples: Sequence[Encoded], steps: int, batch: int, lr: float, seed: int,
        pad_id: int, warmup: float = 0.05, log_every: int = 50, log=print) -> list[float]:
    """Supervised fine-tuning on masked examples; returns the loss of every step.

    The loss is the mean token cross-entropy over trained (generated) tokens of the batch.

    Example:
        >>> # losses = sft(model, [encode_demo(policy, d) for d in demos], 60, 8, 1e-3, 0, pad_id)
    """
    import torch

    if len(examples) < batch:
        raise ValueError(f"sft: {len(examples)} examples cannot fill one batch of {batch}")
    torch.manual_seed(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=0.01)
    n_warm = max(1, int(warmup * steps))

    def schedule(step: int) -> float:
        if step < n_warm:
            return (step + 1) / n_warm
        progress = (step - n_warm) / max(1, steps - n_warm)
        return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress))

    sched = torch.optim.lr_scheduler.LambdaLR(opt, schedule)
    device = next(model.parameters()).device
    model.train()
    losses = []
    t0 = time.perf_counter()
    for step, idx in enumerate(_batches([len(e.input_ids) for e in examples], batch, steps, seed)):
        rows = [examples[i] for i in idx]
        width = max(len(r.input_ids) for r in rows)
        ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
        att = torch.zeros((len(rows), width), dtype=torch.long)
        labels = torch.full((len(rows), width), -100, dtype=torch.long)
        for b, r in enumerate(rows):
            n = len(r.input_ids)
            ids[b, :n] = torch.tensor(r.input_ids)
            att[b, :n] = 1
            labels[b, :n] = torch.where(torch.tensor(r.trained), ids[b, :n], -100)
        out = model(input_ids=ids.to(device), attention_mask=att.to(device), labels=labels.to(device),
                    use_cache=False)
        opt.zero_grad(set_to_none=True)
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        losses.append(out.loss.item())
        if log and (step + 1) % log_every == 0:
            log(f"  sft step {step + 1}/{steps} loss {np.mean(losses[-log_every:]):.3f} "
                f"({time.perf_counter() - t0:.0f} s)")
    model.eval()
    return losses


# ---------------------------------------------------------------- cache key

WARMSTART_VERSION = 2  # bump by hand whenever the recipe below makes a different model (then retrain and ship)
RECIPE_FINGERPRINT = "7d3ce49c75e8bb4a"  # recipe_fingerprint() at this version; tests/test_warmstart.py checks it


def recipe_fingerprint() -> str:
    """A digest of what the warm-start recipe makes from small fixed inputs: the demonstrations
    (throwaway worlds, the search tool's rendering, the protocol), the tokenizer, the encoded
    examples with their masks, the initial weights and the first SFT losses.

    The cache key holds ``WARMSTART_VERSION`` instead of the code's source, so refactoring the
    modules that make demonstrations keeps the shipped warm start. A change that alters what they
    make changes this digest; ``test_recipe_fingerprint_is_recorded`` then fails until the version
    is bumped (and the warm start retrained) and ``RECIPE_FINGERPRINT`` updated.
    """
    import torch

    from workbench.config import preset
    from workbench.policy.model import Policy, tiny_model
    from workbench.policy.tokenizer import IM_END, train_tokenizer

    backbone = preset("smoke").backbone
    demos, worlds = demo_set(24, seed=0, eos=IM_END, long_rate=0.5)
    tok = train_tokenizer(tokenizer_corpus(demos), backbone.vocab_size)
    policy = Policy(tiny_model(backbone, tok, 0), tok, device="cpu")
    examples = [encode_demo(policy, d) for d in demos]
    digest = hashlib.sha256()
    digest.update(json.dumps([worlds, [[d.role, d.family, d.user, d.segments] for d in demos],
                              [[e.input_ids, e.trained] for e in examples]]).encode())
    for name, tensor in sorted(policy.model.state_dict().items()):
        digest.update(name.encode() + np.round(tensor.float().numpy(), 5).tobytes())
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a fixed reduction order for the losses
    try:
        losses = sft(policy.model, examples, 3, 4, backbone.sft_lr, 0, tok.pad_token_id)
    finally:
        torch.set_num_threads(threads)
    digest.update(json.dumps([round(float(x), 3) for x in losses]).encode())
    return digest.hexdigest()[:16]


def cache_key(world_hash: str, cfg, seed: int, params: dict) -> str:
    """The warm start's content hash: the world's passages, the settings that shape the model (the
    backbone, the retrieval its demonstrations show, the length cap on an example), the seed, the
    warm-start parameters and the recipe's ``WARMSTART_VERSION``."""
    blob = json.dumps({"world": world_hash, "backbone": asdict(cfg.backbone), "index": cfg.search.index,
                       "topk": cfg.search.topk, "max_total_tokens": cfg.rollout.max_total_tokens, "seed": seed,
                       "params": params, "version": WARMSTART_VERSION}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


# ---------------------------------------------------------------- the warm start

def name_coverage(tokenizer, demo_examples: Sequence[Encoded], titles: Sequence[str]) -> float:
    """Share of the evaluated world's entity-name tokens that occur in trained demo positions
    (a name made of tokens the warm start never produced cannot be copied; STACK.md probe)."""
    seen = {t for e in demo_examples for t, m in zip(e.input_ids, e.trained) if m}
    pieces = [t for title in titles for t in tokenizer(" " + title, add_special_tokens=False)["input_ids"]]
    return float(np.mean([t in seen for t in pieces])) if pieces else 1.0


def kg_settings(kg_tool: dict) -> dict:
    """The KG tool's settings a KG warm start is made with (``search.kg_search.SETTINGS``; the
    overlap filter: demonstrations are deterministic), checked; one left out takes ``method.kg_*``'s
    default.

    Example:
        >>> kg_settings({"max_triples": 4, "min_similarity": 0.75})
        {'max_triples': 4, 'min_similarity': 0.75, 'filter': 'overlap'}
    """
    from workbench.search.kg_search import settings_config, tool_settings

    if kg_tool.get("filter", "overlap") != "overlap":
        raise ValueError(f"kg_tool={kg_tool!r}: the filter of demonstrations is 'overlap'")
    return tool_settings(settings_config({**kg_tool, "filter": "overlap"}))


def tool_use(scored) -> dict:
    """Searches per question by family and tool in a ``score_questions`` frame (the base's tool use).

    Example:
        >>> import pandas as pd
        >>> tool_use(pd.DataFrame({"family": ["a", "a"], "searches_doc": [1, 2], "searches_kg": [0, 1]}))
        {'a': {'doc': 1.5, 'kg': 0.5}}
    """
    return {str(f): {"doc": float(g["searches_doc"].mean()), "kg": float(g["searches_kg"].mean())}
            for f, g in scored.groupby("family", sort=True)}


def demo_tool_calls(demos: Sequence[Demo]) -> dict:
    """Tool calls in the solver demonstrations, by family and tool (what the warm start was shown).

    Example:
        >>> d = Demo("solver", "two_hop", "q", [("<kg_search> A </kg_search>", True), ("info", False),
        ...                                     ("<search> B </search>", True)])
        >>> demo_tool_calls([d])
        {'two_hop': {'doc': 1, 'kg': 1, 'demos': 1}}
    """
    out: dict = {}
    for d in demos:
        if d.role != "solver":
            continue
        row = out.setdefault(d.family, {"doc": 0, "kg": 0, "demos": 0})
        row["demos"] += 1
        for text, trained in d.segments:
            if trained and text.startswith(protocol.SEARCH_OPEN):
                row["doc"] += 1
            elif trained and text.startswith((protocol.KG_SEARCH_OPEN, protocol.RELATIONS_OPEN,
                                              protocol.NEIGHBORS_OPEN)):  # EoG's graph tools count as KG calls
                row["kg"] += 1
    return dict(sorted(out.items()))


def shipped_dir() -> Path:
    """Where the repository ships pre-trained warm starts, one folder per cache key.

    Training the tiny warm start would take about two hours on an idle 2-core CPU (estimated from
    v1's ~80 minutes for 4,000 steps; 7 minutes on one GPU),
    so the workbench ships the result of ``workbench warmstart --preset tiny`` for the default world
    and seed (LOG.md says how it was made). It is used only when its cache key -- world passages,
    settings, seed and ``WARMSTART_VERSION`` -- equals the one asked for.
    """
    return paths.project_root() / "data" / "pretrained" / "warmstart"


def warmstart(db, preset="tiny", out_dir: str | Path | None = None, seed: int = 0, *,
              families: Sequence[str] = DEMO_FAMILIES, n_entities: int = DEMO_ENTITIES,
              epochs: float = DEMO_EPOCHS, proposer_share: float = PROPOSER_SHARE,
              val_per_family: int = VAL_PER_FAMILY, retrain: bool = False, log=print,
              kg_tool: dict | None = None, extra_demos: ExtraDemos | None = None) -> Path:
    """Train (or reuse from the cache) the tiny backbone's warm start; return its model directory.

    ``db`` is the evaluated world's store (path or connection): its passages enter the cache key
    and its val split measures the base (greedy EM per family, stored in ``workbench.json`` with
    the train loss, wall time and demonstration counts). ``preset`` is a preset name or Config.
    ``retrain`` trains here even when the cache or the repository holds this key (the new model
    then replaces the cached copy; the shipped one is never touched). With ``out_dir`` the model is copied there too (a standard Hugging Face directory: config,
    weights, tokenizer, chat template, plus ``workbench.json``).

    ``kg_tool`` (DynaSearcher, seed 003: ``{"max_triples": n, "min_similarity": s}``, the KG tool's
    settings) trains a base that uses both tools: its demonstrations take relation-lookup hops
    with ``<kg_search>`` (:func:`solver_demo`, the deterministic overlap filter), its tokenizer
    keeps the KG tags whole, and its validation offers the KG tool. It has its own cache key (the
    default's is unchanged) and is trained on demand, as the default is when missing.

    ``extra_demos`` (:class:`ExtraDemos`; EoG's topology warm start, ``method.eog_warmstart``) puts
    proposer demonstrations of another prompt into the mix, likewise under its own key
    (``params[extra_demos.name]``) and evaluation label (``base_<name>``).

    Example:
        >>> # path = warmstart("data/tiny.duckdb", "tiny", out_dir="data/models/base")
        >>> # json.loads((path / "workbench.json").read_text())["val_em"]
    """
    from workbench.config import preset as get_preset
    from workbench.search.index import load_corpus

    cfg = get_preset(preset) if isinstance(preset, str) else preset
    if cfg.backbone.model != "tiny":
        raise ValueError(f"warm start trains the tiny backbone only; preset {cfg.name!r} has "
                         f"backbone.model={cfg.backbone.model!r} (a pretrained model needs no warm start)")
    unknown = sorted(set(families) - {"single_hop", "two_hop", "three_hop", "comparison", "bridge"})
    if unknown or not families:
        raise ValueError(f"families={list(families)}: expected a non-empty subset of single_hop, two_hop, "
                         f"three_hop, comparison, bridge; unknown {unknown}")
    own = not hasattr(db, "execute")
    con = store.connect(db) if own else db
    try:
        corpus = load_corpus(con)
        if not len(corpus):
            raise ValueError(f"store {db} has no passages: build a world first (workbench world)")
        params = {"families": list(families), "n_entities": n_entities, "epochs": epochs,
                  "proposer_share": proposer_share, "val_per_family": val_per_family, "preset": cfg.name}
        if kg_tool is not None:  # only then: the default warm start's key stays what it was
            params["kg_tool"] = kg_settings(kg_tool)
        if extra_demos is not None:  # likewise
            if extra_demos.name in params:
                raise ValueError(f"extra_demos.name {extra_demos.name!r} is a warm-start parameter already")
            params[extra_demos.name] = dict(extra_demos.settings)
        key = cache_key(corpus.content_hash(), cfg, seed, params)
        cached = paths.cache_dir() / "warmstart" / key
        shipped = shipped_dir() / key
        if retrain:
            _train(con, cfg, seed, params, key, cached, log, replace=True, extra=extra_demos)
        elif (cached / "workbench.json").exists():
            if log:
                log(f"warm start {key}: reusing {cached}")
        elif (shipped / "workbench.json").exists():
            shutil.copytree(shipped, cached, dirs_exist_ok=True)
            if log:
                log(f"warm start {key}: the copy shipped in {shipped} (same key: same world, settings and "
                    f"code; `workbench warmstart --retrain` trains it here instead)")
        else:
            _train(con, cfg, seed, params, key, cached, log, extra=extra_demos)
    finally:
        if own:
            con.close()
    if out_dir is None:
        return cached
    out_dir = Path(out_dir)
    if out_dir.resolve() != cached.resolve():
        shutil.copytree(cached, out_dir, dirs_exist_ok=True)
    return out_dir


def _train(con, cfg, seed: int, params: dict, key: str, final: Path, log, replace: bool = False,
           extra: ExtraDemos | None = None) -> None:
    import torch

    from workbench.policy.rollout import load_questions, score_questions
    from workbench.scoring import summarize
    from workbench.policy.model import Policy, tiny_model
    from workbench.policy.tokenizer import IM_END, train_tokenizer
    from workbench.search.tool import SearchTool

    b = cfg.backbone
    start = time.perf_counter()
    n_examples = math.ceil(b.sft_steps * b.sft_batch / params["epochs"])
    n_solver = max(b.sft_batch, round(n_examples * (1 - params["proposer_share"])))
    kg = params.get("kg_tool")
    graph = getattr(extra, "graph", None)  # EoG's graph tools (its settings are in params[extra.name])
    demos, worlds = demo_set(n_solver, seed, params["families"], params["proposer_share"],
                             params["n_entities"], cfg.search.index, cfg.search.topk, IM_END, b.sft_long_rate, kg,
                             extra)
    t_demos = time.perf_counter() - start
    tok = train_tokenizer(tokenizer_corpus(demos, kg=kg is not None, graph=graph is not None), b.vocab_size,
                          extra_tokens=(protocol.KG_TAGS if kg is not None else ())
                          + (protocol.GRAPH_TAGS if graph is not None else ()))
    policy = Policy(tiny_model(b, tok, seed), tok)
    examples = [e for e in (encode_demo(policy, d) for d in demos) if len(e.input_ids) <= cfg.rollout.max_total_tokens]
    if log:
        log(f"warm start {key}: {len(examples)} demonstrations from {worlds} throwaway worlds "
            f"({t_demos:.0f} s), {sum(p.numel() for p in policy.model.parameters()):,} parameters")
    t_sft = time.perf_counter()
    losses = sft(policy.model, examples, b.sft_steps, b.sft_batch, b.sft_lr, seed, tok.pad_token_id, log=log,
                 log_every=max(5, b.sft_steps // 50))  # about 50 progress lines, however long
    t_sft = time.perf_counter() - t_sft
    head = max(1, min(50, len(losses) // 10))

    val = load_questions(con, "tinyworld", "val", params["val_per_family"])
    search = SearchTool(con, index=cfg.search.index, topk=cfg.search.topk)
    kg_search = None
    if kg is not None:
        from workbench.search.kg_search import KGSearch

        kg_search = KGSearch(con, **kg)
    graph_tools = None
    if graph is not None:
        from workbench.search.graph_tools import GraphTools

        graph_tools = GraphTools(con, **graph)
    scored = score_questions(policy, search, val, cfg.rollout, cfg.search.topk, kg=kg_search, graph=graph_tools)
    summary = summarize(scored, seed=seed)
    titles = [t for (t,) in con.execute("SELECT title FROM entities WHERE entity_id IN "
                                        "(SELECT unnest(chain) FROM questions WHERE split = 'val')").fetchall()]
    meta = {"backbone": f"tiny-{cfg.name}", "method": "base", "cache_key": key, "seed": seed,
            "params": params, "steps": b.sft_steps, "batch": b.sft_batch, "lr": b.sft_lr,
            "train_loss_first": float(np.mean(losses[:head])), "train_loss_last": float(np.mean(losses[-head:])),
            "loss_curve": [round(float(np.mean(losses[i:i + head])), 4) for i in range(0, len(losses), head)],
            "demonstrations": len(examples), "worlds": worlds,
            "solver_demos": sum(e.role == "solver" for e in examples),
            "name_token_coverage": name_coverage(tok, examples, titles),
            "val_em": {r.group: {"n": int(r.n), "em": r.mean, "low": r.low, "high": r.high}
                       for r in summary.itertuples()},
            "tool_use": tool_use(scored), "demo_tool_calls": demo_tool_calls(demos),
            "seconds": {"demos": t_demos, "sft": t_sft, "total": time.perf_counter() - start},
            "threads": torch.get_num_threads()}
    if kg is not None:  # its own evaluation label (tiny/base_kg/...), beside the default base's
        meta["kg_tool"], meta["method"] = kg, "base_kg"
    if extra is not None:  # likewise (tiny/base_topology/...)
        meta[extra.name], meta["method"] = params[extra.name], f"base_{extra.name}"
        meta["extra_demos"] = dict(sorted(Counter(e.family for e in examples
                                                  if e.family.startswith(f"{extra.name}:")).items()))
    if graph is not None:  # `workbench eval` offers a model its graph tools (evaluate.model_graph_tools)
        meta["graph_tools"] = dict(graph)
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{key}-", dir=final.parent))
    try:
        policy.save(tmp)
        (tmp / "workbench.json").write_text(json.dumps(meta, indent=2))
        if replace and final.exists():  # --retrain: the cached copy (always rebuildable) makes way
            stale = Path(tempfile.mkdtemp(prefix=f".{key}-stale-", dir=final.parent))
            os.replace(final, stale / key)
            shutil.rmtree(stale)
        try:
            os.replace(tmp, final)  # atomic: a half-written warm start is never reused
        except OSError:
            if not (final / "workbench.json").exists():
                raise
            shutil.rmtree(tmp)  # another process finished the same key first: keep its copy
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if log:
        log(f"warm start {key}: loss {meta['train_loss_first']:.3f} -> {meta['train_loss_last']:.3f}, "
            f"{meta['seconds']['total']:.0f} s")
