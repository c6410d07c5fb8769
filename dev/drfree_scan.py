"""Dr. Free's gain on constructed candidates of G_0 chains, and Table 11's flips per left-out shortcut
(seed 002): what notebook 08's section 2 computes, without training, for LOG.md.

    PYTHONPATH=. python dev/drfree_scan.py data/tiny.duckdb --preset tiny --chains 20

Per chain two candidates: "What is the r_L of the r_1 of e_1?" (answer e_L) and "What is the r_1 of
e_1?" (answer e_2). Prints the share rewarded (Delta_B > 0) per kind, the strongest shortcut, and
per left-out type how many candidates have Delta_-b > 0 >= Delta_B (a false positive the full set
rejects) with the largest such case. The scorer is the preset's warm start.
"""

import argparse
import collections
import time

import pandas as pd


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("db")
    p.add_argument("--preset", default="tiny")
    p.add_argument("--chains", type=int, default=20)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    from workbench import store
    from workbench.config import preset
    from workbench.kg.pool import sample_chains
    from workbench.peers.drfree import info_gain as drfree
    from workbench.method.proposer import chain_view
    from workbench.policy.model import Policy
    from workbench.policy.warmstart import warmstart
    from workbench.search.tool import SearchTool

    cfg = preset(args.preset)
    con = store.connect(args.db)
    policy = Policy.load(warmstart(con, preset=cfg, log=lambda *_: None))
    search = SearchTool(con, index=cfg.search.index, topk=cfg.search.topk)
    pool = [chain_view(c) for c in sample_chains(con, 200, seed=args.seed)]
    items, kinds = [], []
    for c in [c for c in pool if all(c.passages)][:args.chains]:
        items.append((c, f"What is the {c.relations[-1]} of the {c.relations[0]} of {c.titles[0]}?", c.titles[-1]))
        items.append((c, f"What is the {c.relations[0]} of {c.titles[0]}?", c.titles[1]))
        kinds += ["multi-hop", "one-hop"]
    start = time.perf_counter()
    full = drfree.batch_information_gain(policy, items, search)
    print(f"scored {len(items)} candidates in {time.perf_counter() - start:.1f} s")
    df = pd.DataFrame({"kind": kinds, "gain": [f["gain"] for f in full],
                       "strongest": [f["strongest"].split(":")[0] for f in full]})
    print(df.groupby("kind").agg(rewarded=("gain", lambda g: (g > 0).mean()), mean_gain=("gain", "mean"),
                                 n=("gain", "size")))
    print(df.groupby(["kind", "strongest"]).size().unstack(fill_value=0))
    for b in drfree.ALL_SHORTCUTS:
        w = drfree.batch_information_gain(policy, items, search, [s for s in drfree.ALL_SHORTCUTS if s != b])
        flips = [(k, x["gain"], f["gain"]) for k, x, f in zip(kinds, w, full) if x["gain"] > 0 >= f["gain"]]
        largest = max(flips, key=lambda z: z[1]) if flips else None
        print(f"without {b}: {len(flips)} flips {dict(collections.Counter(k for k, _, _ in flips))}, largest {largest}")


if __name__ == "__main__":
    main()
