"""QA dataset importers: every format written here in its real layout, malformed records, the CLI."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from workbench import store
from workbench.cli import main
from workbench.qa_import import detect_format, import_qa


def rows(con, dataset):
    return con.execute("SELECT split, family, question, answers, chain, hops, source FROM questions "
                       "WHERE dataset = ? ORDER BY question_id", [dataset]).fetchall()


def jsonl(path, records):
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records))
    return path


def search_r1_table(targets):
    """Search-R1's layout (data_source, prompt, ability, reward_model, extra_info)."""
    n = len(targets)
    prompts = [[{"role": "user", "content": "Answer the given question... For example, <answer> Beijing </answer>. "
                                            f"Question: who directed film {i}?\n"}] for i in range(n)]
    return pa.table({
        "data_source": ["nq", "hotpotqa"][:n],
        "prompt": prompts,
        "ability": ["fact-reasoning"] * n,
        "reward_model": [{"style": "rule", "ground_truth": {"target": t}} for t in targets],
        "extra_info": [{"split": "train", "index": i} for i in range(n)],
    })


def test_search_r1_parquet(con, tmp_path):
    path = tmp_path / "train.parquet"
    pq.write_table(search_r1_table([["Bo Lind", "B. Lind"], ["Cara"]]), path)
    result = import_qa(con, path, "sr1")
    assert result["format"] == "parquet" and result["splits"] == {"train": 2}
    assert rows(con, "sr1") == [("train", None, "who directed film 0?", ["Bo Lind", "B. Lind"], [], None, "nq"),
                                ("train", None, "who directed film 1?", ["Cara"], [], None, "hotpotqa")]


def test_flashrag_parquet_and_split_argument(con, tmp_path):
    path = tmp_path / "nq.parquet"
    pq.write_table(pa.table({"id": ["test_0", "test_1"], "question": ["who wrote x", "where is y"],
                             "golden_answers": [["Ann"], ["Peru", "Lima"]],
                             "metadata": [{"k": 1}, {"k": 2}]}), path)
    import_qa(con, path, "nq", split="dev")
    assert [(r[0], r[2], r[3], r[6]) for r in rows(con, "nq")] == \
        [("dev", "who wrote x", ["Ann"], "nq.parquet"), ("dev", "where is y", ["Peru", "Lima"], "nq.parquet")]


def test_kilt_task_jsonl(con, tmp_path):
    path = jsonl(tmp_path / "nq-dev-kilt.jsonl", [
        {"id": "q1", "input": "who wrote alba", "output": [{"answer": "Cara"}, {"provenance": [{"wikipedia_id": "12"}]},
                                                            {"answer": "C."}]},
        {"id": "q2", "input": "capital of peru", "output": [{"answer": "Lima"}]}])
    assert detect_format(path) == "kilt"
    assert import_qa(con, path, "nq-kilt", split="dev")["questions"] == 2
    assert [r[3] for r in rows(con, "nq-kilt")] == [["Cara", "C."], ["Lima"]]


HOTPOT = [{"_id": "a1", "question": "Which film is older?", "answer": "Alba", "type": "comparison", "level": "hard",
           "supporting_facts": [["Alba", 0], ["Zed", 0]], "context": [["Alba", ["Alba is a 1990 film."]]]},
          {"_id": "b2", "question": "Who directed the film Cara wrote?", "answer": "Bo Lind", "type": "bridge",
           "level": "medium", "supporting_facts": [["Alba", 1]], "context": [["Alba", ["..."]]]}]


def test_hotpot_json(con, tmp_path):
    path = tmp_path / "hotpot_dev.json"
    path.write_text(json.dumps(HOTPOT))
    result = import_qa(con, path, "hotpotqa", split="dev")
    assert result["format"] == "hotpot"
    assert [(r[1], r[3], r[5]) for r in rows(con, "hotpotqa")] == [("comparison", ["Alba"], 2),
                                                                   ("bridge", ["Bo Lind"], 2)]


def test_plain_jsonl_with_record_splits(con, tmp_path):
    path = jsonl(tmp_path / "mine.jsonl", [{"question": "q one", "answers": ["a"], "split": "val", "family": "2-hop"},
                                           "", {"question": "q two", "answers": "b"}])
    result = import_qa(con, path, "mine")
    assert result["splits"] == {"val": 1, "test": 1}
    assert [(r[0], r[1], r[3]) for r in rows(con, "mine")] == [("val", "2-hop", ["a"]), ("test", None, ["b"])]


@pytest.mark.parametrize("name, write, fmt, expected", [
    ("p.jsonl", lambda p: jsonl(p, [{"question": "q", "answers": ["a"]}, {"question": "q2"}]), "auto",
     r"p\.jsonl line 2: expected field 'answers'"),
    ("p.jsonl", lambda p: jsonl(p, [{"question": "q", "answers": ["a"]}, "{oops"]), "jsonl",
     r"p\.jsonl line 2: expected a JSON object"),
    ("k.jsonl", lambda p: jsonl(p, [{"id": "q1", "input": "x", "output": [{"answer": "a"}]},
                                    {"id": "q9", "input": "y", "output": [{"provenance": []}]}]), "auto",
     r"k\.jsonl line 2 \(id 'q9'\): expected field 'output\[\]\.answer'"),
    ("h.json", lambda p: p.write_text(json.dumps([HOTPOT[0], {k: v for k, v in HOTPOT[1].items()
                                                              if k != "supporting_facts"}])), "auto",
     r"h\.json index 1 \(id 'b2'\): expected field 'supporting_facts'"),
    ("h.json", lambda p: p.write_text(json.dumps({"not": "a list"})), "hotpot", r"h\.json: expected a JSON list"),
    ("f.parquet", lambda p: pq.write_table(pa.table({"id": ["x0", "x1"], "question": ["q", "q2"],
                                                     "golden_answers": [["a"], []]}), p), "auto",
     r"f\.parquet row 1 \(id 'x1'\): expected column 'golden_answers'"),
    ("s.parquet", lambda p: pq.write_table(search_r1_table([["a"], []]), p), "auto",
     r"s\.parquet row 1: expected column 'reward_model\.ground_truth\.target'"),
    ("x.parquet", lambda p: p.write_text("not parquet"), "auto", r"x\.parquet: expected a parquet file"),
])
def test_malformed_writes_nothing(con, tmp_path, name, write, fmt, expected):
    import_qa(con, jsonl(tmp_path / "ok.jsonl", [{"question": "q0", "answers": ["a0"]}]), "ok")
    before = con.execute("SELECT count(*), (SELECT count(*) FROM imports) FROM questions").fetchone()
    path = tmp_path / name
    write(path)
    with pytest.raises(ValueError, match=expected):
        import_qa(con, path, "bad", fmt=fmt)
    assert con.execute("SELECT count(*), (SELECT count(*) FROM imports) FROM questions").fetchone() == before


def test_reimport_needs_replace(con, tmp_path):
    path = jsonl(tmp_path / "a.jsonl", [{"question": "q", "answers": ["a"]}])
    import_qa(con, path, "a")
    with pytest.raises(ValueError, match="dataset 'a' already has questions in {'test': 1}; pass --replace"):
        import_qa(con, path, "a")
    assert import_qa(con, path, "a", replace=True)["replaced"] == 1
    assert con.execute("SELECT count(*) FROM questions").fetchone() == (1,)
    import_qa(con, path, "a", split="dev")  # another split of the same dataset is no clash
    assert con.execute("SELECT count(*) FROM questions").fetchone() == (2,)


def test_cli_import_qa(tmp_path, capsys):
    db = str(tmp_path / "cli.duckdb")
    path = tmp_path / "hotpot.json"
    path.write_text(json.dumps(HOTPOT))
    assert main(["import", "qa", str(path), "--name", "hotpotqa", "--split", "dev", "--db", db]) == 0
    assert json.loads(capsys.readouterr().out)["questions"] == 2
    assert main(["import", "qa", str(path), "--name", "h2", "--format", "kilt", "--db", db]) == 2
    assert "expected a JSON object" in capsys.readouterr().err
    con = store.connect(db)
    assert con.execute("SELECT dataset, count(*) FROM questions GROUP BY ALL").fetchall() == [("hotpotqa", 2)]
