"""The methods of Tables 1-2 as configurations of one loop (seed 000, sections 4.1 and 4.5).

Under a matched budget every method gets the same question slots per round, G rollouts per slot,
and one optimiser step per round; they differ only in the fields below.

Example:
    >>> sorted(m for m in METHODS if not m.startswith(("eog", "drfree", "dynasearcher")))
    ['c1', 'c2', 'coevokg', 'search_r1', 'ssp', 'ssp_no_search']
    >>> [m for m in METHODS if m.startswith("eog")]  # seed 004 and its Table 3 rows
    ['eog', 'eog_wo_solver_update', 'eog_wo_proposer_update', 'eog_random_walk', 'eog_adversarial']
    >>> method_spec("Dr. Free").proposer_reward, method_spec("drfree").solver_reward
    ('dr_free', 'exact_match')
    >>> [m for m in METHODS if m.startswith("dynasearcher")]  # seed 003 and its two ablations
    ['dynasearcher', 'dynasearcher_wo_kg', 'dynasearcher_wo_mr']
    >>> method_spec("coevokg").write_back
    True
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class MethodSpec:
    """One row of Tables 1-2 as a configuration of the loop.

    task_source: 'kg_chains' (C1: questions from KG chains through the quality gate),
    'answer_entity' (SSP: one answer entity, no KG structure; with ``proposer_search`` SSP as published,
    the proposer searching while it writes its question, kept by SSP's checks and RAG verification,
    ``method/ssp.py``; without it the proposer reads the entity's passage and writes one candidate,
    the open gate admitting what passes the deterministic filter), 'seed_pool'
    (Search-R1: the fixed human-written pool, no proposer), 'kg_topology' (EoG, seed 004: queries of
    its Table 6 executed on the KG, each with its complete answer set; ``method/eog.py``) or
    'seed_document' (Dr. Free's "w/o KG" row, seed 002 Table 2: Dr. Zero-style, the proposer reads one
    entity's passage and searches before it writes; ``method/drfree_loop.py``). solver_reward / proposer_reward name
    entries of ``rewards.SOLVER_REWARDS`` / ``rewards.PROPOSER_REWARDS``. write_back: C3.
    leak_filter: the gate's deterministic no-leakage check (Eq. 6's 1[no leak]); section 4.5 adds
    "the no leakage quality gate" with C1, so the SSP row has none (it passes no Eq. 6 gate: only
    SSP's own checks, its answer-in-question substring test among them, and its RAG check).
    kg_tool: the solver is offered DynaSearcher's ``<kg_search>`` tool (seed 003) beside document
    search; ``method.kg_tool`` overrides it.
    graph_tools: the solver explores the KG with EoG's graph tools (seed 004; ``<relations>``,
    ``<neighbors>``, ``search/graph_tools.py``) instead of document search, and answers a set;
    ``method.graph_tools`` overrides it.
    """

    name: str
    task_source: str
    solver_reward: str
    proposer_reward: str | None
    write_back: bool
    label: str = ""
    leak_filter: bool = True
    update_solver: bool = True  # EoG's role ablations (seed 004, Table 3): False = "w/o Solver update"
    update_proposer: bool = True  # ... False = "w/o Proposer update"
    kg_tool: bool = False
    topology_warmstart: bool = False  # EoG's rows start from the topology warm start (``method.eog_warmstart``)
    # Dr. Free (seed 002; ``method/drfree_loop.py``): which G_0 chains are drawn ('all' | 'drfree': its
    # chain construction), the proposer's advantage ('reinforce_pp', Eq. 12 | 'hrpo', hop-grouped) and
    # the self-evolution iterations the rounds are split into; ``method.chain_selection``,
    # ``method.proposer_algorithm`` and ``method.iterations`` override them
    chain_selection: str = "all"
    proposer_algorithm: str = "reinforce_pp"
    iterations: int = 1
    graph_tools: bool = False
    proposer_search: bool = False  # SSP as published: the proposer searches, its question RAG-checked (method/ssp.py)


METHODS: dict[str, MethodSpec] = {m.name: m for m in (
    MethodSpec("search_r1", "seed_pool", "exact_match", None, False, "Search-R1"),
    MethodSpec("ssp", "answer_entity", "exact_match", "ssp_adversarial", False, "SSP", leak_filter=False,
               proposer_search=True),
    # ours, not a paper's row: SSP's answer entity and reward without its proposer's search and RAG
    # check (the proposer reads the entity's passage): the "SSP" row of the reference runs made
    # before issue 40, kept because the tiny backbone cannot play SSP's searching proposer (README)
    MethodSpec("ssp_no_search", "answer_entity", "exact_match", "ssp_adversarial", False,
               "SSP w/o proposer search or RAG check (ours)", leak_filter=False),
    MethodSpec("c1", "kg_chains", "exact_match", "ssp_adversarial", False, "+ KG task generation"),
    MethodSpec("c2", "kg_chains", "coevokg", "coevokg_difficulty", False, "+ path/difficulty rewards"),
    MethodSpec("coevokg", "kg_chains", "coevokg", "coevokg_difficulty", True, "CoEvoKG"),
    # EoG (seed 004) and its Table 3 ablations: executed queries, a solver exploring the KG with graph
    # tools and answering sets (set-F1 reward), variance proposer (every EoG row from the topology warm
    # start, with the graph tools, so an ablation differs from EoG only in what it ablates)
    MethodSpec("eog", "kg_topology", "eog_f1", "eog_variance", False, "EoG", topology_warmstart=True,
               graph_tools=True),
    MethodSpec("eog_wo_solver_update", "kg_topology", "eog_f1", "eog_variance", False, "EoG w/o Solver update",
               update_solver=False, topology_warmstart=True, graph_tools=True),
    MethodSpec("eog_wo_proposer_update", "kg_topology", "eog_f1", "eog_variance", False,
               "EoG w/o Proposer update", update_proposer=False, topology_warmstart=True, graph_tools=True),
    MethodSpec("eog_random_walk", "kg_chains", "eog_f1", "eog_variance", False, "EoG w/o query exec. (Random Walk)",
               topology_warmstart=True, graph_tools=True),
    MethodSpec("eog_adversarial", "kg_topology", "eog_f1", "ssp_adversarial", False, "EoG adversarial reward",
               topology_warmstart=True, graph_tools=True),
    # Dr. Free (seed 002) and its Table 2 rows: questions from the chains of its own construction
    # (whitelist, unique grounding, retrieval check, hop ratio) through the same gate, the solver on the
    # outcome reward (answer EM), the proposer by HRPO, three self-evolution iterations, no write-back.
    # Table 3's leave-one-shortcut-out rows are `--set method.proposer_reward=dr_free_wo_<type>` on
    # `drfree`. "w/o KG" restores Dr. Zero-style proposer search: a seed document, the proposer
    # searching before it writes (task source 'seed_document'), the same information-gain reward over
    # the passages it found.
    *(MethodSpec(name, "kg_chains", "exact_match", reward, False, label, chain_selection="drfree",
                 proposer_algorithm="hrpo", iterations=3)
      for name, reward, label in (("drfree", "dr_free", "Dr. Free"),
                                  ("drfree_difficulty", "dr_zero", "Dr. Free: difficulty only"),
                                  ("drfree_ig_difficulty", "dr_free_plus_dr_zero", "Dr. Free: IG + difficulty"),
                                  ("drfree_no_proposer_training", None, "Dr. Free: w/o proposer training"))),
    MethodSpec("drfree_wo_kg", "seed_document", "exact_match", "dr_free", False, "Dr. Free: w/o KG",
               proposer_algorithm="hrpo", iterations=3),
    # DynaSearcher (seed 003) trains on a fixed QA set, as Search-R1: the seed pool here. Its two
    # ablations (the paper's "w/o KG" and "w/o MR" rows): no KG tool; r_acc alone as the reward.
    MethodSpec("dynasearcher", "seed_pool", "dynasearcher", None, False, "DynaSearcher", kg_tool=True),
    MethodSpec("dynasearcher_wo_kg", "seed_pool", "dynasearcher", None, False, "DynaSearcher w/o KG"),
    MethodSpec("dynasearcher_wo_mr", "seed_pool", "dynasearcher_acc", None, False, "DynaSearcher w/o MR",
               kg_tool=True),
)}


def uses_kg_tool(spec: MethodSpec, kg_tool: str = "") -> bool:
    """Whether the solver is offered the KG tool: ``method.kg_tool`` ("on" | "off") when set, else the method's.

    Example:
        >>> uses_kg_tool(METHODS["dynasearcher"]), uses_kg_tool(METHODS["coevokg"]), uses_kg_tool(METHODS["coevokg"], "on")
        (True, False, True)
    """
    if kg_tool not in ("", "on", "off"):
        raise ValueError(f"method.kg_tool: expected '', 'on' or 'off', got {kg_tool!r}")
    return spec.kg_tool if not kg_tool else kg_tool == "on"


def uses_graph_tools(spec: MethodSpec, graph_tools: str = "") -> bool:
    """Whether the solver explores with EoG's graph tools: ``method.graph_tools`` ("on" | "off") when
    set, else the method's.

    Example:
        >>> uses_graph_tools(METHODS["eog"]), uses_graph_tools(METHODS["eog"], "off"), uses_graph_tools(METHODS["coevokg"])
        (True, False, False)
    """
    if graph_tools not in ("", "on", "off"):
        raise ValueError(f"method.graph_tools: expected '', 'on' or 'off', got {graph_tools!r}")
    return spec.graph_tools if not graph_tools else graph_tools == "on"


def method_name(name: str) -> str:
    """A method's key from any of its spellings: the key, or the paper's ('Search-R1', 'SSP', 'CoEvoKG').

    Example:
        >>> method_name("Search-R1"), method_name("coevokg")
        ('search_r1', 'coevokg')
    """
    key = str(name).strip().lower().replace("-", "_")
    return "drfree" if key in ("dr._free", "dr_free", "dr. free", "dr.free") else key


def method_spec(name: str) -> MethodSpec:
    """The named method (any spelling :func:`method_name` accepts); an unknown name raises
    ValueError listing the known ones."""
    key = method_name(name)
    if key not in METHODS:
        from workbench.config import did_you_mean

        raise ValueError(f"--method: unknown method {name!r}; expected one of {sorted(METHODS)}"
                         f"{did_you_mean(key, METHODS)}")
    return METHODS[key]


def method_arg(name: str) -> str:
    """``--method``'s argparse type: the method's key, or an error with the closest name.

    Example:
        >>> method_arg("Search-R1")
        'search_r1'
    """
    import argparse

    try:
        return method_spec(name).name
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e).removeprefix("--method: ")) from None


def methods_help() -> str:
    """Every method with its row label, for ``--method``'s help.

    Example:
        >>> methods_help().startswith("search_r1 (Search-R1), ssp (SSP)")
        True
    """
    return ", ".join(f"{name} ({spec.label})" for name, spec in METHODS.items())
