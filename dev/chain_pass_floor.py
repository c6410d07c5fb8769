"""Per-chain pass probability of the chain proposer's candidates (the warm start's, or --model's;
issue 15: is the flat seed fallback a floor of chains no candidate passes?).

The chains of rounds F..F+R-1 (the loop's own draws, ``Trainer.tasks.draw``) are proposed for D
times by the loop's ``Trainer.propose``, each draw with its own proposer sampling seed (draw 0 is the
loop's ``seed_for(t, 2)``, draw d adds d * 1,000,000,007), and gated by the loop's own verifier
(``method.verifier_vocabulary``, default forms_types). Printed as one JSON object: the histogram of
per-chain pass probability (passed / (D * M)), the fallback of each draw (chains whose M candidates
all fail), the fallback independent chains of that probability would give (mean (1 - p)^M), the
split-half correlation of per-chain pass counts (even vs odd draws), and chains, never-passed
chains, passed rate, fallback and chains whose every hop is a functional relation (``relations``
table: one object per subject, so a question along the chain has one answer) for the chains whose
relation sequence is one of the QA question templates the warm start's proposer demonstrations came
from (``by_template``) and for the others. ``--per-chain FILE`` writes one JSON line per chain: hops,
relations, whether each is functional, the nodes' types, each draw's verdicts.

    PYTHONPATH=$PWD python dev/chain_pass_floor.py --store /tmp/floor.duckdb --rounds 5 --draws 8
"""
import json
from collections import Counter

import numpy as np
from chain_proposer_probe import probe_arguments, probe_trainer  # dev/ is on the path of a script run by path

from workbench.kg.pool import functional_relations
from workbench.method.loop import Trainer
from workbench.policy.warmstart import DEMO_FAMILIES, hop_relations

BINS = ((0, 0), (0, 0.25), (0.25, 0.5), (0.5, 0.75), (0.75, 1.0), (1, 1))  # 0, (0, .25], ..., (.75, 1), 1


class Redraw(Trainer):
    """The loop's Trainer whose proposer sampling seed (stage 2) moves with ``draw``; chains stay."""

    draw = 0

    def seed_for(self, t: int, stage: int) -> int:
        return super().seed_for(t, stage) + (self.draw * 1_000_000_007 if stage == 2 else 0)


def histogram(p: np.ndarray) -> dict:
    out = {}
    for lo, hi in BINS:
        name = str(lo) if lo == hi else f"({lo}, {hi}]" if hi < 1 else f"({lo}, {hi})"
        out[name] = int(np.sum(p == lo) if lo == hi else np.sum((p > lo) & ((p <= hi) if hi < 1 else (p < hi))))
    return out


def qa_templates(con) -> set[tuple[str, ...]]:
    """The relation sequences of the store's QA questions' chains (the families the warm start's
    demonstrations come from: not the questions a run generated and wrote back), read as those
    demonstrations read them (``warmstart.hop_relations``): the templates they cover.

    Example:
        >>> import duckdb
        >>> con = duckdb.connect()
        >>> _ = con.execute("CREATE TABLE edges AS SELECT * FROM (VALUES (1, 2, 'born in'), (2, 3, 'located in'), "
        ...                 "(3, 2, 'contains')) t(src, dst, relation)")
        >>> _ = con.execute("CREATE TABLE questions AS SELECT * FROM (VALUES ('two_hop', [1, 2, 3]), "
        ...                 "('generated', [1, 2, 3, 2]), ('comparison', NULL)) t(family, chain)")
        >>> qa_templates(con)
        {('born in', 'located in')}
    """
    chains = [list(chain) for (chain,) in con.execute(
        "SELECT chain FROM questions WHERE chain IS NOT NULL AND family IN (SELECT unnest(?))",
        [list(DEMO_FAMILIES)]).fetchall()]
    return {tuple(relations) for relations in hop_relations(con, chains) if relations and all(relations)}


def main() -> None:
    ap = probe_arguments(__doc__.splitlines()[0])
    ap.add_argument("--first", type=int, default=0, help="the first round whose chains are drawn")
    ap.add_argument("--rounds", type=int, default=5, help="rounds F..F+R-1 of chains (32 chains a round)")
    ap.add_argument("--draws", type=int, default=8, help="independent proposer draws of M candidates per chain")
    ap.add_argument("--per-chain", default="", help="write one JSON line per chain here")
    args = ap.parse_args()
    con, cfg, trainer = probe_trainer(args, Redraw)
    m = cfg.method
    rounds = range(args.first, args.first + args.rounds)
    chains = {}  # (round, index) -> the chain and each draw's verdicts
    for d in range(args.draws):
        trainer.draw = d
        for t in rounds:
            for i, task in enumerate(trainer.propose(t)[0]):
                rec = chains.setdefault((t, i), {"chain": task.chain, "draws": []})
                assert rec["chain"].chain_id == task.chain.chain_id, "a redraw changed the round's chains"
                rec["draws"].append([c.verdict for c in task.candidates])
    M = m.candidates_per_chain
    passes = np.array([[sum(v.passed for v in draw) for draw in rec["draws"]] for rec in chains.values()])  # chains x D
    p = passes.sum(1) / (args.draws * M)
    halves = passes[:, 0::2].sum(1), passes[:, 1::2].sum(1)
    report = {"preset": cfg.name, "model": args.model or "default warm start", "vocabulary": m.verifier_vocabulary,
              "rounds": [rounds.start, rounds.stop - 1], "chains": len(chains),
              "distinct_chains": len({rec["chain"].chain_id for rec in chains.values()}), "draws": args.draws, "M": M,
              "passed_rate": round(float(p.mean()), 3), "pass_probability_histogram": histogram(p),
              "fallback_per_draw": [round(float(x), 3) for x in (passes == 0).mean(0)],
              "fallback_mean": round(float((passes == 0).mean()), 3),
              "fallback_if_chains_alike": round(float((1 - p.mean()) ** M), 3),
              "fallback_from_per_chain_p": round(float(((1 - p) ** M).mean()), 3),
              "split_half_pearson": round(float(np.corrcoef(*halves)[0, 1]), 3) if args.draws > 1 else None,
              "chains_never_passed": int(np.sum(p == 0)),
              "reasons": dict(Counter("passed" if v.passed else v.reason.split(":")[0]
                                      for rec in chains.values() for draw in rec["draws"] for v in draw))}
    templates = qa_templates(con)
    shaped = np.array([tuple(rec["chain"].relations) in templates for rec in chains.values()])
    functional = functional_relations(con)
    every_hop = np.array([all(functional.get(r, False) for r in rec["chain"].relations) for rec in chains.values()])
    report["by_template"] = {name: {"chains": int(part.sum()), "never_passed": int(np.sum(p[part] == 0)),
                                    "passed_rate": round(float(p[part].mean()), 3),
                                    "fallback_mean": round(float((passes[part] == 0).mean()), 3),
                                    "all_hops_functional": int(every_hop[part].sum())}
                             for name, part in (("QA template", shaped), ("other", ~shaped)) if part.any()}
    if args.per_chain:
        types = dict(con.execute("SELECT entity_id, type FROM entities WHERE type IS NOT NULL").fetchall())
        with open(args.per_chain, "w", encoding="utf-8") as f:
            for (t, i), rec in chains.items():
                c = rec["chain"]
                f.write(json.dumps({"round": t, "index": i, "chain_id": c.chain_id, "hops": len(c.relations),
                                    "titles": c.titles, "relations": c.relations,
                                    "functional": [functional.get(r, False) for r in c.relations],
                                    "types": [types.get(e) for e in c.entity_ids],
                                    "draws": [[{"passed": v.passed, "q": round(v.q, 3), "reason": v.reason,
                                                "question": v.question, "answer": v.answer} for v in draw]
                                              for draw in rec["draws"]]}) + "\n")
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
