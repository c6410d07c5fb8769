"""scripts/paper_tier_smoke.py at its CPU shape: the paper tier's whole path (model, world, G_0, E5-shaped
index, training with the LLM verifier and extractor, resume, evaluation, figures), each GPU-holding
stage in its own process (slow: ~1 minute)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


DATA_STAGES = {"tinyworld": ["world", "pool G_0", "encoder", "dense index"],
               "kilt": ["kilt inputs", "encoder", "data paper"],
               "wiki": ["wiki inputs", "encoder", "data paper"]}
WORDS = ("Amber Ash Birch Cedar Dune Elm Fern Glen Heath Iris Juniper Kestrel Larch Moss Oak Pine Quarry Reed "
         "Sorrel Thistle").split()


def wiki_sample(folder: Path) -> tuple[Path, Path]:
    """A converted real-text-style sample of 60 made-up pages (``workbench data wiki-sample``'s
    converter on a summaries file written here) and three test questions about them."""
    import json

    from workbench.kg.wiki_sample import convert

    titles = [f"{a} {b}" for a in WORDS[:6] for b in WORDS[6:16]]
    pages = {t: {"title": t, "extract": f"{t} is a town near {titles[(i + 1) % 60]}. It was founded by "
                                          f"{titles[(i + 7) % 60]} and trades with {titles[(i + 13) % 60]}."}
             for i, t in enumerate(titles)}
    folder.mkdir(parents=True)
    (folder / "summaries_en-us.json").write_text(json.dumps(pages, indent=2))
    convert(folder / "summaries_en-us.json", folder / "sample")
    questions = folder / "questions.jsonl"
    questions.write_text("".join(json.dumps({"question": f"Who founded {t}?", "golden_answers": [titles[(i + 7) % 60]],
                                             "titles": [t]}) + "\n" for i, t in enumerate(titles[:3])))
    return folder / "sample", questions


@pytest.mark.slow
@pytest.mark.parametrize("source", sorted(DATA_STAGES))
def test_paper_tier_smoke_runs_every_stage_at_the_tiny_shape(tmp_path, source):
    extra = []
    if source == "wiki":
        sample, questions = wiki_sample(tmp_path / "wiki")
        extra = ["--wiki", str(sample), "--questions", str(questions), "--set", "search.index=bm25"]
    proc = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "paper_tier_smoke.py"), "--out", str(tmp_path), "--shape", "tiny",
         "--source", source, "--entities", "2000" if source == "tinyworld" else "300", "--rounds", "1", "--slots", "2",
         "--set", "rollout.max_new_tokens=32",
         "--set", "rollout.max_total_tokens=512", "--set", "method.group_size=2", "--set", "method.val_questions=1",
         *extra],
        capture_output=True, text=True, timeout=900, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr[-4000:]
    rows = [json.loads(line) for line in proc.stdout.strip().splitlines()]  # stdout is JSON lines only
    summary = rows[-1]
    assert summary["summary"] == rows[:-1]
    assert [row["stage"] for row in summary["summary"]] == [
        "model", *DATA_STAGES[source], "train 1 rounds", "resume +1 round", "evaluate best", "figures"]
    assert (tmp_path / "runs" / "paper-smoke" / "checkpoints" / "round-000002" / "state.json").exists()
    assert (tmp_path / "figures" / "table1_main_results_paper.md").exists()
    if source == "kilt":  # the loop read the imported files: seed pool from the QA training sets, G_0 from KILT's links
        import duckdb

        con = duckdb.connect(str(tmp_path / "data" / "paper.duckdb"), read_only=True)
        try:
            splits = dict(((d, s), n) for d, s, n in con.execute(
                "SELECT dataset, split, count(*) FROM questions GROUP BY ALL").fetchall())
            steps = [s for (s,) in con.execute("SELECT step FROM pipeline_steps").fetchall()]
            evaluated = con.execute("SELECT DISTINCT dataset FROM eval_outcomes").fetchall()
        finally:
            con.close()
        assert splits[("nq_hotpotqa", "seed")] > 0 and splits[("nq", "test")] > 0 and evaluated == [("nq",)]
        assert {"kilt", "wiki18", "e5-index", "seed-pool", "pool"} <= set(steps)
    if source == "wiki":  # the real-text path: its pages, the link questions as seed, the hand-written test set
        import duckdb

        con = duckdb.connect(str(tmp_path / "data" / "paper.duckdb"), read_only=True)
        try:
            splits = dict(((d, s), n) for d, s, n in con.execute(
                "SELECT dataset, split, count(*) FROM questions GROUP BY ALL").fetchall())
            evaluated = con.execute("SELECT DISTINCT dataset FROM eval_outcomes").fetchall()
            chain_titles = {t for (t,) in con.execute(
                "SELECT e.title FROM chain_nodes n JOIN entities e USING (entity_id)").fetchall()}
            rounds = con.execute("SELECT count(DISTINCT round) FROM run_metrics").fetchone()[0]
        finally:
            con.close()
        assert splits[("wiki_hand", "test")] == 3 and splits[("nq_hotpotqa", "seed")] > 0
        assert evaluated == [("wiki_hand",)] and rounds >= 2
        assert chain_titles and all(t.split()[0] in WORDS for t in chain_titles)
