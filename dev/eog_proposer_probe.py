"""How many of the tiny warm start's topology questions EoG's gate admits, per pattern (issue 19).

The proposer (the preset's warm start, no training) writes one question for each of
``--per-pattern`` executed queries of every pattern (``eog.sample_views``, seed ``--views-seed``),
greedily and at each ``--temperature``, with the prompt ``method.topology_prompt`` names; the gate's
outcome per pattern (admitted / extraction failed / weak / leak / ...) is printed as one JSON object.

    PYTHONPATH=$PWD python dev/eog_proposer_probe.py --store /tmp/eog2/tiny.duckdb \
        --prompt witness --temperatures 0 0.6

``--model`` probes another base instead, e.g. the topology warm start (``workbench warmstart
--topology --out DIR``).
"""
import argparse
import json
import time

from workbench import config, store
from workbench.peers.eog import queries as eog
from workbench.method.train import ensure_world
from workbench.notebook import warm_start
from workbench.policy.model import Policy


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--store", required=True, help="a DuckDB store (the world is built there if absent)")
    ap.add_argument("--preset", default="tiny")
    ap.add_argument("--model", default="", help="a model folder ('' = the preset's default warm start)")
    ap.add_argument("--prompt", default="", help="method.topology_prompt ('' = the preset's)")
    ap.add_argument("--per-pattern", type=int, default=20)
    ap.add_argument("--views-seed", type=int, default=7)
    ap.add_argument("--seed", type=int, default=1, help="the generation seed")
    ap.add_argument("--temperatures", type=float, nargs="+", default=[0.0, 0.6])
    ap.add_argument("--examples", type=int, default=0, help="print this many (pattern, question, answer, reason) per run")
    ap.add_argument("--dump", default="", help="write every (query, question, verdict) as JSON lines here")
    args = ap.parse_args()
    cfg = config.preset(args.preset, **({"method.topology_prompt": args.prompt} if args.prompt else {}))
    con = store.connect(args.store)
    ensure_world(con, cfg)
    policy = Policy.load(args.model or warm_start(con, cfg, seed=0))
    views = eog.sample_views(con, per_pattern=args.per_pattern, seed=args.views_seed)
    report = {"preset": cfg.name, "model": args.model or "default warm start", "topology_prompt": cfg.method.topology_prompt, "queries": len(views), "runs": {}}
    for temp in args.temperatures:
        t0 = time.time()
        verdicts = eog.write_questions(policy, views, cfg, seed=args.seed, temperature=temp)
        run = eog.admission_counts(views, verdicts)
        run["seconds"] = round(time.time() - t0, 1)
        if args.examples:
            run["examples"] = [(v.pattern, x.question, x.answer, x.admitted, x.reason) for v, x in zip(views, verdicts)
                               ][::max(1, len(views) // args.examples)][:args.examples]
        if args.dump:
            with open(args.dump, "a") as f:
                for v, x in zip(views, verdicts):
                    f.write(json.dumps({"prompt": cfg.method.topology_prompt, "temperature": temp, "pattern": v.pattern,
                                        "anchors": v.anchor_titles, "relations": v.relations,
                                        "witness": list(v.witness_titles), "answers": v.answer_titles,
                                        "question": x.question, "answer": x.answer, "admitted": x.admitted,
                                        "reason": x.reason, "scores": x.scores}, ensure_ascii=False) + "\n")
        report["runs"][f"temperature={temp:g}"] = run
    print(json.dumps(report, indent=1, ensure_ascii=False))


if __name__ == "__main__":
    main()
