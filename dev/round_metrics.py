"""Per-round metrics of a fixed set of short runs, as JSON: run it in two checkouts and diff the
outputs to show a refactor leaves the round's numbers unchanged (LOG.md, session 5).

    PYTHONPATH=. python dev/round_metrics.py out.json            # smoke and tiny runs
    PYTHONPATH=. python dev/round_metrics.py out.json --forced   # admitted candidates too

``--forced`` feeds the gate a constructed two-hop question naming each chain's first entity
(``method.gate_allow_topic``), so admission, the proposer reward and write-back all run. Data,
runs and caches go to a temporary folder; timing keys are left out.
"""

import argparse
import json
import os
import tempfile

RUNS = [("smoke", "coevokg", 3, {}), ("smoke", "ssp", 2, {}), ("smoke", "search_r1", 2, {}),
        ("tiny", "coevokg", 2, {"method.chains_per_round": 8, "method.minibatches": 1, "method.val_questions": 4}),
        ("tiny", "ssp", 1, {"method.chains_per_round": 8, "method.minibatches": 1, "method.val_questions": 4})]
FORCED = [("tiny", "coevokg", 3, {"method.chains_per_round": 6, "method.minibatches": 1, "method.val_questions": 4,
                                  "method.gate_allow_topic": True})]


def force_admission() -> None:
    from workbench.method import tasks

    real_gate = tasks.gate

    def gate(chain, candidates, *args, **kwargs):
        q = f"What is the {chain.relations[-1]} of the {chain.relations[0]} of {chain.titles[0]}?"
        return real_gate(chain, [(q, chain.titles[-1])] * len(candidates), *args, **kwargs)
    tasks.gate = gate


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out")
    p.add_argument("--forced", action="store_true")
    args = p.parse_args()
    tmp = tempfile.mkdtemp(prefix="round-metrics-")
    for name in ("DATA", "RUNS", "FIGURES"):
        os.environ[f"WORKBENCH_{name}"] = f"{tmp}/{name.lower()}"
    from workbench.method.train import train

    if args.forced:
        force_admission()
    out = {}
    for preset, method, steps, overrides in FORCED if args.forced else RUNS:
        rows = train(f"{tmp}/{preset}.duckdb", run=f"{preset}-{method}", method=method, preset=preset, steps=steps,
                     overrides=overrides, progress=False, log=None)
        out[f"{preset}/{method}"] = [{k: v for k, v in r.items() if not k.startswith("time_")} for r in rows]
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1, sort_keys=True)
    print(args.out)


if __name__ == "__main__":
    main()
