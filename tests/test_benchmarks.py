"""The six TinyWorld benchmarks (issue 42): sizes, determinism, every answer re-derived from the world's
edges (unique, not in the question), no seed-pool template, fact overlap within what each card states,
the store, the Search-R1 parquet round trip."""

from __future__ import annotations

import collections
import json
import re
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from workbench import paths, store
from workbench.kg import qa_sets
from workbench.kg.benchmarks import (GENERATORS, SUITE, ensure_suite, generate_suite, nq, overlap, size_of,
                                     stored_sizes, to_table)
from workbench.kg.benchmarks.view import GENERIC_WORDS, Held, WorldView, template_regex
from workbench.kg.tinyworld import build_world, generate_world
from workbench.scoring import normalize_answer

# Share of a benchmark's questions that use at least one fact some seed or validation question uses, at
# most (the cards state these; measured 0.46, 0.71, 0.32, 0.83, 0.82, 0 on the tiny world of seed 0).
CARD_OVERLAP = {"tw-nq": 0.50, "tw-trivia": 0.75, "tw-pop": 0.35, "tw-hotpot": 0.85, "tw-2wiki": 0.85,
                "tw-bamboogle": 0.0}
SEED_TEMPLATES = ([f for v in qa_sets.QUESTIONS.values() for f in v] + [f for v in qa_sets.YEAR_QUESTIONS.values()
                  for f in v] + [f for a, b in qa_sets.COMPARISONS.values() for f in a + b])
SEED_PHRASES = [f for v in qa_sets.PHRASES.values() for f in v]
FUNCTION_WORDS = {"a", "are", "as", "at", "by", "did", "does", "for", "has", "in", "is", "its", "of", "or", "that",
                  "the", "to", "was", "what", "when", "where", "which", "who", "whom", "whose"}


@pytest.fixture(scope="module")
def tiny():
    """The tiny preset's world (seed 0), its questions, and the suite at the paper's sizes."""
    world = generate_world(2000, 0)
    questions = qa_sets.generate_questions(world, 200, 0)
    view = WorldView.from_world(world)
    held = Held.from_questions(questions, view)
    return world, questions, view, held, generate_suite(view=view, held=held)


def _words(template: str) -> set[str]:
    return set(re.findall(r"[a-z]+", re.sub(r"\{[a-z0-9]+\}", " ", template.lower())))


def test_sizes_and_families_at_the_tiny_preset(tiny):
    *_, items = tiny
    assert {name: len(part) for name, part in items.items()} == {
        "tw-nq": 500, "tw-trivia": 500, "tw-pop": 500, "tw-hotpot": 500, "tw-2wiki": 500, "tw-bamboogle": 125}
    families = {name: collections.Counter(i.family for i in part) for name, part in items.items()}
    assert families["tw-pop"] == {"inlinks 0-1": 125, "inlinks 2-3": 125, "inlinks 4-7": 125, "inlinks 8+": 125}
    assert families["tw-hotpot"] == {"bridge": 250, "comparison": 250}
    assert families["tw-2wiki"] == {t: 125 for t in ("compositional", "inference", "comparison", "bridge_comparison")}
    yes_no = collections.Counter(i.answers[0] for i in items["tw-2wiki"] if i.spec["kind"] == "same")
    assert abs(yes_no["yes"] - yes_no["no"]) <= 2 and yes_no["yes"] > 50
    assert all(i.hops == 4 for i in items["tw-2wiki"] if i.family == "bridge_comparison")
    assert size_of("tw-bamboogle", 40) == 10


def test_deterministic_by_world_and_seed(tiny):
    world, questions, *_, items = tiny
    again = generate_suite(world, questions)
    assert {k: [(i.question, i.answers, i.chain) for i in v] for k, v in again.items()} == \
           {k: [(i.question, i.answers, i.chain) for i in v] for k, v in items.items()}
    other = generate_world(2000, 1)
    theirs = generate_suite(other, qa_sets.generate_questions(other, 200, 0))
    assert [i.question for i in theirs["tw-nq"]] != [i.question for i in items["tw-nq"]]
    reseeded = generate_suite(world, questions, seed=1, names=("tw-nq",))
    assert [i.question for i in reseeded["tw-nq"]] != [i.question for i in items["tw-nq"]]


def _edges(world):
    out = collections.defaultdict(list)
    for s, d, r in zip(world.edges["src"].to_pylist(), world.edges["dst"].to_pylist(),
                       world.edges["relation"].to_pylist()):
        out[(s, r)].append(d)
    return out


def _walk(edges, start, relations):
    """The end of a chain along ``relations``, every hop checked to have exactly one object."""
    cur = start
    for r in relations:
        objects = edges.get((cur, r), [])
        assert len(objects) == 1, f"{r} of {cur}: {objects} (not exactly one)"
        cur = objects[0]
    return cur


def test_every_answer_follows_from_the_worlds_edges_and_is_unique(tiny):
    world, *_, items = tiny
    edges = _edges(world)
    title = dict(zip(world.entities["entity_id"].to_pylist(), world.entities["title"].to_pylist()))
    etype = dict(zip(world.entities["entity_id"].to_pylist(), world.entities["type"].to_pylist()))
    alias = dict(zip(world.aliases["entity_id"].to_pylist(), world.aliases["alias"].to_pylist()))
    owners = collections.Counter(normalize_answer(t) for t in title.values())
    for name, part in items.items():
        for item in part:
            spec = item.spec
            if spec["kind"] == "path":
                answer = _walk(edges, spec["start"], spec["relations"])
                assert title[spec["start"]] in item.question
            elif spec["kind"] == "clues":
                fits = [e for e, t in etype.items() if t == spec["type"]
                        and all(edges.get((e, r)) == [o] for r, o in spec["clues"])]
                assert len(fits) == 1, (item.question, fits)
                answer = fits[0]
                assert all(title[o] in item.question for _, o in spec["clues"])
            elif spec["kind"] == "choice":
                a, b = spec["subjects"]
                ya, yb = (int(title[_walk(edges, e, spec["relations"])]) for e in (a, b))
                assert ya != yb
                answer = a if (ya < yb) == spec["earlier"] else b
                assert title[a] in item.question and title[b] in item.question
            else:
                assert spec["kind"] == "same"
                a, b = spec["subjects"]
                same = _walk(edges, a, spec["relations"]) == _walk(edges, b, spec["relations"])
                assert item.answers == ["yes" if same else "no"]
                if len(spec["relations"]) == 2:  # a bridge comparison compares two different bridges
                    assert _walk(edges, a, spec["relations"][:1]) != _walk(edges, b, spec["relations"][:1])
                continue
            assert item.answers == [title[answer]] + ([alias[answer]] if answer in alias else []), item.question
            assert owners[normalize_answer(title[answer])] == 1  # no other entity has the answer's name
            assert item.chain[-1] == answer or spec["kind"] == "choice"


def test_no_answer_is_given_away_by_its_question(tiny):
    *_, items = tiny
    for part in items.values():
        for item in part:
            words = normalize_answer(item.question).split()
            if item.spec["kind"] == "choice":  # a choice names both options, the answer (its title) among them
                assert f" {normalize_answer(item.answers[0])} " in f" {' '.join(words)} "
                continue
            for gold in map(normalize_answer, item.answers):
                assert f" {gold} " not in f" {' '.join(words)} ", item.question
                assert not [w for w in gold.split() if w in words and w not in GENERIC_WORDS], item.question


def test_no_question_follows_a_seed_pool_template(tiny):
    *_, items = tiny
    patterns = [(t, template_regex(t)) for t in SEED_TEMPLATES]
    for name, part in items.items():
        for item in part:
            matched = [t for t, p in patterns if p.match(item.question)]
            assert not matched, (name, item.question, matched)
    # and no benchmark form is a seed template or phrase with other fields
    seed_forms = {re.sub(r"\{[a-z]\}", "{}", t).lower() for t in SEED_TEMPLATES + SEED_PHRASES}
    for name, m in GENERATORS.items():
        assert not seed_forms & {re.sub(r"\{[a-z0-9]+\}", "{}", t).lower() for t in m.TEMPLATES}, name


def test_tw_nq_uses_no_word_of_the_seed_templates_but_function_words():
    seed_words = set().union(*map(_words, SEED_TEMPLATES + SEED_PHRASES)) - FUNCTION_WORDS
    for form in nq.TEMPLATES:
        assert not _words(form) & seed_words, form
        assert form == form.lower() and not form.endswith("?")


def test_fact_and_chain_overlap_with_the_seed_pool_within_the_cards(tiny):
    world, questions, view, held, items = tiny
    cards = paths.project_root() / "data" / "benchmarks"
    for name, part in items.items():
        share = overlap(part, held)["with_training_fact"]
        assert share <= CARD_OVERLAP[name], (name, share)
        card = (cards / f"{name}.md").read_text()
        assert f"{round(100 * CARD_OVERLAP[name])}%" in card, f"{name}.md must state its bound"
        for item in part:  # never a training question's own chain or pair, nor its text
            key = frozenset(item.spec["subjects"]) if item.spec["kind"] in ("choice", "same") else tuple(item.chain)
            assert key not in held.chains and item.question not in held.texts
    # the check itself can fail: the training questions' own facts are found
    assert overlap([i for i in items["tw-hotpot"]], held)["with_training_fact"] > 0.5
    assert not any(held.uses(i.facts) for i in items["tw-bamboogle"])


def test_the_store_holds_the_suite_after_the_worlds_questions_and_keeps_it(tmp_path):
    con = store.connect(str(tmp_path / "s.duckdb"))
    build_world(con, preset="smoke", seed=0)
    (first,) = con.execute("SELECT max(question_id) + 1 FROM questions").fetchone()
    sizes = ensure_suite(con, n=12)
    assert sizes == {name: size_of(name, 12) for name in SUITE}
    (low,) = con.execute("SELECT min(question_id) FROM questions WHERE dataset LIKE 'tw-%'").fetchone()
    assert low == first
    rows = con.execute("SELECT dataset, question FROM questions WHERE dataset LIKE 'tw-%' ORDER BY question_id").fetchall()
    assert ensure_suite(con, n=99) == sizes  # kept, whatever size is asked later
    con.execute("DELETE FROM questions WHERE dataset = 'tw-pop'")
    assert ensure_suite(con, n=12)["tw-pop"] == 12  # a missing one is rebuilt, the others kept
    assert [r for r in con.execute("SELECT dataset, question FROM questions WHERE dataset LIKE 'tw-%' AND dataset "
                                   "<> 'tw-pop' ORDER BY question_id").fetchall()] == [r for r in rows if r[0] != "tw-pop"]
    # the same world gives the same questions from the store as from the World
    world = generate_world(200, 0)
    again = generate_suite(world, qa_sets.generate_questions(world, 20, 0), n=12, names=("tw-nq",))
    assert [i.question for i in again["tw-nq"]] == [q for d, q in rows if d == "tw-nq"]


def test_the_suite_needs_the_seed_pool(tmp_path):
    con = store.connect(str(tmp_path / "s.duckdb"))
    build_world(con, preset="smoke", seed=0)
    con.execute("DELETE FROM questions WHERE split IN ('seed', 'val')")
    with pytest.raises(ValueError, match="no tinyworld questions of splits"):
        ensure_suite(con, n=5)
    assert stored_sizes(con) == {name: 0 for name in SUITE}


def test_searchr1_parquet_round_trip(tmp_path):
    from workbench.qa_import import import_qa

    con = store.connect(str(tmp_path / "s.duckdb"))
    build_world(con, preset="smoke", seed=0)
    ensure_suite(con, n=12)
    out = tmp_path / "tw-2wiki.parquet"
    n = qa_sets.export_searchr1_parquet(con, out, "test", dataset="tw-2wiki")
    table = pq.read_table(out).to_pylist()
    assert n == 12 and {r["data_source"] for r in table} == {"tw-2wiki"}
    assert table[0]["reward_model"]["ground_truth"]["target"] == table[0]["golden_answers"]
    other = store.connect(str(tmp_path / "other.duckdb"))
    assert import_qa(other, out, "tw-2wiki")["questions"] == 12
    mine = con.execute("SELECT question, answers, family FROM questions WHERE dataset = 'tw-2wiki' "
                       "ORDER BY question_id").fetchall()
    theirs = other.execute("SELECT question, answers, family, split FROM questions ORDER BY question_id").fetchall()
    assert [r[:3] for r in theirs] == mine and {r[3] for r in theirs} == {"test"}


def test_to_table_keeps_the_spec(tiny):
    *_, items = tiny
    table = to_table({"tw-bamboogle": items["tw-bamboogle"][:3]}, first_id=7)
    assert table["question_id"].to_pylist() == [7, 8, 9]
    assert json.loads(table["spec"][0].as_py())["kind"] == "path"


def test_every_benchmark_has_a_card():
    cards = Path(paths.project_root()) / "data" / "benchmarks"
    for name in SUITE:
        text = (cards / f"{name}.md").read_text()
        assert text.startswith(f"# {name}") and "What it measures" in text and "warm start" in text


def test_cli_exports_the_suite_in_one_searchr1_file_building_it_first(tmp_path, capsys):
    from workbench.cli import main

    db = str(tmp_path / "s.duckdb")
    assert main(["world", "--preset", "smoke", "--db", db]) == 0
    out = tmp_path / "test.parquet"
    assert main(["export-qa", str(out), "--suite", "table1", "--db", db, "--preset", "smoke"]) == 0
    rows = pq.read_table(out).to_pylist()
    assert collections.Counter(r["data_source"] for r in rows) == {name: size_of(name, 40) for name in SUITE}
    assert all(r["prompt"][0]["content"].endswith(r["question"] + "\n") for r in rows)
    assert main(["export-qa", str(tmp_path / "v.parquet"), "--dataset", "tw-nq", "--split", "val", "--db", db]) == 2
    assert "test split only" in capsys.readouterr().err
