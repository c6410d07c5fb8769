"""Batched multi-turn solver rollouts with search (seed 000, sections 3.3 and 4.1).

The solver answers in turns (Search-R1 protocol, ``workbench.policy.protocol``): each turn the
policy generates until ``</search>`` or ``</answer>``; every search of the batch runs in one
``search.search(queries, k)`` call and its top-k passages come back inside
``<information> ... </information>``; an invalid action gets ``protocol.INVALID_ACTION``. A row
finishes on ``<answer>``, after ``max_turns`` turns (paper: 8), or at ``max_total_tokens``;
finished rows leave the batch. Sampling uses temperature 0.6 / top-p 0.95 for training and
temperature 0 (greedy) for evaluation (paper, section 4.1).

Token bookkeeping: rollouts keep token ids end to end (the text is never re-tokenised), so
``prompt_ids + response_ids`` is exactly what the model saw. ``loss_mask`` is 1 on generated
tokens and 0 on inserted information and corrective tokens (retrieved tokens are excluded from
any loss); ``old_logprobs`` hold the raw-policy log-prob of each generated token (0 elsewhere).

Our choices (the paper's appendix is unavailable): a search written in the last allowed turn is
not executed (no turn is left to read it; it is not listed in ``queries``); an information block
that would cross ``max_total_tokens`` is cut to fit and the row finishes with reason 'length';
batch time is shared equally among the rows active in that turn (``gen_seconds``,
``search_seconds`` sum to the wall time).

Example:
    >>> trajs = rollout(policy, search_tool, ["Where was Kavimo born?"], n_samples=8)  # doctest: +SKIP
    >>> trajs[0].finished_reason in {"answer", "max_turns", "length"}  # doctest: +SKIP
    True
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch

from workbench.policy import protocol


@dataclass
class Trajectory:
    """One solver rollout. ``response_ids``, ``loss_mask`` and ``old_logprobs`` align."""

    question_index: int
    sample: int
    prompt: str
    prompt_ids: list[int]
    response_ids: list[int] = field(default_factory=list)
    loss_mask: list[int] = field(default_factory=list)
    old_logprobs: list[float] = field(default_factory=list)
    text: str = ""
    turns: int = 0
    queries: list[str] = field(default_factory=list)
    passage_ids: list[int] = field(default_factory=list)
    entity_ids: list[int] = field(default_factory=list)
    answer: str | None = None
    n_generated: int = 0
    n_retrieved: int = 0
    gen_seconds: float = 0.0
    search_seconds: float = 0.0
    finished_reason: str | None = None
    kg_queries: list[str] = field(default_factory=list)  # DynaSearcher's <kg_search> lookups, executed
    kg_entity_ids: list[int | None] = field(default_factory=list)  # ... the entity each one linked (None: none)
    kg_tools: list[str] = field(default_factory=list)  # ... each one's tool: kg_search, or EoG's relations | neighbors
    invalid_actions: int = 0  # turns that ended in no valid action (they got the corrective message)
    # the <information> blocks the environment inserted (document and KG results), each as the model
    # saw it (cut to the token budget): what Eq. 8's path may be grounded in (path_support.grounded)
    retrieved: list[str] = field(default_factory=list)

    @property
    def length(self) -> int:
        return len(self.prompt_ids) + len(self.response_ids)

    def _append(self, ids: list[int], text: str, generated: bool, logprobs: list[float] | None = None) -> None:
        self.response_ids += ids
        self.loss_mask += [int(generated)] * len(ids)
        self.old_logprobs += logprobs if generated else [0.0] * len(ids)
        self.text += text
        if generated:
            self.n_generated += len(ids)
        else:
            self.n_retrieved += len(ids)


def rollout(policy, search, questions: list[str], n_samples: int, *, max_turns: int = 8, topk: int = 3,
            temperature: float = 0.6, top_p: float = 0.95, max_new_tokens: int = 64,
            max_total_tokens: int = 1024, seed: int = 0, kg=None, graph=None,
            user_messages: list[str] | None = None) -> list[Trajectory]:
    """Roll out ``n_samples`` trajectories per question, batched; order is question-major.

    ``search`` is any object with ``search(list[str], k) -> list[list[Hit]]`` and
    ``render(hits) -> str`` (``workbench.search.tool.SearchTool``). Deterministic by ``seed``.
    ``kg`` (DynaSearcher, seed 003) offers the KG tool as well: a ``search.kg_search.KGSearch`` (or
    its remote client) answering ``<kg_search> entity </kg_search>``; without it the prompt, stop
    strings and parsing are exactly the Search-R1 protocol's. ``graph`` (EoG, seed 004) offers its
    graph tools instead of document search (``search.graph_tools.GraphTools``: ``<relations>``,
    ``<neighbors>``; their calls are recorded as KG calls, ``kg_queries`` with ``kg_tools``), and the
    answer is a ``;``-separated set (``scoring.answer_list``). ``user_messages`` (one per question)
    replace the solver's user turn: a proposer that searches before it writes (Dr. Free's "w/o KG"
    row, SSP's searching proposer, ``method/ssp.py``) speaks the same protocol and ends at its
    ``</answer>``.

    Example:
        >>> trajs = rollout(policy, tool, ["Who directed Rutel?"], 4, temperature=0)  # doctest: +SKIP
        >>> [t.sample for t in trajs]  # doctest: +SKIP
        [0, 1, 2, 3]
    """
    if n_samples < 1 or max_turns < 1 or topk < 1 or max_new_tokens < 1:
        raise ValueError(f"rollout: n_samples, max_turns, topk and max_new_tokens must be >= 1; got "
                         f"{n_samples}, {max_turns}, {topk}, {max_new_tokens}")
    use_kg, use_graph = kg is not None, graph is not None
    if use_kg and use_graph:
        raise ValueError("rollout: kg (the KG tool) and graph (EoG's graph tools) cannot both be offered")
    stop = protocol.GRAPH_STOP_STRINGS if use_graph else protocol.KG_STOP_STRINGS if use_kg else protocol.STOP_STRINGS
    invalid = (protocol.INVALID_ACTION_GRAPH if use_graph else protocol.INVALID_ACTION_KG if use_kg
               else protocol.INVALID_ACTION)
    if user_messages is not None and len(user_messages) != len(questions):
        raise ValueError(f"rollout: {len(user_messages)} user_messages for {len(questions)} questions")
    rows = []
    for qi, question in enumerate(questions):
        prompt = policy.chat_prompt(protocol.solver_user_message(question, kg=use_kg, graph=use_graph)
                                    if user_messages is None else user_messages[qi])
        prompt_ids = policy.encode(prompt)
        if len(prompt_ids) >= max_total_tokens:
            raise ValueError(f"rollout: question {qi} gives a {len(prompt_ids)}-token prompt, not below "
                             f"max_total_tokens={max_total_tokens}")
        rows += [Trajectory(qi, s, prompt, list(prompt_ids)) for s in range(n_samples)]

    for turn in range(max_turns):
        active = [r for r in rows if r.finished_reason is None]
        if not active:
            break
        start = time.perf_counter()
        gens = policy.generate_ids([r.prompt_ids + r.response_ids for r in active],
                                   max_new_tokens=min(max_new_tokens, max(max_total_tokens - r.length for r in active)),
                                   temperature=temperature, top_p=top_p, stop=stop,
                                   seed=None if temperature == 0 else seed * 1_000_003 + turn)
        share = (time.perf_counter() - start) / len(active)
        searching, looking_up, exploring = [], [], []
        for row, gen in zip(active, gens):
            row.gen_seconds += share
            row.turns += 1
            budget = max_total_tokens - row.length
            ids, logprobs, text = gen.token_ids, gen.logprobs, gen.text
            if len(ids) > budget:  # sampled past this row's own total budget: keep the prefix
                ids, logprobs = ids[:budget], logprobs[:budget]
                text = policy.tokenizer.decode(ids, skip_special_tokens=True)
            row._append(ids, text, True, logprobs)
            action = protocol.parse_action(text, kg=use_kg, graph=use_graph)
            if action.kind == "answer":
                row.answer, row.finished_reason = action.text, "answer"
            elif row.length >= max_total_tokens:
                row.finished_reason = "length"
            elif turn == max_turns - 1:
                row.finished_reason = "max_turns"
            elif action.kind == "search":
                searching.append((row, action.text))
            elif action.kind == "kg_search":
                looking_up.append((row, action.text))
            elif action.kind in protocol.GRAPH_ACTIONS:
                exploring.append((row, action))
            else:
                row.invalid_actions += 1
                _insert(policy, row, invalid, max_total_tokens)
        if searching:
            start = time.perf_counter()
            hits = search.search([q for _, q in searching], topk)
            blocks = [protocol.information_block(search.render(h)) for h in hits]
            share = (time.perf_counter() - start) / len(searching)
            for (row, query), row_hits, block in zip(searching, hits, blocks):
                row.search_seconds += share
                row.queries.append(query)
                row.passage_ids += [_as_id(h.passage_id) for h in row_hits]
                row.entity_ids += [_as_id(h.entity_id) for h in row_hits]
                row.retrieved.append(_insert(policy, row, block, max_total_tokens))
        if looking_up:
            _kg_turn(policy, kg, looking_up, questions, max_total_tokens)
        if exploring:
            _graph_turn(policy, graph, exploring, max_total_tokens)
    return rows


def _kg_turn(policy, kg, looking_up: list, questions: list[str], max_total_tokens: int) -> None:
    """Run one turn's KG lookups in one ``kg.search`` call (the filter judges against each row's
    question) and insert their rendered triples."""
    start = time.perf_counter()
    hits = kg.search([q for _, q in looking_up], [questions[row.question_index] for row, _ in looking_up])
    blocks = [protocol.information_block(kg.render(h)) for h in hits]
    share = (time.perf_counter() - start) / len(looking_up)
    for (row, query), hit, block in zip(looking_up, hits, blocks):
        row.search_seconds += share
        row.kg_queries.append(query)
        row.kg_entity_ids.append(hit.entity_id)
        row.kg_tools.append("kg_search")
        row.retrieved.append(_insert(policy, row, block, max_total_tokens))


def _graph_turn(policy, graph, exploring: list, max_total_tokens: int) -> None:
    """Run one turn's graph-tool calls (EoG) and insert what each returns; each counts as a KG call."""
    start = time.perf_counter()
    hits = graph.run([(action.kind, action.text) for _, action in exploring])
    share = (time.perf_counter() - start) / len(exploring)
    for (row, action), hit in zip(exploring, hits):
        row.search_seconds += share
        row.kg_queries.append(action.text)
        row.kg_entity_ids.append(hit.entity_id)
        row.kg_tools.append(action.kind)
        row.retrieved.append(_insert(policy, row, protocol.information_block(graph.render(hit)), max_total_tokens))


def _as_id(value):
    """Store ids are integers; a remote retriever's string ids stay strings, unknown ones None."""
    if value is None:
        return None
    return int(value) if isinstance(value, int) or str(value).isdigit() else value


def _insert(policy, row: Trajectory, text: str, max_total_tokens: int) -> str:
    """Append environment text (mask 0), cut to the token budget; a cut row finishes ('length').
    Returns the text appended."""
    ids = policy.encode(text)
    budget = max_total_tokens - row.length
    if len(ids) >= budget:
        ids = ids[:budget]
        text = policy.tokenizer.decode(ids)
        row.finished_reason = "length"
    row._append(ids, text, False)
    return text


def batch_tensors(trajectories: list[Trajectory], pad_token_id: int) -> dict[str, torch.Tensor]:
    """Right-padded tensors for the update step, aligned with ``Policy.token_logprobs``' output.

    Returns ``input_ids``, ``attention_mask`` (B, T) and ``loss_mask``, ``old_logprobs`` (B, T),
    the last two zero over the prompt and the padding.

    Example:
        >>> t = Trajectory(0, 0, "p", [1, 2], [3, 4], [1, 0], [-0.5, 0.0])
        >>> batch_tensors([t], pad_token_id=0)["loss_mask"].tolist()
        [[0, 0, 1, 0]]
    """
    width = max(t.length for t in trajectories)
    out = {"input_ids": torch.full((len(trajectories), width), pad_token_id, dtype=torch.long),
           "attention_mask": torch.zeros(len(trajectories), width, dtype=torch.long),
           "loss_mask": torch.zeros(len(trajectories), width, dtype=torch.long),
           "old_logprobs": torch.zeros(len(trajectories), width)}
    for i, t in enumerate(trajectories):
        n, p = t.length, len(t.prompt_ids)
        out["input_ids"][i, :n] = torch.tensor(t.prompt_ids + t.response_ids)
        out["attention_mask"][i, :n] = 1
        out["loss_mask"][i, p:n] = torch.tensor(t.loss_mask, dtype=torch.long)
        out["old_logprobs"][i, p:n] = torch.tensor(t.old_logprobs)
    return out


def response_logprobs(policy, rows: list[Trajectory], micro_batch: int, by_length: bool = False) -> list[torch.Tensor]:
    """Each row's log-probs at its response positions under ``policy`` (float32, on the CPU), times
    its loss mask (retrieved tokens 0), without grad: ``Policy.token_logprobs`` over right-padded
    groups of ``micro_batch`` rows in the given order, or grouped by length (``by_length``: less
    padding). What the trainer's old log-probs, Dr. Free's likelihoods and the log-prob check share.

    Example:
        >>> # response_logprobs(policy, trajectories, micro_batch=16)[0].shape == (len(trajectories[0].response_ids),)
    """
    if micro_batch < 1:
        raise ValueError(f"micro_batch: expected an integer >= 1, got {micro_batch!r}")
    order = sorted(range(len(rows)), key=lambda i: rows[i].length) if by_length else list(range(len(rows)))
    out: list[torch.Tensor] = [torch.zeros(0)] * len(rows)
    with torch.no_grad():
        for start in range(0, len(order), micro_batch):
            idx = order[start:start + micro_batch]
            tensors = batch_tensors([rows[i] for i in idx], policy.tokenizer.pad_token_id)
            logp = policy.token_logprobs(tensors["input_ids"], tensors["attention_mask"]).float().cpu()
            for j, i in enumerate(idx):
                p, n = len(rows[i].prompt_ids), len(rows[i].response_ids)
                out[i] = logp[j, p:p + n] * torch.tensor(rows[i].loss_mask, dtype=logp.dtype)
    return out


# ---------------------------------------------------------------- greedy answers to stored questions

def load_questions(con, dataset: str, split: str | None = "test", limit: int | None = None):
    """Questions of a dataset/split as a DataFrame (question_id, question, answers, family).

    ``limit`` keeps at most that many questions per family (per dataset when imported QA has no
    family), the first by question_id, so every Table 1 column stays represented.
    """
    if limit is not None and int(limit) < 1:
        raise ValueError(f"limit={limit!r}: expected a positive number of questions per family")
    df = con.execute(
        """SELECT question_id, dataset, coalesce(family, dataset) AS family, question, answers
           FROM questions WHERE dataset = ? AND (? IS NULL OR split = ?) ORDER BY question_id""",
        [dataset, split, split]).df()
    if df.empty:
        known = con.execute("SELECT DISTINCT dataset || '/' || coalesce(split, '') FROM questions ORDER BY 1").fetchall()
        raise ValueError(f"no questions for dataset={dataset!r} split={split!r} in the store; "
                         f"known dataset/split: {[k for (k,) in known]}")
    if limit is not None:
        df = df.groupby("family", sort=False).head(int(limit)).reset_index(drop=True)
    return df


def score_questions(policy, search, questions, rollout_cfg, topk: int = 3, batch_size: int = 64, kg=None,
                    graph=None):
    """Greedy rollouts (paper, section 4.1) on ``questions`` (a ``load_questions`` frame), scored
    with the Search-R1 metrics. Returns the frame with prediction, em, f1, cover_em, turns, and the
    searches executed per question (``searches_doc``, ``searches_kg``; ``kg``: the KG tool, offered
    when given; ``graph``: EoG's graph tools, whose calls count as KG searches). A solver offered
    the graph tools answers a set: its em, f1 and cover_em score the set's first answer (so em is
    its Hit@1 against the golds), and ``prediction`` keeps the whole set (``evaluate.set_scores``).

    Example:
        >>> # scored = score_questions(policy, SearchTool(con), load_questions(con, "tinyworld", "val"), cfg.rollout)
    """
    from workbench.scoring import answer_list, cover_exact_match, exact_match, f1_score

    preds, turns, n_doc, n_kg = [], [], [], []
    texts = questions["question"].tolist()
    for start in range(0, len(texts), batch_size):
        trajs = rollout(policy, search, texts[start:start + batch_size], 1, max_turns=rollout_cfg.max_turns,
                        topk=topk, temperature=0.0, top_p=1.0, max_new_tokens=rollout_cfg.max_new_tokens,
                        max_total_tokens=rollout_cfg.max_total_tokens, seed=0, kg=kg, graph=graph)
        preds += [t.answer or "" for t in trajs]
        turns += [t.turns for t in trajs]
        n_doc += [len(t.queries) for t in trajs]
        n_kg += [len(t.kg_queries) for t in trajs]
    out = questions.copy()
    golds = [list(a) for a in out["answers"]]
    out["prediction"] = preds
    first = [(answer_list(p) or [""])[0] for p in preds] if graph is not None else preds
    out["em"] = [exact_match(p, g) for p, g in zip(first, golds)]
    out["f1"] = [f1_score(p, g) for p, g in zip(first, golds)]
    out["cover_em"] = [cover_exact_match(p, g) for p, g in zip(first, golds)]
    out["turns"] = turns
    out["searches_doc"], out["searches_kg"] = n_doc, n_kg
    return out
