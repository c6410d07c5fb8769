"""EoG's topology warm start (issue 19): demonstrations of the query prompt that EoG's own gate
admits, their own cache key and label, the default key unchanged, the EoG rows starting from it."""

import doctest
import json
from collections import Counter

import pytest

from workbench import store
from workbench.config import preset
from workbench.kg import topology, topology_qa
from workbench.kg.tinyworld import build_world
from workbench.method import eog, eog_warmstart, methods
from workbench.method.gate import check_candidate
from workbench.policy import protocol

EOS = "<|im_end|>"


def test_doctests():
    assert doctest.testmod(eog_warmstart).failed == 0


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """A real throwaway-sized TinyWorld (the warm start's DEMO_ENTITIES), as the warm start builds."""
    path = tmp_path_factory.mktemp("eogws") / "w.duckdb"
    build_world(str(path), preset="smoke", seed=11, n_entities=150)
    con = store.connect(path, read_only=True)
    yield con
    con.close()


def _target(demo) -> tuple[str, str]:
    (text, trained), = demo.segments
    assert trained and text.endswith(EOS)
    return protocol.parse_candidate(text[:-len(EOS)])


@pytest.mark.parametrize("seed", [0, 1])
def test_every_demonstration_and_template_is_admitted_by_eogs_gate(world, seed):
    demos_of = eog_warmstart.TopologyDemos(per_pattern=12)
    views, demos = demos_of.views(world, seed), demos_of(world, seed, EOS)
    assert len(views) == len(demos)
    counts = Counter(v.pattern for v in views)
    assert set(counts) == set(topology.PATTERNS) and min(counts.values()) >= 8, counts
    threshold = preset("tiny").method.gate_threshold
    for view, demo in zip(views, demos):
        question, answer = _target(demo)
        assert demo.family == f"topology:{view.pattern}" and answer == view.answer_titles[0]
        assert question in [eog_warmstart.demo_question(view, k)
                            for k in range(len(eog_warmstart.DEMO_TEMPLATES[view.pattern]))]
        for k in range(len(eog_warmstart.DEMO_TEMPLATES[view.pattern])):  # every template, not only the drawn one
            cand = (eog_warmstart.demo_question(view, k), answer)
            assert eog.filter_topology_candidate(view, cand) is None, (view.pattern, k, cand)
            assert check_candidate(cand, lambda q, a: None) is None
            verdict, = eog.topology_gate(view, [cand], eog.TopologyVerifier(), threshold, 1, "mean")
            assert verdict.admitted and verdict.reason == "ok", (view.pattern, k, cand, verdict.reason)
            if view.n_anchors == 2:  # the intersections name both anchors (the gate's 'misses anchor')
                assert all(t in cand[0] for t in view.anchor_titles)


def test_demonstrations_prompt_as_the_round_does_and_are_deterministic(world):
    demos_of = eog_warmstart.TopologyDemos(per_pattern=3)  # the default prompt: the query's skeleton
    views, demos = demos_of.views(world, 5), demos_of(world, 5, EOS)
    assert [d.user for d in demos] == eog.topology_prompts(lambda u: u, views, 1, "query")
    assert [(d.user, d.segments) for d in demos] == [(d.user, d.segments) for d in demos_of(world, 5, EOS)]
    assert [d.segments for d in demos] != [d.segments for d in demos_of(world, 6, EOS)]
    witness = eog_warmstart.TopologyDemos(prompt="witness", per_pattern=3)(world, 5, EOS)
    assert [d.user for d in witness] == eog.topology_prompts(lambda u: u, views, 1, "witness")


def test_templates_are_not_the_held_out_sets_wording():
    for p in topology.PATTERNS:
        assert topology_qa.TEMPLATES[p] not in eog_warmstart.DEMO_TEMPLATES[p]


def test_a_query_whose_anchor_names_an_answer_is_not_askable():
    v = eog.TopologyView(-1, "", [1, 2, 3], ["Dasu Motors", "Bo", "Dasu"], ["founded by", "lives in"],
                         ["", "", ""], pattern="2i", n_anchors=2)
    assert not eog_warmstart.askable(v)
    assert eog.filter_topology_candidate(v, (eog_warmstart.demo_question(v), "Dasu")).leak


def test_settings_are_checked():
    for kwargs, name in (({"prompt": "chain"}, "topology_prompt"), ({"share": 1.0}, "share"),
                         ({"per_pattern": 0}, "per_pattern")):
        with pytest.raises(ValueError, match=name):
            eog_warmstart.TopologyDemos(**kwargs)


def test_the_eog_rows_and_only_they_start_from_the_topology_warm_start():
    cfg = preset("tiny", **{"method.topology_prompt": "query", "method.topology_max_answers": 7})
    for name, spec in methods.METHODS.items():
        demos = eog_warmstart.topology_demos(spec, cfg)
        assert (demos is not None) == name.startswith("eog"), name
        if demos is not None:
            assert (demos.prompt, demos.max_answers) == ("query", 7)


def test_demo_set_keeps_the_solver_demonstrations_and_the_mix_size():
    from workbench.policy.warmstart import demo_set

    plain, _ = demo_set(40, seed=0, eos=EOS)
    extra = eog_warmstart.TopologyDemos(per_pattern=2)
    mixed, _ = demo_set(40, seed=0, eos=EOS, extra=extra)
    assert len(mixed) == len(plain)
    solver = lambda demos: sorted((d.user, d.segments) for d in demos if d.role == "solver")  # noqa: E731
    assert solver(mixed) == solver(plain)
    n_topology = sum(d.family.startswith("topology:") for d in mixed)
    n_proposer = sum(d.role == "proposer" for d in plain)
    assert n_topology == round(n_proposer * extra.share) and n_topology > 0


def test_the_topology_warm_start_has_its_own_key_and_label_and_the_default_key_is_unchanged(tmp_path, monkeypatch):
    from workbench.cli import main
    from workbench.policy import warmstart as ws
    from workbench.search.index import load_corpus

    monkeypatch.setenv("WORKBENCH_DATA", str(tmp_path / "data"))
    db = str(tmp_path / "w.duckdb")
    build_world(db, preset="smoke", seed=0, n_entities=120)
    cfg = preset("smoke", **{"backbone.sft_steps": 8})  # 64 examples: 6 or 7 of them queries
    extra = eog_warmstart.TopologyDemos.from_config(cfg)
    path = ws.warmstart(db, cfg, val_per_family=1, log=None, extra_demos=extra)
    meta = json.loads((path / "workbench.json").read_text())
    assert meta["method"] == "base_topology" and meta["topology"] == extra.settings
    assert {f for f in meta["extra_demos"] if ":solver:" not in f} == {f"topology:{p}" for p in topology.PATTERNS}
    assert meta["graph_tools"] == extra.graph  # EoG's solver explores with the graph tools; eval offers them
    default = ws.warmstart(db, cfg, val_per_family=1, log=None)
    assert default.name != path.name and "topology" not in json.loads((default / "workbench.json").read_text())
    con = store.connect(db, read_only=True)
    params = {"families": list(ws.DEMO_FAMILIES), "n_entities": ws.DEMO_ENTITIES, "epochs": ws.DEMO_EPOCHS,
              "proposer_share": ws.PROPOSER_SHARE, "val_per_family": 1, "preset": "smoke"}
    assert default.name == ws.cache_key(load_corpus(con).content_hash(), cfg, 0, params)  # the key before
    con.close()
    assert main(["warmstart", "--db", db, "--preset", "smoke", "--steps", "8", "--val-per-family", "1",
                 "--topology"]) == 0  # the CLI finds the same one
    assert {p.name for p in path.parent.iterdir()} == {path.name, default.name}
