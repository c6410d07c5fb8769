"""DynaSearcher's KG tool settings (seed 003): one mapping from ``method.kg_*`` to the tool
(``search.kg_search.SETTINGS``) that the run, its saved best, ``workbench eval``, the KG warm start
and the server share; and ``search.url``: the KG tool goes to the same server's ``/kg_search``."""

import dataclasses
import json

import pytest

from test_rollout import passage_store
from workbench.config import PRESETS, MethodConfig, preset
from workbench.evaluate import model_kg_tool
from workbench.method.loop import Trainer
from workbench.search.retriever import make_kg_tool
from workbench.method.methods import method_spec
from workbench.policy import protocol
from workbench.policy.model import Policy, tiny_model
from workbench.policy.tokenizer import train_tokenizer
from workbench.policy.warmstart import kg_settings
from workbench.search import kg_search as K
from workbench.search.client import RemoteKGSearch
from workbench.search.server import running_server
from workbench.search.tool import SearchTool

EDGES = [(1, 2, "born in"), (1, 3, "citizen of"), (2, 3, "located in"), (4, 1, "directed by"), (1, 4, "director of")]
QUERIES = ["Kavimo Rutel", "Kavimo Rutl", "Dagiju", "Lorentia", "Zebulon"]
QUESTIONS = ["Where was Kavimo Rutel born?", None, "Which country is Dagiju in?", None, "?"]
# every setting away from its default, so a dropped or swapped one shows
OURS = MethodConfig(kg_max_triples=2, kg_min_similarity=0.6, kg_filter="none")


@pytest.fixture(scope="module")
def con():
    con = passage_store()
    con.executemany("INSERT INTO edges VALUES (?, ?, ?, 'test')", EDGES)
    con.execute("INSERT INTO aliases VALUES (3, 'Republic of Lorentia')")
    con.execute("INSERT INTO questions VALUES (1, 'tinyworld', 'seed', 'single_hop', 'Where was Kavimo Rutel born?', "
                "['Dagiju'], [1, 2], 1, 'test')")  # a trainer's seed pool
    return con


def test_every_kg_config_field_is_one_mapped_setting():
    kg_fields = {f.name for f in dataclasses.fields(MethodConfig) if f.name.startswith("kg_")} - {"kg_tool"}
    assert {field for field, _ in K.SETTINGS.values()} == kg_fields
    assert K.tool_settings(OURS) == {"max_triples": 2, "min_similarity": 0.6, "filter": "none"}
    assert K.settings_config(K.tool_settings(OURS)) == OURS
    # serve-retriever --kg reads them from one preset: they are the same in every one
    assert len({tuple(K.tool_settings(cfg.method).items()) for cfg in PRESETS.values()}) == 1
    with pytest.raises(ValueError, match="max_candidates"):
        K.settings_config({"max_candidates": 3})


def test_the_tool_a_run_saves_is_the_tool_eval_rebuilds(con, tmp_path):
    built = make_kg_tool(con, OURS)
    assert built.settings == K.tool_settings(OURS)
    (tmp_path / "workbench.json").write_text(json.dumps({"kg_tool": K.tool_settings(OURS)}))  # as train saves it
    rebuilt = model_kg_tool(tmp_path, con)
    assert rebuilt.settings == built.settings
    assert rebuilt.search(QUERIES, QUESTIONS) == built.search(QUERIES, QUESTIONS)


def test_the_kg_warm_start_takes_the_same_settings_with_the_overlap_filter():
    assert kg_settings({"max_triples": 3}) == {"max_triples": 3, "min_similarity": 0.75, "filter": "overlap"}
    with pytest.raises(ValueError, match="overlap"):
        kg_settings({"filter": "llm"})
    with pytest.raises(ValueError, match="unknown"):
        kg_settings({"max_triple": 3})


# ---------------------------------------------------------------- search.url: the server's /kg_search

def test_with_search_url_the_kg_tool_is_the_servers_and_its_hits_match(con, tmp_path):
    served = K.KGSearch(con, **{**K.tool_settings(OURS), "max_triples": 4})  # the run's k travels per request
    with running_server(SearchTool(con, topk=2), kg=served) as url:
        cfg = preset("smoke", **{"search.url": url, **{f"method.{f}": getattr(OURS, f) for f, _ in K.SETTINGS.values()}})
        remote = make_kg_tool(con, cfg.method, url=cfg.search.url)
        assert isinstance(remote, RemoteKGSearch)
        local = make_kg_tool(con, cfg.method)
        hits = remote.search(QUERIES, QUESTIONS)
        assert hits == local.search(QUERIES, QUESTIONS) and max(len(h.triples) for h in hits) == 2
        (tmp_path / "workbench.json").write_text(json.dumps({"kg_tool": K.tool_settings(cfg.method)}))
        assert model_kg_tool(tmp_path, con, None, url).search(QUERIES, QUESTIONS) == hits  # workbench eval's
        assert _trainer(con, cfg).kg.url == url.replace("/retrieve", "/kg_search")
        with pytest.raises(ValueError, match=r"min_similarity \(server 0.6, run 0.75\)"):
            make_kg_tool(con, MethodConfig(kg_filter="none"), url=url)
        with pytest.raises(ValueError, match=r"filter \(server 'none', run 'llm'\)"):
            make_kg_tool(con, dataclasses.replace(OURS, kg_filter="llm"), url=url)
    with running_server(SearchTool(con, topk=2)) as url:  # no --kg
        with pytest.raises(ValueError, match="serves no KG search"):
            make_kg_tool(con, OURS, url=url)


def _trainer(con, cfg):
    """A DynaSearcher trainer over a random two-layer model (its construction is what is checked)."""
    tok = train_tokenizer([protocol.SOLVER_INSTRUCTION_KG] * 5, vocab_size=300, extra_tokens=protocol.KG_TAGS)
    backbone = dataclasses.replace(cfg.backbone, hidden_size=32, layers=1, heads=2, kv_heads=1)
    cfg = dataclasses.replace(cfg, method=dataclasses.replace(cfg.method, lora_rank=0))
    policy, reference = (Policy(tiny_model(backbone, tok, seed=0), tok, device="cpu") for _ in range(2))
    return Trainer(con, cfg, method_spec("dynasearcher"), "t", policy, reference, SearchTool(con, topk=2))


@pytest.mark.parametrize("argv, named", [
    (["--kg", "--set", "search.topk=5"], "search.topk"),          # a setting the server does not read
    (["--set", "method.kg_min_similarity=0.6"], "method.kg_min_similarity"),  # kg settings without --kg
])
def test_serve_retriever_refuses_settings_it_would_ignore(argv, named, tmp_path, capsys):
    from workbench import cli

    assert cli.main(["serve-retriever", "--db", str(tmp_path / "none.duckdb"), "--port", "0", *argv]) == 2
    err = capsys.readouterr().err
    assert named in err and "only method.kg_* settings" in err
