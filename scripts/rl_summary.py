"""The closing tables of scripts/rl_compare.sh: each run's best checkpoint against the base on the
same test questions (paired gain and sign test), then each configuration over its seeds.

usage: python scripts/rl_summary.py SCRATCH OUT "name:method:..." ...
       python scripts/rl_summary.py --warm-starts "name:method:..." ...   (kg / topology: which extra bases)
Reads SCRATCH/data/<name>.duckdb (the run's evaluation), SCRATCH/data/_base.duckdb and
SCRATCH/logs/metrics_<name>.json; writes OUT/metrics.json and prints the tables.
"""

import json
import os
import re
import sys
from pathlib import Path

from workbench import store
from workbench.evaluate import across_seeds, compare_outcomes, latest_evals, outcomes, set_scores
from workbench.kg.benchmarks import SUITE
from workbench.kg.topology_qa import DATASET as TOPOLOGY
from workbench.table1_suite import by_benchmark, suite_frame
from workbench.method.methods import method_spec, uses_kg_tool


def stored_outcomes(db: Path):
    """The outcomes of the one test evaluation in a store (rl_compare.sh evaluates each store once),
    or of its Table 1 suite (``DATASET=table1``: six evaluations, one frame whose families are the
    benchmarks, so macro EM, the gain and the sign test are over the six)."""
    con = store.connect(str(db), read_only=True)
    try:
        evals = latest_evals(con)
        if len(evals) == 1:
            return outcomes(con, next(iter(evals.values())))
        suite = {dataset: eval_id for (_, _, dataset), eval_id in evals.items() if dataset in SUITE}
        if len(suite) != len(evals) or set(suite) != set(SUITE):
            raise ValueError(f"{db}: expected one test evaluation or the table1 suite's six, found {sorted(evals)}")
        return by_benchmark(suite_frame(con, suite))
    finally:
        con.close()


def stored_set_f1(db: Path) -> float | None:
    """Macro set F1 in points of the store's one test evaluation when it is on EoG's answer-set
    questions (``tinyworld_topology``), else None."""
    con = store.connect(str(db), read_only=True)
    try:
        evals = latest_evals(con)
        if len(evals) != 1:  # the table1 suite: no answer-set questions
            return None
        ((_, _, dataset), eval_id), = evals.items()
        if dataset != TOPOLOGY:
            return None
        scores = set_scores(con, eval_id)
        return 100 * float(scores.set_index("group").loc["macro", "f1"])
    finally:
        con.close()


def macro_em(frame) -> float:
    """Test EM in points, the unweighted mean over question families (the tables' macro row)."""
    return 100 * float(frame.groupby("family").em.mean().mean())


def settings(spec: str) -> list[str]:
    """A run spec's ``section.field=value`` settings but its seed.

    ``"c1:coevokg:method.lr=1e-5,method.seed=1"`` -> ``["method.lr=1e-5"]``.
    """
    _, _, *sets = spec.split(":", 2)
    return [s for s in ",".join(sets).split(",") if s and not s.startswith("method.seed=")]


def configuration(spec: str, shared: set[str] = frozenset()) -> str:
    """A run's configuration without its seed and the ``shared`` settings every run of the call
    has: runs that share one are seeds of it.

    ``"c1:coevokg:method.lr=1e-5,method.seed=1"`` -> ``"coevokg method.lr=1e-5"``;
    with ``shared={"method.lr=1e-5"}`` -> ``"coevokg"`` (so ``REFERENCE=coevokg`` still names it).
    """
    return " ".join([spec.split(":", 2)[1], *sorted(set(settings(spec)) - shared)])


def offered_kg_tool(spec: str) -> bool:
    """Whether a run is offered DynaSearcher's KG tool, so it starts from the KG warm start.

    ``"k:dynasearcher:method.seed=1"`` -> True; ``"c:coevokg:method.kg_tool=on"`` -> True.
    """
    chosen = dict(s.split("=", 1) for s in settings(spec) if "=" in s)
    return uses_kg_tool(method_spec(spec.split(":", 2)[1]), chosen.get("method.kg_tool", ""))


def from_topology_base(spec: str) -> bool:
    """Whether a run starts from EoG's topology warm start (its method's ``topology_warmstart``: the eog rows).

    ``"e:eog:method.seed=1"`` -> True; ``"c:coevokg:"`` -> False.
    """
    return method_spec(spec.split(":", 2)[1]).topology_warmstart


def macro_f1(frame) -> float:
    """Test F1 in points, the unweighted mean over question families."""
    return 100 * float(frame.groupby("family").f1.mean().mean())


def searches(scratch: Path, name: str) -> tuple[float, float] | None:
    """(document, KG) searches per test question from a run's eval log (``evaluate``'s line), or None."""
    try:
        found = re.search(r"searches per question .*; all ([0-9.]+) / ([0-9.]+)",
                          (scratch / "logs" / f"eval_{name}.txt").read_text())
    except OSError:
        return None
    return (float(found.group(1)), float(found.group(2))) if found else None


def main(scratch: Path, out: Path, specs: list[str]) -> None:
    names = [spec.split(":")[0] for spec in specs]
    metrics = {}
    for name in names:
        try:
            metrics[name] = json.loads((scratch / "logs" / f"metrics_{name}.json").read_text())
        except (OSError, ValueError) as e:
            metrics[name] = str(e)
    (out / "metrics.json").write_text(json.dumps(metrics))

    base = stored_outcomes(scratch / "data" / "_base.duckdb")
    kg_store = scratch / "data" / "_base_kg.duckdb"  # DynaSearcher's KG warm start, where runs used it
    base_kg = stored_outcomes(kg_store) if kg_store.exists() else None
    topology_store = scratch / "data" / "_base_topology.duckdb"  # EoG's topology warm start, likewise
    base_topology = stored_outcomes(topology_store) if topology_store.exists() else None
    by_config: dict[str, list[float]] = {}
    by_config_f1: dict[str, list[float]] = {}
    f1_by_config: dict[str, list[float]] = {}
    searches_by_config: dict[str, list[tuple[float, float]]] = {}
    shared = set.intersection(*(set(settings(spec)) for spec in specs))
    if shared:
        print(f"settings every run shares (left out of the configurations' names): {' '.join(sorted(shared))}")
    for name, spec in zip(names, specs):
        failed = scratch / "logs" / f"failed_{name}"  # rl_compare.sh's mark: its training or evaluation failed
        if failed.exists():  # (a RESUME call's store still holds the earlier evaluation: not this call's result)
            print(f"{name}: no evaluation ({failed.read_text().strip()})")
            continue
        try:
            run = stored_outcomes(scratch / "data" / f"{name}.duckdb")
        except Exception as e:  # a run that failed still lets the others be reported
            print(f"{name}: no evaluation ({e})")
            continue
        if base_kg is not None and offered_kg_tool(spec):  # its own base, not the default one
            print(f"{name} (B) vs KG base (A): {compare_outcomes(base_kg, run)}")
        elif base_topology is not None and from_topology_base(spec):
            print(f"{name} (B) vs topology base (A): {compare_outcomes(base_topology, run)}")
        else:
            print(f"{name} (B) vs base (A): {compare_outcomes(base, run)}")
        by_config.setdefault(configuration(spec, shared), []).append(macro_em(run))
        f1 = stored_set_f1(scratch / "data" / f"{name}.duckdb")
        if f1 is not None:  # EoG's answer-set questions: EM is Hit@1; set F1 beside it
            print(f"{name}: macro set F1 {f1:.1f}")
            by_config_f1.setdefault(configuration(spec, shared), []).append(f1)
        token_f1 = macro_f1(run)
        f1_by_config.setdefault(configuration(spec, shared), []).append(token_f1)
        print(f"{name}: macro F1 {token_f1:.2f}")  # reference_file.py records it per run
        if searches(scratch, name) is not None:
            searches_by_config.setdefault(configuration(spec, shared), []).append(searches(scratch, name))
    if any(len(v) > 1 for v in by_config.values()):
        # REFERENCE (environment) names the configuration to test against, e.g. drfree for Table 3's rows
        reference = os.environ.get("REFERENCE") or ("coevokg" if "coevokg" in by_config else next(
            (c for c in by_config if c.split()[0] == "coevokg"), None))
        if reference is not None and reference not in by_config:  # e.g. Table 3's rows run apart from their full method
            print(f"\nREFERENCE={reference} is not among these configurations: no Welch tests")
            reference = None
        against = f"; diff and Welch p against {reference}" if reference else ""
        kg = f", KG base {macro_em(base_kg):.1f}" if base_kg is not None else ""
        kg += f", topology base {macro_em(base_topology):.1f}" if base_topology is not None else ""
        print(f"\nmacro EM over seeds (base {macro_em(base):.1f}{kg}{against}):")
        print(across_seeds(by_config, reference=reference).round(3).to_string())
        if by_config_f1:
            bases = [f"base {stored_set_f1(scratch / 'data' / '_base.duckdb'):.1f}"]
            if base_topology is not None:
                bases.append(f"topology base {stored_set_f1(topology_store):.1f}")
            print(f"\nmacro set F1 over seeds ({', '.join(bases)}{against}):")
            print(across_seeds(by_config_f1, reference=reference).round(3).to_string())
        kg = f", KG base {macro_f1(base_kg):.1f}" if base_kg is not None else ""
        kg += f", topology base {macro_f1(base_topology):.1f}" if base_topology is not None else ""
        print(f"\nmacro F1 over seeds (base {macro_f1(base):.1f}{kg}{against}):")
        print(across_seeds(f1_by_config, reference=reference).round(3).to_string())
        if "dynasearcher" in by_config and reference != "dynasearcher":  # seed 003's rows against DynaSearcher
            for name, table in (("EM", by_config), ("F1", f1_by_config)):
                print(f"\nmacro {name} over seeds, diff and Welch p against dynasearcher:")
                print(across_seeds(table, reference="dynasearcher").round(3).to_string())
    if searches_by_config:
        print("\nsearches per test question, mean over seeds (document / KG):")
        for config, values in searches_by_config.items():
            doc, kg = (sum(v[i] for v in values) / len(values) for i in (0, 1))
            print(f"  {config:<40} {doc:.2f} / {kg:.2f}  (n={len(values)})")


def warm_starts(specs: list[str]) -> list[str]:
    """The warm starts besides the default that these runs start from (rl_compare.sh trains them
    once, before the runs): ``kg`` and/or ``topology``.

    ``["k:dynasearcher:", "e:eog:"]`` -> ``["kg", "topology"]``.
    """
    return [w for w, needed in (("kg", offered_kg_tool), ("topology", from_topology_base))
            if any(needed(spec) for spec in specs)]


if __name__ == "__main__":
    if sys.argv[1] == "--warm-starts":  # rl_compare.sh asks before training any run
        print(" ".join(warm_starts(sys.argv[2:])))
    else:
        main(Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3:])
