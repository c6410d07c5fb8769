"""QA dataset importers: every format written here in its real layout, malformed records, the CLI."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from workbench import store
from workbench.cli import main
from workbench.qa_import import FORMATS, detect_format, import_qa


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
    with pytest.raises(SystemExit):
        main(["import", "qa", "--help"])
    shown = capsys.readouterr().out
    assert all(f in shown for f in FORMATS)  # the CLI lists every format the module reads


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


# ------------------------------------------------------------------ issue 16: the originals of Table 1's benchmarks

def triviaqa_entry(qid, question, value, aliases):
    """One entry of TriviaQA's ``Data``, keys as published (rc and unfiltered files)."""
    return {"Answer": {"Aliases": aliases, "MatchedWikiEntityName": value,
                       "NormalizedAliases": [a.lower() for a in aliases],
                       "NormalizedMatchedWikiEntityName": value.lower(), "NormalizedValue": value.lower(),
                       "Type": "WikipediaEntity", "Value": value},
            "EntityPages": [{"DocSource": "TagMe", "Filename": f"{value}.txt", "Title": value}],
            "Question": question, "QuestionId": qid, "QuestionSource": "http://www.quiz.example/q",
            "SearchResults": [{"Description": "...", "DisplayUrl": "x.example", "Filename": "1/1.txt", "Rank": 0,
                               "Title": value, "Url": "http://x.example/"}]}


def triviaqa_file(data, split="dev"):
    return {"Data": data, "Domain": "Web", "Split": split, "Version": 1.0, "VerifiedEval": False}


TRIVIAQA = [triviaqa_entry("tc_33", "Which city on the Wear has a football club called the Black Cats?", "Sunderland",
                           ["Sunderland", "Sunderland, England", "SUNDERLAND"]),
            triviaqa_entry("sfq_7", "Who wrote the novel Alba?", "Cara Lind", ["C. Lind"])]


@pytest.mark.parametrize("indent", [None, 2])  # the published files are one line; a re-dumped one may not be
def test_triviaqa_json(con, tmp_path, indent):
    path = tmp_path / "unfiltered-web-dev.json"
    path.write_text(json.dumps(triviaqa_file(TRIVIAQA), indent=indent))
    assert detect_format(path) == "triviaqa"
    result = import_qa(con, path, "triviaqa")
    assert result["format"] == "triviaqa" and result["splits"] == {"dev": 2}  # the file's own Split
    assert [(r[2], r[3]) for r in rows(con, "triviaqa")] == [
        ("Which city on the Wear has a football club called the Black Cats?",
         ["Sunderland", "Sunderland, England", "SUNDERLAND"]),  # Value first, then the Aliases not already there
        ("Who wrote the novel Alba?", ["Cara Lind", "C. Lind"])]


def test_triviaqa_bad_entries_are_named_and_skippable(con, tmp_path):
    no_answer = {k: v for k, v in TRIVIAQA[1].items() if k != "Answer"}  # as in the test files without answers
    path = tmp_path / "t.json"
    path.write_text(json.dumps(triviaqa_file([TRIVIAQA[0], no_answer])))
    with pytest.raises(ValueError, match=r"t\.json index 1 \(id 'sfq_7'\): expected field 'Answer'"):
        import_qa(con, path, "t")
    assert con.execute("SELECT count(*) FROM questions").fetchone() == (0,)
    result = import_qa(con, path, "t", skip_bad=True)
    assert (result["questions"], result["skipped"]) == (1, 1)
    assert con.execute("SELECT line, error FROM skipped_lines").fetchall() == [
        (1, "index 1: expected field 'Answer' (an object with 'Value' and 'Aliases'; TriviaQA's test files have none)")]
    path.write_text(json.dumps(triviaqa_file([TRIVIAQA[0], TRIVIAQA[0]])))
    with pytest.raises(ValueError, match=r"t\.json index 1 \(id 'tc_33'\): duplicate id \(first at index 0\)"):
        import_qa(con, path, "t2")
    path.write_text(json.dumps({"Data": {"not": "a list"}}))
    with pytest.raises(ValueError, match=r"t\.json: expected a TriviaQA JSON object with 'Data'"):
        import_qa(con, path, "t3")


POPQA_HEADER = ("id\tsubj\tprop\tobj\tsubj_id\tprop_id\tobj_id\ts_aliases\to_aliases\ts_uri\to_uri\ts_wiki_title\t"
                "o_wiki_title\ts_pop\to_pop\tquestion\tpossible_answers")
POPQA_ROWS = [  # popQA.tsv's layout: JSON lists in quoted cells, their quotes doubled
    '4222362\tGeorge Rankin\toccupation\tpolitician\t1850297\t22\t2834605\t"[""George James Rankin""]"\t'
    '"[""political leader"",""political figure"",""polit."",""pol""]"\thttp://www.wikidata.org/entity/Q5543720\t'
    'http://www.wikidata.org/entity/Q82955\tGeorge Rankin\tPolitician\t142\t25692\t'
    'What is George Rankin\'s occupation?\t"[""politician"", ""political leader"", ""political figure"", '
    '""polit."", ""pol""]"',
    '1303463\tAlba Lind\tplace of birth\tLima\t1101\t218\t2202\t"[]"\t"[""Lima, Peru""]"\t'
    'http://www.wikidata.org/entity/Q1\thttp://www.wikidata.org/entity/Q2\tAlba Lind\tLima\t57\t90211\t'
    'In what city was Alba Lind born?\t"[""Lima"", ""Lima, Peru""]"']


def popqa_tsv(path, rows_):
    path.write_text("\n".join([POPQA_HEADER, *rows_]) + "\n")
    return path


def test_popqa_tsv_and_csv(con, tmp_path):
    import csv

    tsv = popqa_tsv(tmp_path / "popQA.tsv", POPQA_ROWS)
    assert detect_format(tsv) == "popqa"
    assert import_qa(con, tsv, "popqa")["format"] == "popqa"
    expected = [("test", "occupation", "What is George Rankin's occupation?",
                 ["politician", "political leader", "political figure", "polit.", "pol"]),
                ("test", "place of birth", "In what city was Alba Lind born?", ["Lima", "Lima, Peru"])]
    assert [r[:4] for r in rows(con, "popqa")] == expected
    with open(tsv, newline="") as f, open(tmp_path / "popqa.csv", "w", newline="") as out:
        csv.writer(out, lineterminator="\n").writerows(csv.reader(f, delimiter="\t"))
    assert detect_format(tmp_path / "popqa.csv") == "popqa"
    import_qa(con, tmp_path / "popqa.csv", "popqa-csv")
    assert [r[:4] for r in rows(con, "popqa-csv")] == expected


@pytest.mark.parametrize("bad_row, expected", [
    (POPQA_ROWS[1].replace('"[""Lima"", ""Lima, Peru""]"', '"[]"'),
     r"expected column 'possible_answers' \(a non-empty"),
    (POPQA_ROWS[1].replace('"[""Lima"", ""Lima, Peru""]"', "Lima"),
     r"expected column 'possible_answers' \(a JSON list of answer strings\): not valid JSON"),
    ("1303463\tAlba Lind\tplace of birth", r"expected 17 tab-separated columns \(the header's\), got 3"),
    (POPQA_ROWS[0], r"duplicate id \(first at line 2\)"),
])
def test_popqa_bad_rows_are_named_and_skippable(con, tmp_path, bad_row, expected):
    path = popqa_tsv(tmp_path / "p.tsv", [POPQA_ROWS[0], "", bad_row])  # a blank line is no row
    with pytest.raises(ValueError, match=r"p\.tsv line 4( \(id '\d+'\))?: " + expected):
        import_qa(con, path, "p")
    assert con.execute("SELECT count(*) FROM questions").fetchone() == (0,)
    result = import_qa(con, path, "p", skip_bad=True)
    assert (result["questions"], result["skipped"]) == (1, 1)
    assert con.execute("SELECT line FROM skipped_lines").fetchall() == [(4,)]


def test_popqa_bytes_not_utf8_and_a_wrong_header(con, tmp_path):
    path = tmp_path / "p.tsv"
    path.write_bytes((POPQA_HEADER + "\n" + POPQA_ROWS[0] + "\n").encode() + POPQA_ROWS[1].encode().replace(
        b"Alba", b"Alb\xe9") + b"\n")
    with pytest.raises(ValueError, match=r"p\.tsv line 3: expected UTF-8 text"):
        import_qa(con, path, "p")
    assert import_qa(con, path, "p", skip_bad=True)["skipped"] == 1
    path.write_text("id\tquestion\tanswers\n1\tq\ta\n")
    with pytest.raises(ValueError, match=r"p\.tsv line 1: expected a PopQA header with columns "
                                         r"\['question', 'possible_answers'\], got \['id', 'question', 'answers'\]"):
        import_qa(con, path, "p2", fmt="popqa")
    with pytest.raises(ValueError, match=r"p\.tsv: cannot detect the QA format"):
        import_qa(con, path, "p2")


def test_a_header_line_the_csv_reader_cannot_read_is_a_clear_error(con, tmp_path):
    """A lone carriage return in the first line (found by tests/test_importer_props.py): detection says
    it cannot tell the format, a table format names line 1, and the store is left as it was."""
    path = tmp_path / "p.csv"
    path.write_bytes(b"\x01\r\x00")
    with pytest.raises(ValueError, match=r"p\.csv: cannot detect the QA format"):
        import_qa(con, path, "p")
    with pytest.raises(ValueError, match=r"p\.csv line 1: expected a comma-separated header line \(new-line"):
        import_qa(con, path, "p", fmt="popqa")
    assert con.execute("SELECT count(*) FROM questions").fetchone() == (0,)


BAMBOOGLE = ('"Question","Answer"\n'
             '"Who was president of the United States in the year that Citibank was founded?","james madison"\n'
             '"What rocket was the first spacecraft that ever approached Uranus launched on?","Titan IIIE"\n')


def test_bamboogle_csv(con, tmp_path):
    path = tmp_path / "bamboogle.csv"
    path.write_bytes(BOM + BAMBOOGLE.encode())  # a spreadsheet's export may start with a byte order mark
    assert detect_format(path) == "bamboogle"
    result = import_qa(con, path, "bamboogle")
    assert result["format"] == "bamboogle" and result["questions"] == 2
    assert [(r[2], r[3]) for r in rows(con, "bamboogle")] == [
        ("Who was president of the United States in the year that Citibank was founded?", ["james madison"]),
        ("What rocket was the first spacecraft that ever approached Uranus launched on?", ["Titan IIIE"])]


def test_bamboogle_bad_row_is_named_and_skippable(con, tmp_path):
    path = tmp_path / "b.csv"
    path.write_text(BAMBOOGLE + '"Who founded the company that made the first Alba?",""\n')
    with pytest.raises(ValueError, match=r"b\.csv line 4: expected column 'Answer' \(a non-empty string\)"):
        import_qa(con, path, "b")
    assert con.execute("SELECT count(*) FROM questions").fetchone() == (0,)
    result = import_qa(con, path, "b", skip_bad=True)
    assert (result["questions"], result["skipped"]) == (2, 1)
    assert con.execute("SELECT line FROM skipped_lines").fetchall() == [(4,)]


TWOWIKI = [  # 2WikiMultihopQA's dev.json layout (_id, type, question, context, supporting_facts, evidences, answer)
    {"_id": "8813f87c0bdd11eba7f7acde48001122", "type": "compositional",
     "question": "Who is the mother of the director of film Alba (1990)?",
     "context": [["Alba (1990 film)", ["Alba is a 1990 film directed by Bo Lind."]],
                 ["Bo Lind", ["Bo Lind (born 1950) is a film director.", "He is the son of Cara Lind."]]],
     "supporting_facts": [["Alba (1990 film)", 0], ["Bo Lind", 1]],
     "evidences": [["Alba", "director", "Bo Lind"], ["Bo Lind", "mother", "Cara Lind"]], "answer": "Cara Lind"},
    {"_id": "a5b8d2c40bdb11eba7f7acde48001122", "type": "bridge_comparison",
     "question": "Which film has the director born first, Alba or Zed?",
     "context": [["Zed", ["Zed is a 1985 film.", "It was directed by Dan Roe."]],
                 ["Dan Roe", ["Dan Roe (born 12 May 1960) is a director."]],
                 ["Alba (1990 film)", ["Alba is a 1990 film directed by Bo Lind."]],
                 ["Bo Lind", ["Bo Lind (born 3 June 1950) is a film director."]]],
     "supporting_facts": [["Alba (1990 film)", 0], ["Zed", 1], ["Bo Lind", 0], ["Dan Roe", 0]],
     "evidences": [["Alba", "director", "Bo Lind"], ["Zed", "director", "Dan Roe"],
                   ["Bo Lind", "date of birth", "3 June 1950"], ["Dan Roe", "date of birth", "12 May 1960"]],
     "answer": "Alba"},
    {"_id": "c1f0a7e60bdc11eba7f7acde48001122", "type": "comparison",
     "question": "Who was born first, Bo Lind or Dan Roe?",
     "context": [["Bo Lind", ["Bo Lind (born 3 June 1950) is a film director."]],
                 ["Dan Roe", ["Dan Roe (born 12 May 1960) is a director."]]],
     "supporting_facts": [["Bo Lind", 0], ["Dan Roe", 0]],
     "evidences": [["Bo Lind", "date of birth", "3 June 1950"], ["Dan Roe", "date of birth", "12 May 1960"]],
     "answer": "Bo Lind"},
    {"_id": "d2e1b8f70bdc11eba7f7acde48001122", "type": "inference",
     "question": "Who is the paternal grandmother of Bo Lind?",
     "context": [["Bo Lind", ["Bo Lind is the son of Eli Lind."]], ["Eli Lind", ["Eli Lind's mother is Fay Lind."]]],
     "supporting_facts": [["Bo Lind", 0], ["Eli Lind", 0]],
     "evidences": [["Bo Lind", "father", "Eli Lind"], ["Eli Lind", "mother", "Fay Lind"]], "answer": "Fay Lind"}]


def test_2wiki_json_is_read_by_the_hotpot_reader(con, tmp_path):
    path = tmp_path / "dev.json"
    path.write_text(json.dumps(TWOWIKI))
    assert detect_format(path) == "hotpot"
    assert import_qa(con, path, "2wiki")["format"] == "hotpot"
    # hops: the record's evidence triples; bridge_comparison needs two bridge facts and the two compared
    assert [(r[1], r[2], r[3], r[5]) for r in rows(con, "2wiki")] == [
        ("compositional", "Who is the mother of the director of film Alba (1990)?", ["Cara Lind"], 2),
        ("bridge_comparison", "Which film has the director born first, Alba or Zed?", ["Alba"], 4),
        ("comparison", "Who was born first, Bo Lind or Dan Roe?", ["Bo Lind"], 2),
        ("inference", "Who is the paternal grandmother of Bo Lind?", ["Fay Lind"], 2)]
    path.write_text(json.dumps([TWOWIKI[0], {k: v for k, v in TWOWIKI[1].items() if k != "context"},
                                {**TWOWIKI[2], "evidences": [["Bo Lind", "date of birth"]]}]))
    with pytest.raises(ValueError, match=r"dev\.json index 1 \(id 'a5b8d2c40bdb11eba7f7acde48001122'\): expected "
                                         r"field 'context' \(a list\)"):
        import_qa(con, path, "2wiki-bad")
    result = import_qa(con, path, "2wiki-bad", skip_bad=True)
    assert (result["questions"], result["skipped"]) == (1, 2)
    errors = [e for (e,) in con.execute("SELECT error FROM skipped_lines ORDER BY line").fetchall()]
    assert len(errors) == 2 and "expected field 'evidences' (a list of [subject, relation, object] triples)" in errors[1]


def test_cli_imports_the_new_formats_by_name(tmp_path, capsys):
    db = str(tmp_path / "cli.duckdb")
    trivia = tmp_path / "wikipedia-dev.json"
    trivia.write_text(json.dumps(triviaqa_file(TRIVIAQA)))
    popqa = popqa_tsv(tmp_path / "popQA.tsv", POPQA_ROWS)
    bamboogle = tmp_path / "bamboogle.csv"
    bamboogle.write_text(BAMBOOGLE)
    for path, fmt in ((trivia, "triviaqa"), (popqa, "popqa"), (bamboogle, "bamboogle")):
        assert main(["import", "qa", str(path), "--name", fmt, "--split", "test", "--format", fmt, "--db", db]) == 0
        assert json.loads(capsys.readouterr().out)["format"] == fmt
    con = store.connect(db)
    assert con.execute("SELECT dataset, split, count(*) FROM questions GROUP BY ALL ORDER BY 1").fetchall() == [
        ("bamboogle", "test", 2), ("popqa", "test", 2), ("triviaqa", "test", 2)]


def test_a_blank_id_cell_is_no_id_and_data_need_not_be_the_first_key(con, tmp_path):
    """Found by review: rows with an empty ``id`` cell are not each other's duplicates; a re-dumped
    TriviaQA file with ``Data`` after other keys is still detected."""
    blank = [row.split("\t", 1)[1] for row in POPQA_ROWS]  # the id cell emptied
    path = popqa_tsv(tmp_path / "p.tsv", ["\t" + rest for rest in blank])
    assert import_qa(con, path, "popqa")["questions"] == 2
    t = tmp_path / "t.json"
    t.write_text(json.dumps({"Version": 1.0, "Split": "dev", "Data": TRIVIAQA}, indent=2))
    assert detect_format(t) == "triviaqa"


# ------------------------------------------------------------------ issue 39: compressed, re-encoded, oversized

def test_qa_files_compressed_or_in_utf16_import_and_limits_are_flags(tmp_path, capsys):
    import gzip

    db = tmp_path / "cli.duckdb"
    records = [{"id": i, "question": f"q{i}?", "answers": [f"a{i}"]} for i in range(3)]
    packed = tmp_path / "nq.jsonl.gz"
    packed.write_bytes(gzip.compress(jsonl(tmp_path / "nq.jsonl", records).read_bytes()))
    hotpot = tmp_path / "hotpot.json"
    hotpot.write_bytes(json.dumps(HOTPOT).encode("utf-16"))
    assert main(["import", "qa", str(packed), "--name", "nq", "--db", str(db)]) == 0
    assert json.loads(capsys.readouterr().out)["questions"] == 3
    assert main(["import", "qa", str(hotpot), "--name", "hotpot", "--db", str(db)]) == 0
    assert json.loads(capsys.readouterr().out)["format"] == "hotpot"
    for flag in ("--max-line-bytes", "--max-json-bytes"):
        fresh = tmp_path / "fresh.duckdb"
        assert main(["import", "qa", str(packed), "--name", "x", "--db", str(fresh), flag, "0"]) == 2
        assert f"{flag} 0: expected a positive number of bytes" in capsys.readouterr().err
        assert not fresh.exists()
    assert main(["import", "qa", str(packed), "--name", "x", "--db", str(db), "--max-line-bytes", "20"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "nq.jsonl.gz line 1: a line of 47 bytes, longer than the limit of 20" in err
    assert main(["import", "qa", str(hotpot), "--name", "h2", "--db", str(db), "--max-json-bytes", "100"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "hotpot.json: longer than 100 bytes" in err and "--max-json-bytes" in err
