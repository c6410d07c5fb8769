"""`workbench import seed-pool`: the paper's seed pool and validation split (NQ + HotpotQA training
sets, section 4.1) from QA files imported in their real layouts (FlashRAG parquet, HotpotQA JSON,
Search-R1's combined parquet)."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from workbench import store
from workbench.cli import main
from workbench.config import preset
from workbench.plan import check_inputs
from workbench.qa_import import build_seed_pool, import_qa


def nq_parquet(path, n, split="train"):
    """FlashRAG's NQ layout (id, question, golden_answers)."""
    pq.write_table(pa.table({"id": [f"{split}_{i}" for i in range(n)], "question": [f"nq {split} {i}?" for i in range(n)],
                             "golden_answers": [[f"a{i}"] for i in range(n)]}), path)
    return path


def hotpot_json(path, n):
    """HotpotQA's training JSON (a list with _id, question, answer, type, supporting_facts, context)."""
    path.write_text(json.dumps([{"_id": f"h{i}", "question": f"hotpot {i}?", "answer": f"b{i}",
                                 "type": "bridge" if i % 3 else "comparison", "level": "medium",
                                 "supporting_facts": [["T", 0]], "context": [["T", ["t."]]]} for i in range(n)]))
    return path


@pytest.fixture
def db(tmp_path):
    """A store with NQ train (30) and test (4) and HotpotQA train (21), imported through the CLI."""
    path = str(tmp_path / "paper.duckdb")
    for file, name, split in ((nq_parquet(tmp_path / "nq_train.parquet", 30), "nq", "train"),
                              (nq_parquet(tmp_path / "nq_test.parquet", 4, "test"), "nq", "test"),
                              (hotpot_json(tmp_path / "hotpot_train_v1.1.json", 21), "hotpotqa", "train")):
        assert main(["import", "qa", str(file), "--name", name, "--split", split, "--db", path]) == 0
    return path


def pool(db, name="nq_hotpotqa"):
    con = store.connect(db, read_only=True)
    try:
        return con.execute("SELECT split, family, question, answers FROM questions WHERE dataset = ? "
                           "ORDER BY question_id", [name]).fetchall()
    finally:
        con.close()


def test_cli_builds_seed_and_val_from_the_training_sets(db, capsys):
    capsys.readouterr()
    assert main(["import", "seed-pool", "--from", "nq", "--from", "hotpotqa", "--val", "5", "--db", db]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["splits"] == {"seed": 41, "val": 10}
    assert report["per_source"] == {"hotpotqa": {"seed": 16, "val": 5}, "nq": {"seed": 25, "val": 5}}
    rows = pool(db)
    questions = [q for _, _, q, _ in rows]
    assert sorted(questions) == sorted([f"nq train {i}?" for i in range(30)] + [f"hotpot {i}?" for i in range(21)])
    assert not any("test" in q for q in questions)  # the test set stays out
    val = [(f, q) for s, f, q, _ in rows if s == "val"]
    assert sum(f == "nq" for f, _ in val) == 5 and sum(f in ("bridge", "comparison") for f, _ in val) == 5
    assert [s for s, *_ in rows] == ["val"] * 10 + ["seed"] * 41  # val first; within a split the shuffled order
    assert [q for _, f, q, _ in rows if f == "nq"] != sorted(q for _, f, q, _ in rows if f == "nq")
    answers = {q: a for _, _, q, a in rows}
    assert answers["nq train 7?"] == ["a7"] and answers["hotpot 4?"] == ["b4"]
    con = store.connect(db, read_only=True)
    kind, fingerprint, inserted = con.execute("SELECT kind, fingerprint, inserted FROM imports "
                                              "ORDER BY import_id DESC LIMIT 1").fetchone()
    con.close()
    assert kind == "qa:seed-pool" and fingerprint.startswith("sha256:") and json.loads(inserted)["seed"] == 0
    checks = {c.name: c for c in check_inputs(preset("paper"), db, datasets=("nq",))}  # plan finds them
    assert checks["seed pool"].ok and checks["validation split"].ok and checks["test set nq"].ok
    assert checks["seed pool"].detail == "nq_hotpotqa/seed: 41 questions"


def test_deterministic_by_seed_and_refused_twice_unless_replace(db, tmp_path):
    con = store.connect(db)
    build_seed_pool(con, ["nq", "hotpotqa"], val=5, seed=0)
    first = pool_rows = con.execute("SELECT split, question FROM questions WHERE dataset = 'nq_hotpotqa' "
                                    "ORDER BY question_id").fetchall()
    with pytest.raises(ValueError, match=r"dataset 'nq_hotpotqa' already has {'seed': 41, 'val': 10}; pass --replace"):
        build_seed_pool(con, ["nq", "hotpotqa"], val=5, seed=0)
    assert con.execute("SELECT count(*) FROM questions WHERE dataset = 'nq_hotpotqa'").fetchone() == (51,)
    assert build_seed_pool(con, ["nq", "hotpotqa"], val=5, seed=0, replace=True)["replaced"] == 51
    again = con.execute("SELECT split, question FROM questions WHERE dataset = 'nq_hotpotqa' ORDER BY question_id").fetchall()
    assert again == first == pool_rows
    build_seed_pool(con, ["nq", "hotpotqa"], val=5, seed=1, replace=True)
    other = con.execute("SELECT split, question FROM questions WHERE dataset = 'nq_hotpotqa' ORDER BY question_id").fetchall()
    assert {q for s, q in other if s == "val"} != {q for s, q in first if s == "val"}
    assert con.execute("SELECT count(*) FROM questions WHERE dataset = 'nq_hotpotqa'").fetchone() == (51,)
    con.close()


def test_search_r1s_combined_training_file_splits_by_data_source(tmp_path):
    path = tmp_path / "nq_hotpotqa_train.parquet"
    n = 12
    pq.write_table(pa.table({  # Search-R1's layout: data_source, prompt, ability, reward_model, extra_info
        "data_source": ["nq" if i % 2 else "hotpotqa" for i in range(n)],
        "prompt": [[{"role": "user", "content": f"Answer the given question. Question: q{i}?\n"}] for i in range(n)],
        "ability": ["fact-reasoning"] * n,
        "reward_model": [{"style": "rule", "ground_truth": {"target": [f"a{i}"]}} for i in range(n)],
        "extra_info": [{"split": "train", "index": i} for i in range(n)]}), path)
    con = store.connect(tmp_path / "s.duckdb")
    import_qa(con, path, "nq_hotpotqa_train")
    report = build_seed_pool(con, ["nq_hotpotqa_train"], val=2)
    assert report["per_source"] == {"nq_hotpotqa_train:hotpotqa": {"seed": 4, "val": 2},
                                    "nq_hotpotqa_train:nq": {"seed": 4, "val": 2}}
    assert con.execute("SELECT family, count(*) FROM questions WHERE dataset = 'nq_hotpotqa' AND split = 'val' "
                       "GROUP BY ALL ORDER BY 1").fetchall() == [("hotpotqa", 2), ("nq", 2)]
    con.close()


def test_bad_requests_name_the_option_and_change_nothing(db, capsys):
    for args, message in ((["--from", "nq", "--from", "triviaqa"], "--from ['triviaqa']: no questions in split 'train'"),
                          (["--from", "nq", "--from", "hotpotqa", "--val", "21"], "--val 21: source 'hotpotqa' has only 21"),
                          (["--from", "nq", "--val", "0"], "--val 0: expected a positive number"),
                          (["--from", "nq", "--name", "nq"], "--name 'nq': expected a new dataset name")):
        capsys.readouterr()
        assert main(["import", "seed-pool", *args, "--db", db]) == 2
        assert message in capsys.readouterr().err
    assert pool(db) == []
    assert main(["import", "seed-pool", "--from", "nq", "--db", db + ".missing"]) == 2
    assert "no store at" in capsys.readouterr().err
