"""Dr. Free's pool-build checks (seed 002, Fig. 5 retrieval verification, Table 7 hop ratio): off by
default with the default pool unchanged, every kept chain passing them, rejections counted by reason."""

import json

import numpy as np
import pytest

from workbench import store
from workbench.config import preset
from workbench.kg import chain_checks
from workbench.kg.pool import build_pool, load_pool
from workbench.kg.tinyworld import build_world
from workbench.search.retriever import pool_retriever
from workbench.search.tool import SearchTool


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    con = store.connect(tmp_path_factory.mktemp("cc") / "smoke.duckdb")
    build_world(con, preset="smoke", seed=0)
    yield con
    con.close()


def _g0(con):
    return sorted((tuple(c.entity_ids), c.hops) for c in load_pool(con, evidence=False))


def test_default_build_is_unchanged_by_the_new_options(world):
    a = build_pool(world, 2000, 2, 3, seed=0, force=True)
    params = json.loads(world.execute("SELECT params FROM pool_builds ORDER BY build_id DESC LIMIT 1").fetchone()[0])
    assert sorted(params) == ["functional_only", "min_relational_hops", "short_title_chars", "unique_grounding"]
    chains = _g0(world)
    b = build_pool(world, 2000, 2, 3, seed=0, retrieval_verify=False, hop_ratio="", force=True)
    assert b["build_id"] == a["build_id"] and _g0(world) == chains  # the same build: nothing rewritten


def test_every_verified_chain_passes_and_rejections_add_up(world):
    base = build_pool(world, 2000, 2, 3, seed=0, force=True)
    got = build_pool(world, 2000, 2, 3, seed=0, retrieval_verify=True, force=True, search=pool_retriever(world))
    rej = got["rejections"]
    assert rej["source_mention"] > 0 and rej["hop_retrieval"] > 0
    assert got["chains"] == base["chains"] - rej["source_mention"] - rej["hop_retrieval"]
    assert sum(rej.values()) == got["walks"] - got["chains"]
    first = dict(world.execute("SELECT entity_id, arg_min(text, paragraph) FROM passages GROUP BY 1").fetchall())
    tool = SearchTool(world, topk=3, cache=False)
    for c in load_pool(world, evidence=False):
        assert c.titles[1].lower() in first[c.entity_ids[0]].lower()  # the source passage names the bridge
        for i in range(1, len(c.entity_ids) - 1):
            hits = tool.search([f"{c.titles[i]} {c.relations[i]}"], k=3)[0]
            assert any(h.entity_id == c.entity_ids[i + 1] or c.titles[i + 1].lower() in h.text.lower() for h in hits)
    params = json.loads(world.execute("SELECT params FROM pool_builds ORDER BY build_id DESC LIMIT 1").fetchone()[0])
    assert params["retrieval_verify"] is True


def test_hop_ratio_balances_the_pool(world):
    got = build_pool(world, 2000, 2, 4, seed=0, hop_ratio="1:1:1", force=True)
    counts = np.bincount([h for _, h in _g0(world)], minlength=5)[2:]
    assert counts.min() > 0 and (counts == counts[0]).all()
    assert got["rejections"]["hop_ratio"] > 0
    skew = build_pool(world, 2000, 2, 3, seed=0, hop_ratio="2:1", force=True)
    c2, c3 = np.bincount([h for _, h in _g0(world)], minlength=4)[2:]
    assert abs(c2 - 2 * c3) <= 1 and skew["chains"] == c2 + c3


def test_hop_ratio_parsing_and_config_rule():
    assert chain_checks.parse_hop_ratio("1:0", 2, 3) == {2: 1.0, 3: 0.0}
    for bad in ("1:1", "a:b:c", "0:0:0", "-1:1:1"):
        with pytest.raises(ValueError, match="hop_ratio"):
            chain_checks.parse_hop_ratio(bad, 2, 4)
    assert preset("smoke", **{"pool.max_hops": 4, "pool.hop_ratio": "1:1:1"}).pool.hop_ratio == "1:1:1"
    with pytest.raises(ValueError, match="pool.hop_ratio"):
        preset("smoke", **{"pool.hop_ratio": "1:1:1"})  # 2-3 hops: two weights expected
    keep = chain_checks.hop_ratio_keep(np.array([2, 3, 2, 2, 3, 4]), {2: 0.5, 3: 0.5, 4: 0.0}, seed=1)
    assert sorted(np.array([2, 3, 2, 2, 3, 4])[keep].tolist()) == [2, 2, 3, 3]
