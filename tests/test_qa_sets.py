"""TinyWorld question sets: families, splits disjoint, answers in the chain's text, Search-R1 parquet."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from workbench import cli, config, store
from workbench.kg import qa_sets
from workbench.kg.tinyworld import build_world, generate_world

PER_FAMILY = config.preset("smoke").world.questions_per_family


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    path = tmp_path_factory.mktemp("qa") / "smoke.duckdb"
    build_world(path, preset="smoke", seed=0)
    return path


@pytest.fixture(scope="module")
def con(db):
    c = store.connect(db, read_only=True)
    yield c
    c.close()


@pytest.fixture(scope="module")
def questions(con):
    return con.execute("SELECT * FROM questions ORDER BY question_id").fetchdf()


def test_every_family_and_split_is_filled(questions):
    assert set(questions.dataset) == {"tinyworld"}
    counts = questions.groupby(["family", "split"]).size()
    assert set(questions.family) == set(qa_sets.FAMILIES)
    assert set(questions.split) == {"seed", "val", "test"}
    assert (counts == PER_FAMILY).all(), counts
    assert questions.question_id.is_unique
    for family, hops in qa_sets.HOPS.items():
        assert (questions[questions.family == family].hops == hops).all()
    # several phrasings per family
    for family in ("single_hop", "two_hop", "comparison", "bridge"):
        starts = questions[questions.family == family].question.str.split().str[:2].str.join(" ")
        assert starts.nunique() >= 3, family


def test_test_split_disjoint_from_seed_pool(questions):
    test = questions[questions.split == "test"]
    seed = questions[questions.split == "seed"]
    assert not set(test.question) & set(seed.question)
    assert not {tuple(c) for c in test.chain} & {tuple(c) for c in seed.chain}
    val = questions[questions.split == "val"]
    assert not {tuple(c) for c in test.chain} & {tuple(c) for c in val.chain}


def test_gold_answers_are_stated_in_the_chain_articles(con, questions):
    text = {}
    for eid, t in con.execute("SELECT entity_id, text FROM passages").fetchall():
        text[eid] = text.get(eid, "") + "\n" + t
    for q in questions.itertuples():
        chain_text = "\n".join(text[e] for e in q.chain)
        for answer in q.answers:
            assert answer in chain_text, (q.question, answer)


def test_chains_follow_functional_labelled_edges(con, questions):
    edges = set(con.execute(
        "SELECT src, dst FROM edges JOIN relations ON relation = label WHERE functional").fetchall())
    title = dict(con.execute("SELECT entity_id, title FROM entities").fetchall())
    for q in questions.itertuples():
        chain = list(q.chain)
        if q.family == "comparison":
            assert q.answers[0] in (title[chain[0]], title[chain[1]])
            assert title[chain[0]] in q.question and title[chain[1]] in q.question
            continue
        assert len(chain) == q.hops + 1 and len(set(chain)) == len(chain)
        assert all((a, b) in edges for a, b in zip(chain, chain[1:])), q.question
        assert q.answers[0] == title[chain[-1]]
        assert title[chain[0]] in q.question
        assert not any(a.lower() in q.question.lower() for a in q.answers)  # no answer leakage


def test_comparison_answer_is_the_right_one(con, questions):
    year_of = {}
    for src, year in con.execute(
            "SELECT e.src, y.title FROM edges e JOIN entities y ON y.entity_id = e.dst "
            "WHERE y.kind = 'year'").fetchall():
        year_of[src] = int(year)
    title = dict(con.execute("SELECT entity_id, title FROM entities").fetchall())
    for q in questions[questions.family == "comparison"].itertuples():
        a, b = q.chain
        earlier, later = (a, b) if year_of[a] < year_of[b] else (b, a)
        wants_later = any(w in q.question for w in ("later", "younger", "more recent"))
        assert q.answers[0] == title[later if wants_later else earlier], q.question


def test_questions_are_deterministic_and_same_from_store(con):
    world = generate_world(200, 0)
    one = qa_sets.generate_questions(world, PER_FAMILY, seed=0)
    two = qa_sets.generate_questions(world, PER_FAMILY, seed=0)
    assert one.equals(two)
    stored = con.execute("SELECT question FROM questions ORDER BY question_id").fetchall()
    assert [q for (q,) in stored] == one["question"].to_pylist()
    assert qa_sets.questions_from_store(con, PER_FAMILY, seed=0).equals(one)
    with pytest.raises(ValueError, match="per_family"):
        qa_sets.generate_questions(world, 0)


def test_searchr1_parquet_round_trip(con, questions, tmp_path):
    out = tmp_path / "test.parquet"
    n = qa_sets.export_searchr1_parquet(con, out, "test")
    table = pq.read_table(out)
    assert table.num_rows == n == (questions.split == "test").sum()
    assert {"data_source", "prompt", "ability", "reward_model", "extra_info"} <= set(table.column_names)
    rows = table.to_pylist()
    test = questions[questions.split == "test"].reset_index(drop=True)
    for i, row in enumerate(rows):
        assert row["data_source"] == "tinyworld" and row["ability"] == "fact-reasoning"
        assert row["prompt"][0]["role"] == "user" and test.question[i] in row["prompt"][0]["content"]
        assert row["reward_model"]["style"] == "rule"
        assert row["reward_model"]["ground_truth"]["target"] == list(test.answers[i])
        assert row["extra_info"]["split"] == "test" and row["extra_info"]["index"] == i
        assert row["extra_info"]["family"] == test.family[i]
    with pytest.raises(ValueError, match="split='nope'"):
        qa_sets.export_searchr1_parquet(con, tmp_path / "x.parquet", "nope")


def test_cli_export_qa(db, tmp_path, capsys):
    out = tmp_path / "val.parquet"
    assert cli.main(["export-qa", "--db", str(db), "--split", "val", str(out)]) == 0
    assert pq.read_table(out).num_rows == PER_FAMILY * len(qa_sets.FAMILIES)
    assert "val" in capsys.readouterr().out
    assert cli.main(["export-qa", "--db", str(tmp_path / "missing.duckdb"), str(out)]) == 2
    assert "no such store" in capsys.readouterr().err
