"""The methods of Tables 1-2 as configurations of one loop (seed 000, sections 4.1 and 4.5).

Under a matched budget every method gets the same question slots per round, G rollouts per slot,
and one optimiser step per round; they differ only in the fields below. The core's rows are here;
each peer method registers its own in :data:`METHODS` from its folder (``workbench/peers/``).

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

from workbench.registry import Registry


@dataclass(frozen=True)
class MethodSpec:
    """One row of Tables 1-2 as a configuration of the loop.

    task_source: a name in ``tasks.TASK_SOURCES``: 'kg_chains' (C1: questions from KG chains through
    the quality gate), 'answer_entity' (SSP without its search: one answer entity, no KG structure,
    the proposer reads its passage, the open gate), 'ssp' (SSP as published: the proposer searching
    while it writes, its question kept by SSP's checks and RAG verification, ``method/ssp.py``),
    'seed_pool' (Search-R1: the fixed human-written pool, no proposer), or a peer's ('kg_topology',
    EoG's executed queries; 'seed_document', Dr. Free's searching proposer). solver_reward /
    proposer_reward name entries of ``rewards.SOLVER_REWARDS`` / ``rewards.PROPOSER_REWARDS``.
    write_back: C3.
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
    warmstart_demos: str = ""  # the demonstrations its warm start adds (:data:`WARMSTART_DEMOS`; EoG's 'topology')
    # which G_0 chains are drawn (``tasks.CHAIN_SELECTIONS``: 'all', or Dr. Free's 'drfree'), the
    # proposer's advantage (``update.PROPOSER_ADVANTAGES``: 'reinforce_pp', Eq. 12, or Dr. Free's
    # 'hrpo') and the self-evolution iterations the rounds are split into (seed 002);
    # ``method.chain_selection``, ``method.proposer_algorithm`` and ``method.iterations`` override them
    chain_selection: str = "all"
    proposer_algorithm: str = "reinforce_pp"
    iterations: int = 1
    graph_tools: bool = False


METHODS = Registry("method", plugins="rows")  # name -> MethodSpec; the core's rows here, each peer's from its folder
WARMSTART_DEMOS = Registry("warm-start demonstrations")  # MethodSpec.warmstart_demos -> factory(spec, cfg)

for _spec in (
    MethodSpec("search_r1", "seed_pool", "exact_match", None, False, "Search-R1"),
    MethodSpec("ssp", "ssp", "exact_match", "ssp_adversarial", False, "SSP", leak_filter=False),
    # ours, not a paper's row: SSP's answer entity and reward without its proposer's search and RAG
    # check (the proposer reads the entity's passage): the "SSP" row of the reference runs made
    # before issue 40, kept because the tiny backbone cannot play SSP's searching proposer (README)
    MethodSpec("ssp_no_search", "answer_entity", "exact_match", "ssp_adversarial", False,
               "SSP w/o proposer search or RAG check (ours)", leak_filter=False),
    MethodSpec("c1", "kg_chains", "exact_match", "ssp_adversarial", False, "+ KG task generation"),
    MethodSpec("c2", "kg_chains", "coevokg", "coevokg_difficulty", False, "+ path/difficulty rewards"),
    MethodSpec("coevokg", "kg_chains", "coevokg", "coevokg_difficulty", True, "CoEvoKG"),
):
    METHODS.add(_spec.name, _spec)


@dataclass(frozen=True)
class Settings:
    """A run's resolved round settings: the method's (``MethodSpec``) unless ``method.*`` sets them."""

    chain_selection: str
    proposer_algorithm: str
    iterations: int


def resolve(spec: MethodSpec, m) -> Settings:
    """The method's chain selection, proposer algorithm and iterations (at most ``method.steps``),
    each overridden by its ``method.*`` setting when that is set ('' / 0 = the method's).

    Example:
        >>> from workbench.config import MethodConfig
        >>> resolve(METHODS["coevokg"], MethodConfig())
        Settings(chain_selection='all', proposer_algorithm='reinforce_pp', iterations=1)
        >>> resolve(METHODS["coevokg"], MethodConfig(iterations=2)).iterations
        2
    """
    # the method's own iterations, not more than its rounds (a 1-round smoke run is one iteration)
    return Settings(m.chain_selection or spec.chain_selection, m.proposer_algorithm or spec.proposer_algorithm,
                    m.iterations or min(spec.iterations, m.steps))


def warmstart_demos(spec: MethodSpec, cfg):
    """The demonstrations a method's warm start adds (``MethodSpec.warmstart_demos``, a name in
    :data:`WARMSTART_DEMOS`; ``policy.warmstart.ExtraDemos``), or None for the default warm start.

    Example:
        >>> from workbench.config import preset
        >>> warmstart_demos(METHODS["coevokg"], preset("smoke")) is None
        True
    """
    return WARMSTART_DEMOS[spec.warmstart_demos](spec, cfg) if spec.warmstart_demos else None


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
