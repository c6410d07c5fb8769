"""Write a reference file for data/reference/ from scripts/rl_compare.sh outputs (its OUT folder:
summary.txt and metrics.json), one or several calls merged.

usage: python scripts/reference_file.py OUT.json DIR ... --rename PREFIX=METHOD ... [--provenance KEY=VALUE ...]
       [--audit FILE ...] [--extend FILE.json]
  e.g. python scripts/reference_file.py data/reference/tiny_drfree_20rounds.json DIR1 DIR2 \
         --rename d=drfree co=coevokg sr=search_r1 --audit DIR1/audit.txt --provenance what=... commit=...

A run named PREFIX<seed> in rl_compare.sh (``d0``, ``wo_per_hop2``) becomes ``<METHOD>_s<seed>``, the
name ``workbench.reference`` reads; runs whose prefix is not renamed are left out. Each run's test
macro EM, paired gain over the base with its interval and the sign test are read from summary.txt
(the lines rl_compare.sh prints; ``paired_with: kg_base`` / ``topology_base`` where the gain is over
that warm start; on EoG's answer-set questions, ``DATASET=tinyworld_topology``, test macro EM is Hit@1
and ``test_macro_set_f1`` is recorded beside it, the bases' too), test macro token F1
(``test_macro_f1``, where the summary has rl_summary.py's per-run line) and searches per test question
by tool (``searches_doc``, ``searches_kg``, where the evaluation printed them),
every round's metrics from metrics.json (timings left out);
with --audit, the counts of `workbench audit shortcuts` tables (Table 5) of the same runs.
Where a folder has ``suite_base.json`` (rl_compare.sh with ``DATASET=table1``: Table 1 at the tiny tier),
the file gets a ``suite`` section: the six benchmarks' question ids, and for the base and each run its
EM per benchmark, the macro over them, tw-pop per bucket and every question's EM (a 0/1 string per
benchmark), read from ``suite_<name>.json``; ``workbench.reference.Reference.table1`` reads it.
With --extend, the runs of an earlier reference file come first (a file shipped from seeds 0-2,
extended by a later session's seeds 3-5): the same base evaluations and rounds per run are required,
a run in both is refused, --provenance must restate what, command and machine for both calls, and
its commit and date are added to the earlier file's (``commit=7036a99, 1a2b3c4``).
"""

import argparse
import json
import re
from pathlib import Path

GAIN = re.compile(r"^(\S+) \(B\) vs (?:(KG|topology) )?base \(A\): B - A macro EM ([-+0-9.]+) points \[([-+0-9.]+), ([-+0-9.]+)\]; "
                  r"sign test: A only (\d+), B only (\d+), p = ([0-9.e-]+)")
BLOCK = re.compile(r"^== (\S+) ")
MACRO = re.compile(r"^\s+macro\s+n=\d+\s+EM\s+([0-9.]+)")
SET_F1 = re.compile(r"^(\S+): macro set F1 ([0-9.]+)$")  # rl_summary.py's line for an answer-set evaluation
F1 = re.compile(r"^(\S+): macro F1 ([0-9.]+)$")  # rl_summary.py's token F1 line (since 2026-12-02)
SEARCHES = re.compile(r"^\s+searches per question \(document / KG\): .*; all ([0-9.]+) / ([0-9.]+)$")
BASE_SET_F1 = re.compile(r"^\s+macro\s+n=\d+\s+Hit@1\s+[0-9.]+\s+\[.*\]\s+F1\s+([0-9.]+)")  # `workbench eval`'s
AUDIT = re.compile(r"^\s*(\S+)\s+(closed_book|source_only|one_shot|single_component)\s+(\d+)\s+(\d+)\s")


def evaluations(summary: str) -> dict[str, dict]:
    """Per run of one summary.txt: test macro EM and the paired comparison with the base."""
    out, block = {}, None
    for line in summary.splitlines():
        if m := BLOCK.match(line):
            block = m.group(1)
        elif (m := MACRO.match(line)) and block and "test_macro_em" not in out.setdefault(block, {}):
            out[block]["test_macro_em"] = float(m.group(1))
        elif m := GAIN.match(line):
            name, kg, gain, low, high, a_only, b_only, p = m.groups()
            out.setdefault(name, {}).update(gain=float(gain), gain_low=float(low), gain_high=float(high),
                                            base_only=int(a_only), trained_only=int(b_only), sign_test_p=float(p))
            if kg:  # a run offered the KG tool (or EoG's) is paired with its own warm start, not the default base
                out[name]["paired_with"] = f"{kg.lower()}_base"
        elif m := SET_F1.match(line):
            out.setdefault(m.group(1), {})["test_macro_set_f1"] = float(m.group(2))
        elif m := F1.match(line):
            out.setdefault(m.group(1), {})["test_macro_f1"] = float(m.group(2))
        elif (m := SEARCHES.match(line)) and block and "searches_doc" not in out.setdefault(block, {}):
            out[block].update(searches_doc=float(m.group(1)), searches_kg=float(m.group(2)))
    return out


def suite_entry(res: dict) -> dict:
    """One evaluation's part of the suite section, from ``workbench eval --suite table1 --json``."""
    return {"benchmarks": {b: v["em"] for b, v in res["benchmarks"].items()}, "macro": res["macro"]["em"],
            "buckets": {k: v["em"] for k, v in res.get("buckets", {}).items()},
            "outcomes": {b: o["em"] for b, o in res["outcomes"].items()}}


def add_suite(suite: dict | None, d: Path, runs: dict[str, str]) -> dict | None:
    """``suite`` (an earlier folder's or --extend's section, or None) with folder ``d``'s base and
    ``runs`` ({name in the folder: name in the file}) added; the base and question ids must agree."""
    if not (d / "suite_base.json").exists():
        if suite is not None:
            raise SystemExit(f"{d}: no suite_base.json, but the other folders (or --extend's file) have the table1 suite")
        return None
    base = json.loads((d / "suite_base.json").read_text())
    ids = {b: o["question_ids"] for b, o in base["outcomes"].items()}
    if suite is None:
        from workbench.kg.benchmarks import SUITE

        suite = {"name": "table1", "benchmarks": [b for b in SUITE if b in ids], "question_ids": ids,
                 "base": suite_entry(base), "runs": {}}
    elif suite["question_ids"] != ids or suite["base"]["outcomes"] != suite_entry(base)["outcomes"]:
        raise SystemExit(f"{d}: its base's suite evaluation (questions or outcomes) differs from the other folders'")
    for name, new in runs.items():
        f = d / f"suite_{name}.json"
        if not f.exists():
            raise SystemExit(f"{d}: run {name} has no {f.name} (its suite evaluation failed?)")
        res = json.loads(f.read_text())
        if {b: o["question_ids"] for b, o in res["outcomes"].items()} != ids:
            raise SystemExit(f"{f}: evaluated on other questions than the base")
        suite["runs"][new] = suite_entry(res)
    return suite


def audit_rows(text: str, rename: dict[str, str]) -> list[dict]:
    """The rows of ``workbench audit shortcuts`` tables (run, shortcut, n, answerable), runs renamed."""
    rows = []
    for line in text.splitlines():
        if (m := AUDIT.match(line)) and (run := renamed(m.group(1), rename)):
            rows.append({"run": run, "shortcut": m.group(2), "n": int(m.group(3)), "answerable": int(m.group(4))})
    return rows


def extended_provenance(earlier: dict, given: dict, where: Path) -> dict:
    """The provenance of ``where``'s runs plus a later call's: ``given`` restates the text keys for
    both calls; commit and date become one per call; the base evaluations are checked by the caller."""
    if missing := [k for k in ("what", "command", "machine", "commit", "date") if k not in given]:
        had = "; ".join(f"{k}={earlier.get(k, '')!r}" for k in missing)
        raise SystemExit(f"--extend {where}: restate --provenance {' '.join(k + '=...' for k in missing)} "
                         f"for both calls (the earlier file's: {had})")
    out = {k: v for k, v in earlier.items() if not k.startswith("base")} | given
    for k in ("commit", "date"):
        out[k] = ", ".join(dict.fromkeys(v.strip() for v in f"{earlier.get(k, '')},{given[k]}".split(",") if v.strip()))
    return out


def renamed(name: str, rename: dict[str, str]) -> str | None:
    """``d3`` -> ``drfree_s3`` under ``{"d": "drfree"}``; None for a prefix not renamed. The longest
    prefix wins, so a method name ending in a digit keeps it: ``search_r10`` -> ``search_r1_s0``
    under ``{"search_r1": "search_r1"}``."""
    for prefix in sorted(rename, key=len, reverse=True):
        seed = name[len(prefix):]
        if name.startswith(prefix) and seed.isdigit():
            return f"{rename[prefix]}_s{seed}"
    return None


def summary(d: Path) -> str:
    """OUT/summary.txt; replaces bytes that are not UTF-8 (rl_compare.sh before 2026-12-04 cut each run's
    progress bar at a byte count, sometimes inside a character)."""
    return (d / "summary.txt").read_text(errors="replace")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("dirs", nargs="+", type=Path, help="rl_compare.sh OUT folders")
    ap.add_argument("--rename", nargs="+", required=True, metavar="PREFIX=METHOD")
    ap.add_argument("--provenance", nargs="+", default=[], metavar="KEY=VALUE")
    ap.add_argument("--audit", nargs="+", default=[], type=Path, metavar="FILE",
                    help="output of workbench audit shortcuts for these runs (Table 5's counts)")
    ap.add_argument("--extend", type=Path, metavar="FILE.json", help="an earlier reference file whose runs to keep")
    args = ap.parse_args()
    rename = dict(r.split("=", 1) for r in args.rename)
    provenance = dict(p.split("=", 1) for p in args.provenance)
    earlier = json.loads(args.extend.read_text()) if args.extend else {}
    evals, metrics = dict(earlier.get("evaluations", {})), dict(earlier.get("metrics", {}))
    rounds = {len(rows) for rows in metrics.values()}  # the earlier runs' length, which the new ones must have
    bases = {(w, key): set() for w in ("", "_kg", "_topology") for key in ("test_macro_em", "test_macro_set_f1")}
    if args.extend:
        if "base_test_macro_em" not in earlier.get("provenance", {}):
            raise SystemExit(f"--extend {args.extend}: no base_test_macro_em in its provenance (not a reference file?)")
        for (w, key), found in bases.items():  # the earlier file's bases must be this call's
            if (value := earlier["provenance"].get(f"base{w}_{key}")) is not None:
                found.add(value)
        provenance = extended_provenance(earlier["provenance"], provenance, args.extend)
    suite = earlier.get("suite")
    if args.extend and suite is None and (args.dirs[0] / "suite_base.json").exists():
        raise SystemExit(f"--extend {args.extend}: it has no table1 suite, these folders do")
    for d in args.dirs:
        for (w, key), found in bases.items():  # the default base, and the KG / topology warm starts where evaluated
            if w == "" or (d / f"eval_base{w}.txt").exists():
                pattern = MACRO if key == "test_macro_em" else BASE_SET_F1
                macro = [pattern.match(line) for line in (d / f"eval_base{w}.txt").read_text().splitlines()]
                found |= {float(m.group(1)) for m in macro if m}
        runs = json.loads((d / "metrics.json").read_text())
        for name, e in evaluations(summary(d)).items():
            new = renamed(name, rename)
            if new is None:
                continue
            if new in evals:
                raise SystemExit(f"{d}: run {name} ({new}) is already in an earlier folder or --extend's file")
            if rounds and len(runs[name]) not in rounds:
                raise SystemExit(f"{d}: run {name} has {len(runs[name])} rounds; --extend's runs have {sorted(rounds)}")
            evals[new] = e
            metrics[new] = [{k: v for k, v in row.items() if not k.startswith("time_")} for row in runs[name]]
        suite = add_suite(suite, d, {name: renamed(name, rename) for name in evaluations(summary(d))
                                     if renamed(name, rename)})
    for (w, key), found in bases.items():
        if len(found) > 1 or (w == "" and key == "test_macro_em" and not found):
            also = f" and --extend {args.extend}'s" if args.extend else ""
            raise SystemExit(f"the folders'{also} base{w} evaluations differ or are missing: {key} {sorted(found)}")
        if found:
            provenance[f"base{w}_{key}"] = found.pop()
    data = {"provenance": provenance, "evaluations": evals, "metrics": metrics}
    if suite is not None:
        data["suite"] = suite
    audit = earlier.get("audit", []) + [row for f in args.audit for row in audit_rows(f.read_text(), rename)]
    if len({(row["run"], row["shortcut"]) for row in audit}) < len(audit):
        raise SystemExit("an audit table counts a run's shortcut twice "
                         "(the same run in two --audit files, or in --extend's file)")
    if audit:
        data["audit"] = audit
    args.out.write_text(json.dumps(data, indent=1))
    print(f"{args.out}: {len(evals)} runs ({', '.join(sorted(evals))})")


if __name__ == "__main__":
    main()
