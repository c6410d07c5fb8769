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


def test_reimport_needs_replace_or_append(con, tmp_path):
    path = jsonl(tmp_path / "a.jsonl", [{"question": "q", "answers": ["a"]}])
    import_qa(con, path, "a")
    with pytest.raises(ValueError, match="dataset 'a' already has questions in {'test': 1}; pass --replace .* "
                                         "or --append"):
        import_qa(con, path, "a")
    assert import_qa(con, path, "a", replace=True)["replaced"] == 1
    assert con.execute("SELECT count(*) FROM questions").fetchone() == (1,)
    import_qa(con, path, "a", split="dev")  # another split of the same dataset is no clash
    assert con.execute("SELECT count(*) FROM questions").fetchone() == (2,)
    more = jsonl(tmp_path / "b.jsonl", [{"question": "q2", "answers": ["b"]}])
    assert import_qa(con, more, "a", append=True)["appended_to"] == 1
    assert con.execute("SELECT count(*) FROM questions WHERE split = 'test'").fetchone() == (2,)
    with pytest.raises(ValueError, match="choose one"):
        import_qa(con, more, "a", append=True, replace=True)


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


# ------------------------------------------------------------------ issue 12: encoding and degenerate inputs

BOM = b"\xef\xbb\xbf"


def test_a_byte_order_mark_is_dropped(con, tmp_path):
    """Regression: the QA importer refused a file starting with a UTF-8 BOM (the source importers kept it)."""
    plain = tmp_path / "p.jsonl"
    plain.write_bytes(BOM + json.dumps({"question": "q", "answers": ["a"]}).encode() + b"\n")
    assert import_qa(con, plain, "p")["questions"] == 1
    kilt = tmp_path / "k.jsonl"
    kilt.write_bytes(BOM + json.dumps({"id": "x", "input": "q", "output": [{"answer": "a"}]}).encode() + b"\n")
    assert import_qa(con, kilt, "k")["format"] == "kilt"
    hotpot = tmp_path / "h.json"
    hotpot.write_bytes(BOM + json.dumps(HOTPOT).encode())
    assert import_qa(con, hotpot, "h")["format"] == "hotpot"


@pytest.mark.parametrize("name, content, expected", [
    ("u.jsonl", b'{"question": "q", "answers": ["a"]}\n{"question": "caf\xe9", "answers": ["a"]}\n',
     r"u\.jsonl line 2: expected UTF-8 text \(invalid continuation byte at byte 17 of the line\)"),
    ("h.json", b'[\n{"question": "caf\xe9"}]', r"h\.json line 2: expected UTF-8 text"),
    ("s.jsonl", b'{"question": "q", "answers": ["a"]}\n{"question": "\\ud800?", "answers": ["a"]}\n',
     r"s\.jsonl line 2: expected a JSON object: text that cannot be stored: a lone UTF-16 surrogate '\\ud800'"),
    ("d.jsonl", b'{"question": "q", "answers": ["a"]}\n' + b"[" * 50_000 + b"]" * 50_000 + b"\n",
     r"d\.jsonl line 2: expected a JSON object: JSON nested deeper than Python's recursion limit"),
    ("i.jsonl", b'{"id": 1, "question": "q", "answers": ["a"]}\n{"id": 1, "question": "r", "answers": ["b"]}\n',
     r"i\.jsonl line 2 \(id 1\): duplicate id \(first at line 1\)"),
    ("t.jsonl", b'{"question": "q", "answers": ["a"]}\n{"question": "r", "answers": ["b"], "split": 5}\n',
     r"t\.jsonl line 2: expected field 'split' to be a string, got 5"),
    ("f.jsonl", b'{"question": "q", "answers": ["a"]}\n{"question": "r", "answers": ["b"], "family": {"a": 1}}\n',
     r"f\.jsonl line 2: expected field 'family' to be a string"),
])
def test_bad_records_name_file_and_line_and_are_skippable(con, tmp_path, name, content, expected):
    path = tmp_path / name
    path.write_bytes(content)
    fmt = "hotpot" if name.endswith(".json") else "auto"
    with pytest.raises(ValueError, match=expected):
        import_qa(con, path, "x", fmt=fmt)
    assert con.execute("SELECT count(*) FROM questions").fetchone() == (0,)
    if fmt == "hotpot":  # a whole-file error: nothing to skip
        return
    result = import_qa(con, path, "x", skip_bad=True)
    assert (result["questions"], result["skipped"]) == (1, 1)
    assert con.execute("SELECT line FROM skipped_lines").fetchall() == [(2,)]


def test_duplicate_hotpot_ids_are_told(con, tmp_path):
    path = tmp_path / "h.json"
    path.write_text(json.dumps([HOTPOT[0], HOTPOT[1], HOTPOT[0]]))
    with pytest.raises(ValueError, match=r"h\.json index 2 \(id 'a1'\): duplicate id \(first at index 0\)"):
        import_qa(con, path, "h")


def test_qa_cli_names_a_directory_and_skips_bad(tmp_path, capsys):
    db = str(tmp_path / "cli.duckdb")
    assert main(["import", "qa", str(tmp_path), "--name", "x", "--db", db]) == 2
    assert "is a directory; expected a QA file" in capsys.readouterr().err
    path = tmp_path / "b.jsonl"
    path.write_bytes(b'{"question": "q", "answers": ["a"]}\n\xff\n')
    assert main(["import", "qa", str(path), "--name", "x", "--db", db]) == 2
    assert "b.jsonl line 2: expected UTF-8 text" in capsys.readouterr().err
    assert main(["import", "qa", str(path), "--name", "x", "--db", db, "--skip-bad"]) == 0
    assert json.loads(capsys.readouterr().out)["skipped"] == 1
