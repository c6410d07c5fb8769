"""A run's proposer candidates split by the shape of their chain (issue 15): chains whose every hop
is a functional relation (one object per subject: a question along the chain has one answer; on
TinyWorld exactly the QA templates' relation sequences) vs chains with a non-functional hop (e.g.
``birthplace of``: a city has many natives). Per shape and per half of the run's rounds: chains,
candidates, admitted, the solver's success p_s on the admitted (Eq. 10's input) and the share of
them it never answers (p_s = 0). Printed as one JSON object; the store is only read.

    PYTHONPATH=$PWD python dev/candidates_by_shape.py --store data/tiny.duckdb --run quickstart-coevokg
"""
import argparse
import json

import duckdb
import pandas as pd


def candidates(con, run: str) -> pd.DataFrame:
    """One row per candidate of ``run``: round, admitted, p_s and whether its chain's hops are all functional."""
    return con.execute("""
        WITH hops AS (
            SELECT n.chain_id, bool_and(coalesce(r.functional, false)) AS functional
            FROM chain_nodes n LEFT JOIN relations r ON r.label = n.relation
            WHERE n.relation IS NOT NULL GROUP BY n.chain_id)
        SELECT k.round, k.chain_id, k.admitted, k.p_s, h.functional
        FROM candidates k JOIN hops h USING (chain_id) WHERE k.run = ? ORDER BY k.candidate_id""", [run]).df()


def summary(df: pd.DataFrame) -> dict:
    admitted = df[df.admitted]
    return {"chains": int(df.groupby(["round", "chain_id"]).ngroups), "candidates": len(df),
            "admitted": len(admitted), "admitted_rate": round(len(admitted) / len(df), 3) if len(df) else None,
            "p_s_admitted": round(float(admitted.p_s.mean()), 3) if len(admitted) else None,
            "p_s_zero_share": round(float((admitted.p_s == 0).mean()), 3) if len(admitted) else None}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--store", required=True)
    ap.add_argument("--run", required=True)
    args = ap.parse_args()
    con = duckdb.connect(args.store, read_only=True)
    df = candidates(con, args.run)
    if df.empty:
        raise SystemExit(f"{args.store}: run {args.run!r} has no proposer candidates")
    half = (df["round"].max() + 1) // 2
    report = {"run": args.run, "rounds": int(df["round"].max()) + 1}
    for shape, part in (("all hops functional", df[df.functional]), ("a non-functional hop", df[~df.functional])):
        report[shape] = {"all rounds": summary(part), f"rounds 0-{half - 1}": summary(part[part["round"] < half]),
                         f"rounds {half}-": summary(part[part["round"] >= half])}
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
