"""Train and eval search a retrieval server as they search the store (issue 16, search.url)."""

from __future__ import annotations

from test_evaluate import _store_with_questions, tiny_model_dir  # noqa: F401 (fixture)
from test_rollout import EASY, HARD, _kw, con, policy, tool  # noqa: F401 (fixtures)
from workbench import store
from workbench.cli import main
from workbench.config import preset
from workbench.evaluate import outcomes
from workbench.method.loop import score_trajectory
from workbench.method.path_support import EvidenceGraph, PathSupportParams
from workbench.policy.rollout import rollout
from workbench.search.client import RemoteRetriever
from workbench.search.retriever import make_retriever
from workbench.search.server import running_server
from workbench.search.tool import SearchTool


def test_make_retriever_follows_search_url(con):  # noqa: F811 (the imported fixture)
    assert isinstance(make_retriever(con, preset("smoke").search), SearchTool)
    remote = make_retriever(con, preset("smoke", **{"search.url": "http://127.0.0.1:9"}).search)
    assert isinstance(remote, RemoteRetriever) and remote.url == "http://127.0.0.1:9/retrieve"


def test_rollouts_through_the_server_equal_local_ones_entity_ids_included(policy, tool):  # noqa: F811
    local = rollout(policy, tool, [EASY, HARD], 2, temperature=0, **_kw())
    with running_server(tool) as url:
        remote_tool = make_retriever(None, preset("smoke", **{"search.url": url.removesuffix("/retrieve"),
                                                              "search.topk": 2}).search)
        remote = rollout(policy, remote_tool, [EASY, HARD], 2, temperature=0, **_kw())
    assert [t.response_ids for t in remote] == [t.response_ids for t in local]
    assert [t.entity_ids for t in remote] == [t.entity_ids for t in local]
    assert remote[2].entity_ids[0] == 1 and remote[2].passage_ids[0] == 11
    # path support scores the remote trajectory exactly as the local one (Eqs. 8-9)
    titles = {1: "Kavimo Rutel", 2: "Dagiju", 3: "Lorentia"}
    graph = EvidenceGraph({(1, 2): 1.0, (2, 3): 1.0}, PathSupportParams())
    got = score_trajectory(remote[2], ["Lorentia"], titles, graph)
    assert got == score_trajectory(local[2], ["Lorentia"], titles, graph)
    assert got.path == [1, 2, 3] and got.passed


def test_eval_takes_set_overrides(tmp_path, tiny_model_dir, capsys):  # noqa: F811
    db = str(tmp_path / "s.duckdb")
    _store_with_questions(db).close()
    base = ["eval", "--db", db, "--model", str(tiny_model_dir), "--dataset", "tinyworld", "--preset", "smoke"]
    assert main(base + ["--set", "rollout.max_turns=1"]) == 0
    eval_id = capsys.readouterr().out.strip().splitlines()[-1]
    con = store.connect(db, read_only=True)  # noqa: F811
    assert (outcomes(con, eval_id).turns == 1).all()  # smoke allows 4: the override reached the rollouts
    con.close()
    assert main(base + ["--set", "rollout.max_turns=0"]) == 2
    assert "config field 'rollout.max_turns'" in capsys.readouterr().err
