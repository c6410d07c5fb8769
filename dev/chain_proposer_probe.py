"""How many of the warm start's chain-proposer candidates pass CoEvoKG's gate, per verifier
vocabulary (issue 15).

CoEvoKG's own round pieces (``Trainer.propose`` for rounds 0..R-1: the pool's chains, the proposer
prompt, the preset's decoding) write the candidates once; each is then gated again with the structural
verifier under every ``method.verifier_vocabulary`` (exact, forms, forms_types). Printed as one JSON
object: candidates, chains, and per vocabulary the passed candidates (the loop's ``passed_rate``),
the chains with at least one passed candidate (one minus the seed fallback when one question is
admitted per chain) and the rejection reasons.

    PYTHONPATH=$PWD python dev/chain_proposer_probe.py --store /tmp/probe.duckdb --rounds 5
"""
import argparse
import contextlib
import json
import sys
from collections import Counter

from workbench import config, store
from workbench.config import VERIFIER_VOCABULARIES
from workbench.method.gate import gate
from workbench.method.loop import Trainer
from workbench.method.verifiers import make_verifier
from workbench.method.methods import method_spec
from workbench.method.train import ensure_world, load_policies
from workbench.notebook import warm_start
from workbench.search.retriever import make_retriever


def probe_arguments(description: str) -> argparse.ArgumentParser:
    """The options every chain-proposer probe takes (this one, chain_pass_floor.py)."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--store", required=True, help="a DuckDB store (the preset's world and pool are built if missing)")
    ap.add_argument("--preset", default="tiny")
    ap.add_argument("--model", default="", help="a model folder ('' = the preset's default warm start)")
    return ap


def probe_trainer(args, kind=Trainer):
    """The store, the config and CoEvoKG's loop Trainer (or the subclass ``kind``) over the warm start."""
    cfg = config.preset(args.preset)
    con = store.connect(args.store)
    ensure_world(con, cfg)
    with contextlib.redirect_stdout(sys.stderr):  # the warm start's progress: stdout is the report alone
        base = args.model or warm_start(con, cfg, seed=0)
    policy, reference = load_policies(cfg, base, None)
    return con, cfg, kind(con, cfg, method_spec("coevokg"), "probe", policy, reference, make_retriever(con, cfg.search))


def main() -> None:
    ap = probe_arguments(__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5, help="rounds 0..R-1 of candidates (the issue's first five)")
    args = ap.parse_args()
    con, cfg, trainer = probe_trainer(args)
    m = cfg.method
    drawn = [task for t in range(args.rounds) for task in trainer.propose(t)[0]]
    report = {"preset": cfg.name, "model": args.model or "default warm start", "rounds": args.rounds, "chains": len(drawn),
              "candidates": sum(len(task.candidates) for task in drawn), "vocabulary": {}}
    for vocabulary in VERIFIER_VOCABULARIES:
        verifier = make_verifier("structural", None, vocabulary=vocabulary, con=con)
        passed, chains, reasons = 0, 0, Counter()
        for task in drawn:
            cands = [(c.verdict.question, c.verdict.answer) if c.verdict.extracted else None for c in task.candidates]
            verdicts = gate(task.chain, cands, verifier, m.gate_threshold, m.admit_top_k, m.gate_aggregation,
                            allow_topic=m.gate_allow_topic)
            passed += sum(v.passed for v in verdicts)
            chains += any(v.passed for v in verdicts)
            reasons.update("passed" if v.passed else v.reason.split(":")[0] for v in verdicts)
        report["vocabulary"][vocabulary] = {"passed": passed, "passed_rate": round(passed / report["candidates"], 3),
                                            "chains_with_a_passed": chains, "reasons": dict(reasons)}
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
