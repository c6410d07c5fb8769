"""Held-out TinyWorld question sets and the Search-R1 parquet export (issue 2).

Five families, written the way human benchmarks read, several phrasings each:

* ``single_hop``  "Where was Kavimo Rutel born?"                                      (NQ-like)
* ``two_hop``     "In which country is the city where Kavimo Rutel was born?"         (2Wiki/MuSiQue)
* ``three_hop``   "... the city where the director of The Velor Affair was born ..."  (MuSiQue)
* ``comparison``  "Which company was founded first, A or B?"                         (HotpotQA)
* ``bridge``      "In what year was the company that produced The Velor Affair founded?" (HotpotQA
  bridge: the question names an entity, describes the bridge entity through it, and asks an
  attribute of the bridge)

Compositional chains follow functional relations only, so every question has one answer. Gold
answers are the answer's title plus its alias (when it has one); the gold chain lists the entity
ids the question walks through, and every answer is stated in the articles of that chain. Each
chain goes to exactly one split ('seed' = the seed pool used for training, 'val', 'test'), so the
test set is disjoint from the seed pool by chain and by question text. Questions whose answer
string appears in the question itself (e.g. "Where is University of Dasu?") are dropped.

Example:
    >>> from workbench.kg.tinyworld import generate_world
    >>> q = generate_questions(generate_world(200, 0), per_family=5, seed=0)
    >>> sorted(set(q["family"].to_pylist()))
    ['bridge', 'comparison', 'single_hop', 'three_hop', 'two_hop']
"""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from workbench import paths, store

DATASET = "tinyworld"
SPLITS = ("test", "val", "seed")  # filled in this order, so test gets the first (most varied) draws
FAMILIES = ("single_hop", "two_hop", "three_hop", "comparison", "bridge")
HOPS = {"single_hop": 1, "two_hop": 2, "three_hop": 3, "comparison": 2, "bridge": 2}

# Question forms for an entity-valued functional relation; {x} is a title or a noun phrase.
QUESTIONS = {
    "born in": ("Where was {x} born?", "In which city was {x} born?", "What is the birthplace of {x}?"),
    "citizen of": ("Which country is {x} a citizen of?", "Of which country does {x} hold citizenship?"),
    "educated at": ("Where was {x} educated?", "Which university did {x} attend?",
                    "At which university did {x} study?"),
    "member of": ("Which band is {x} a member of?", "In which band does {x} play?"),
    "employed by": ("Which company does {x} work for?", "Who is the employer of {x}?"),
    "located in": ("In which country is {x} located?", "Which country is {x} in?",
                   "{x} is a city in which country?"),
    "capital of": ("Which country has {x} as its capital?", "{x} is the capital of which country?"),
    "capital": ("What is the capital of {x}?", "Which city is the capital of {x}?"),
    "rises in": ("In which country does {x} rise?", "Where is the source of {x}?"),
    "situated in": ("In which city is {x} situated?", "Where is {x} located?"),
    "headquartered in": ("Where is {x} headquartered?", "In which city are the headquarters of {x}?"),
    "founded by": ("Who founded {x}?", "Who is the founder of {x}?", "{x} was founded by whom?"),
    "directed by": ("Who directed {x}?", "Who is the director of {x}?", "{x} was directed by whom?"),
    "produced by": ("Which company produced {x}?", "Who produced {x}?"),
    "filmed in": ("Where was {x} filmed?", "In which city was {x} shot?"),
    "written by": ("Who wrote {x}?", "Who is the author of {x}?", "{x} was written by whom?"),
    "published by": ("Who published {x}?", "Which company published {x}?"),
    "set in": ("Where is {x} set?", "In which city does {x} take place?"),
    "formed in": ("Where was {x} formed?", "In which city was {x} formed?"),
    "signed to": ("Which label is {x} signed to?", "Which company does {x} record for?"),
}
# Noun phrases for "the object of this relation, applied to {x}" (the inner hops).
PHRASES = {
    "born in": ("the city where {x} was born", "the birthplace of {x}"),
    "citizen of": ("the country of which {x} is a citizen",),
    "educated at": ("the university where {x} studied", "the alma mater of {x}"),
    "member of": ("the band that {x} plays in", "the band of {x}"),
    "employed by": ("the company that employs {x}", "the employer of {x}"),
    "located in": ("the country where {x} is located", "the country in which {x} lies"),
    "capital of": ("the country whose capital is {x}",),
    "capital": ("the capital of {x}", "the capital city of {x}"),
    "rises in": ("the country where {x} rises",),
    "situated in": ("the city where {x} is situated", "the city in which {x} is located"),
    "headquartered in": ("the city where {x} is headquartered", "the headquarters city of {x}"),
    "founded by": ("the founder of {x}", "the person who founded {x}"),
    "directed by": ("the director of {x}", "the person who directed {x}"),
    "produced by": ("the company that produced {x}", "the producer of {x}"),
    "filmed in": ("the city where {x} was filmed",),
    "written by": ("the author of {x}", "the person who wrote {x}"),
    "published by": ("the publisher of {x}", "the company that published {x}"),
    "set in": ("the city where {x} is set",),
    "formed in": ("the city where {x} was formed",),
    "signed to": ("the label of {x}", "the record label that signed {x}"),
}
# Year-valued relations: bridge questions end on one; comparisons compare two subjects by one.
YEAR_QUESTIONS = {
    "born in year": ("In what year was {x} born?", "When was {x} born?", "{x} was born in which year?"),
    "founded in year": ("In what year was {x} founded?", "When was {x} founded?"),
    "established in year": ("In what year was {x} established?", "When was {x} established?"),
    "released in year": ("In what year was {x} released?", "When did {x} come out?"),
    "published in year": ("In what year was {x} published?", "When was {x} first published?"),
    "formed in year": ("In what year was {x} formed?", "When did {x} form?"),
}
# (earlier-wins phrasings, later-wins phrasings) per year relation.
COMPARISONS = {
    "born in year": (("Who was born first, {a} or {b}?", "Who is older, {a} or {b}?"),
                     ("Who was born later, {a} or {b}?", "Who is younger, {a} or {b}?")),
    "founded in year": (("Which company was founded first, {a} or {b}?", "Which is older, {a} or {b}?"),
                        ("Which company was founded more recently, {a} or {b}?",)),
    "established in year": (("Which university was established first, {a} or {b}?",),
                            ("Which university is younger, {a} or {b}?",)),
    "released in year": (("Which film came out first, {a} or {b}?", "Which was released earlier, {a} or {b}?"),
                         ("Which film is more recent, {a} or {b}?",)),
    "published in year": (("Which book was published first, {a} or {b}?",),
                          ("Which book was published more recently, {a} or {b}?",)),
    "formed in year": (("Which band formed first, {a} or {b}?",), ("Which band was formed later, {a} or {b}?",)),
}

SEARCHR1_INSTRUCTION = (
    "Answer the given question. Think step by step inside <think> and </think> whenever you get new "
    "information. If you are missing knowledge, call the search engine with <search> query </search>; "
    "its top results come back between <information> and </information>. You may search as often as "
    "you need. When no more knowledge is needed, give the final answer inside <answer> and </answer>, "
    "with no explanation, for example <answer> Beijing </answer>. Question: ")

QUESTION_COLUMNS = ("question_id", "dataset", "split", "family", "question", "answers", "chain", "hops",
                    "source")


class _Graph:
    """Functional object maps, titles and aliases read from the world's (or a store's) tables."""

    def __init__(self, entities: pa.Table, edges: pa.Table, relations: pa.Table, aliases: pa.Table):
        self.n = int(pc.max(entities["entity_id"]).as_py()) + 1
        ids = entities["entity_id"].to_numpy()
        self.title = np.empty(self.n, dtype=object)
        self.title[ids] = entities["title"].to_numpy(zero_copy_only=False)
        self.type = np.empty(self.n, dtype=object)
        self.type[ids] = entities["type"].to_numpy(zero_copy_only=False)
        self.alias: dict[int, str] = dict(zip(aliases["entity_id"].to_pylist(), aliases["alias"].to_pylist()))
        rel = relations.to_pydict()
        self.domain = dict(zip(rel["label"], rel["domain"]))
        self.range = dict(zip(rel["label"], rel["range"]))
        functional = {lbl for lbl, f in zip(rel["label"], rel["functional"]) if f}
        src, dst = edges["src"].to_numpy(), edges["dst"].to_numpy()
        encoded = pc.dictionary_encode(edges["relation"]).combine_chunks()
        code = encoded.indices.to_numpy(zero_copy_only=False)
        code_of = {lbl: i for i, lbl in enumerate(encoded.dictionary.to_pylist())}
        self.obj: dict[str, np.ndarray] = {}
        for lbl in sorted(set(QUESTIONS) | set(YEAR_QUESTIONS)):
            if lbl not in functional or lbl not in code_of:
                continue
            m = code == code_of[lbl]
            obj = np.full(self.n, -1, dtype=np.int64)
            obj[src[m]] = dst[m]
            self.obj[lbl] = obj

    def answers(self, entity: int) -> list[str]:
        alias = self.alias.get(int(entity))
        return [self.title[entity]] + ([alias] if alias else [])


def _paths(g: _Graph, length: int, last: dict) -> list[tuple[str, ...]]:
    """Type-compatible relation paths; inner hops entity-valued, the last one from ``last``."""
    inner = [r for r in QUESTIONS if r in g.obj]
    lasts = [r for r in last if r in g.obj]
    out = []
    for combo in itertools.product(inner, repeat=length - 1):
        if any(g.range[a] != g.domain[b] for a, b in zip(combo, combo[1:])):
            continue
        for r in lasts:
            if not combo or g.range[combo[-1]] == g.domain[r]:
                out.append(combo + (r,))
    return out


def _chains(g: _Graph, path: tuple[str, ...]) -> np.ndarray:
    """All acyclic chains (rows of entity ids, start first) following ``path``."""
    start = np.flatnonzero(g.obj[path[0]] >= 0)
    cols = [start]
    for r in path:
        cols.append(g.obj[r][cols[-1]])
        ok = cols[-1] >= 0
        cols = [c[ok] for c in cols]
    chain = np.stack(cols, axis=1)
    distinct = np.ones(len(chain), dtype=bool)
    for i, j in itertools.combinations(range(chain.shape[1]), 2):
        distinct &= chain[:, i] != chain[:, j]
    return chain[distinct]


def _phrase(g: _Graph, path, chain, rng, last_forms) -> str:
    """Nest the noun phrases of the inner hops inside a question form of the last hop."""
    x = g.title[chain[0]]
    for r in path[:-1]:
        x = PHRASES[r][rng.integers(len(PHRASES[r]))].format(x=x)
    forms = last_forms[path[-1]]
    q = forms[rng.integers(len(forms))].format(x=x)
    return q[0].upper() + q[1:]


def _round_robin(groups: list[np.ndarray], cap: int, rng) -> list[tuple[int, np.ndarray]]:
    """Interleave shuffled candidates of each group (path) so every split sees many paths."""
    items = []
    for gi, rows in enumerate(groups):
        for rank, row in enumerate(rng.permutation(len(rows))[:cap]):
            items.append((rank, rng.random(), gi, rows[row]))
    items.sort(key=lambda t: (t[0], t[1]))
    return [(gi, row) for _, _, gi, row in items]


def _family_candidates(g: _Graph, family: str, need: int, rng):
    """Yield (question, answers, chain) candidates for one family, in round-robin order."""
    if family in ("single_hop", "two_hop", "three_hop", "bridge"):
        length = {"single_hop": 1, "two_hop": 2, "three_hop": 3, "bridge": 2}[family]
        forms = YEAR_QUESTIONS if family == "bridge" else QUESTIONS
        paths = _paths(g, length, forms)
        groups = [_chains(g, p) for p in paths]
        for gi, chain in _round_robin(groups, need, rng):
            q = _phrase(g, paths[gi], chain, rng, forms)
            yield q, g.answers(chain[-1]), [int(c) for c in chain]
        return
    # comparison: two subjects of one type with different years
    rels = [r for r in COMPARISONS if r in g.obj]
    groups = []
    for r in rels:
        subj = np.flatnonzero(g.obj[r] >= 0)
        if len(subj) < 2:
            groups.append(np.empty((0, 2), dtype=np.int64))
            continue
        m = min(4 * need, len(subj) * (len(subj) - 1) // 2)
        a, b = subj[rng.integers(0, len(subj), m)], subj[rng.integers(0, len(subj), m)]
        ya, yb = g.title[g.obj[r][a]], g.title[g.obj[r][b]]
        ok = (a < b) & (ya != yb)
        groups.append(np.stack([a[ok], b[ok]], axis=1))
    for gi, (a, b) in _round_robin(groups, need, rng):
        r = rels[gi]
        earlier, later = COMPARISONS[r]
        first_wins = rng.random() < 0.6
        forms = earlier if first_wins else later
        if rng.random() < 0.5:
            a, b = b, a  # the answer is not always named first
        ya, yb = int(g.title[g.obj[r][a]]), int(g.title[g.obj[r][b]])
        winner = a if (ya < yb) == first_wins else b
        q = forms[rng.integers(len(forms))].format(a=g.title[a], b=g.title[b])
        yield q, g.answers(winner), [int(a), int(b)]


def generate_questions(world=None, per_family: int = 200, seed: int = 0, *, tables: dict | None = None,
                       first_id: int = 0) -> pa.Table:
    """Question sets for a world: ``per_family`` questions per family in each split (fewer if the
    world is too small), as a table with the ``questions`` columns.

    Pass a ``World`` or ``tables`` = {"entities", "edges", "relations", "aliases"} (Arrow tables,
    e.g. read back from a store).

    Example:
        >>> from workbench.kg.tinyworld import generate_world
        >>> q = generate_questions(generate_world(200, 0), per_family=2, seed=0)
        >>> set(q["split"].to_pylist()) == {"seed", "val", "test"}
        True
    """
    if per_family < 1:
        raise ValueError(f"generate_questions: per_family must be >= 1, got {per_family}")
    src = tables if tables is not None else {k: getattr(world, k) for k in ("entities", "edges", "relations",
                                                                             "aliases")}
    g = _Graph(src["entities"], src["edges"], src["relations"], src["aliases"])
    rng = np.random.default_rng([seed, 7])
    rows = {c: [] for c in QUESTION_COLUMNS}
    seen_chains, seen_text = set(), set()
    for family in FAMILIES:
        need, taken = per_family * len(SPLITS), 0
        for q, answers, chain in _family_candidates(g, family, need, rng):
            key = tuple(sorted(chain)) if family == "comparison" else tuple(chain)
            low = q.lower()
            leaks = family != "comparison" and any(a.lower() in low for a in answers)
            if key in seen_chains or q in seen_text or leaks:
                continue
            seen_chains.add(key)
            seen_text.add(q)
            split = SPLITS[min(taken // per_family, len(SPLITS) - 1)]
            for c, v in zip(QUESTION_COLUMNS, (first_id + len(rows["question"]), DATASET, split, family, q,
                                               answers, chain, HOPS[family], DATASET)):
                rows[c].append(v)
            taken += 1
            if taken == need:
                break
    schema = pa.schema([("question_id", pa.int64()), ("dataset", pa.string()), ("split", pa.string()),
                        ("family", pa.string()), ("question", pa.string()), ("answers", pa.list_(pa.string())),
                        ("chain", pa.list_(pa.int64())), ("hops", pa.int32()), ("source", pa.string())])
    return pa.table(rows, schema=schema)


def write_questions(con, questions: pa.Table) -> int:
    """Append question rows (ids renumbered after the store's largest); return how many.

    The caller owns the transaction (``build_world`` writes world and questions in one).
    """
    from workbench import store

    first = store.next_id(con, "questions", "question_id")
    questions = questions.set_column(0, "question_id", pa.array(np.arange(first, first + questions.num_rows),
                                                                pa.int64()))
    cols = ", ".join(QUESTION_COLUMNS)
    with store.registered(con, "_qa_insert", questions):
        con.execute(f"INSERT INTO questions ({cols}) SELECT {cols} FROM _qa_insert")
    return questions.num_rows


def questions_from_store(con, per_family: int = 200, seed: int = 0) -> pa.Table:
    """Generate question sets from the world already in a store (same result as from the World)."""
    tables = {t: con.sql(f"SELECT * FROM {t}").to_arrow_table()
              for t in ("entities", "edges", "relations", "aliases")}
    return generate_questions(tables=tables, per_family=per_family, seed=seed)


def export_searchr1_parquet(con, path: str | Path, split: str, dataset: str = DATASET, force: bool = False) -> int:
    """Write one split of a dataset's questions in the Search-R1 parquet layout; return the row count.

    Columns: ``data_source``, ``prompt`` ([{"role": "user", "content": instruction + question}]),
    ``ability`` ("fact-reasoning"), ``reward_model`` ({"style": "rule", "ground_truth":
    {"target": answers}}), ``extra_info`` ({split, index, family, hops, question_id, chain}), and
    Search-R1's pass-through columns ``id``, ``question``, ``golden_answers``.

    Example:
        >>> import tempfile, os, pyarrow.parquet as pq
        >>> from workbench import store
        >>> from workbench.kg.tinyworld import build_world
        >>> con = store.connect(":memory:"); _ = build_world(con, preset="smoke")
        >>> out = os.path.join(tempfile.mkdtemp(), "test.parquet")
        >>> export_searchr1_parquet(con, out, "test") == pq.read_table(out).num_rows
        True
    """
    import pyarrow.parquet as pq

    rows = con.execute(
        "SELECT question_id, family, question, answers, chain, hops FROM questions "
        "WHERE dataset = ? AND split = ? ORDER BY question_id", [dataset, split]).fetchall()
    if not rows:
        known = con.execute("SELECT DISTINCT dataset || '/' || split FROM questions ORDER BY 1").fetchall()
        raise ValueError(f"export-qa: no questions with dataset={dataset!r} and split={split!r} in the store; "
                         f"it holds {[k for (k,) in known] or 'none'}")
    records = []
    for index, (qid, family, question, answers, chain, hops) in enumerate(rows):
        question = question.strip()
        if not question.endswith("?"):
            question += "?"
        records.append({
            "id": f"{dataset}_{split}_{qid}",
            "question": question,
            "golden_answers": list(answers),
            "data_source": dataset,
            "prompt": [{"role": "user", "content": SEARCHR1_INSTRUCTION + question + "\n"}],
            "ability": "fact-reasoning",
            "reward_model": {"style": "rule", "ground_truth": {"target": list(answers)}},
            "extra_info": {"split": split, "index": index, "family": family, "hops": int(hops),
                           "question_id": int(qid), "chain": [int(c) for c in (chain or [])]},
        })
    path = paths.output_file(path, "OUT", inputs=[store.file_of(con)], force=force)
    with paths.atomic_output(path) as tmp:
        pq.write_table(pa.Table.from_pylist(records), tmp)
    return len(records)
