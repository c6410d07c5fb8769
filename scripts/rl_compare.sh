#!/usr/bin/env bash
# Train several loop configurations side by side from the warm start, then evaluate each
# best-validation checkpoint and the base on the same test questions (the LOG.md tables).
#
# usage: scripts/rl_compare.sh PRESET STEPS LIMIT TRAIN_TIMEOUT "name:method:section.field=v,..." ...
#   e.g. scripts/rl_compare.sh tiny 28 100 6000 "c:coevokg:" "s:search_r1:" "c1:coevokg:method.seed=1"
# LIMIT is test questions per family; a run still training after TRAIN_TIMEOUT seconds is stopped
# and its best checkpoint so far evaluated. Prints each run against the base (paired gain and sign
# test) and, for configurations run with several seeds (runs that differ only in method.seed),
# their mean with a t interval and Welch tests against CoEvoKG.
# Environment: SCRATCH (default $TMPDIR/rl_compare; its data, runs, logs and base are replaced)
# holds the work; OUT (default SCRATCH/out) receives eval_base.txt, summary.txt and metrics.json
# (per-round metrics of every run); PY is the Python with the workbench (default .venv/bin/python);
# GPUS="0 1" spreads the runs round-robin over those CUDA devices.
set -eo pipefail
S=${SCRATCH:-${TMPDIR:-/tmp}/rl_compare}; mkdir -p "$S"; S=$(cd "$S" && pwd -P)
OUT=${OUT:-$S/out}; mkdir -p "$OUT"; OUT=$(cd "$OUT" && pwd -P)
cd "$(dirname "$0")/.."  # the repository root, whatever the caller's folder
if [ "$S" = "$(pwd -P)" ]; then echo "SCRATCH must not be the repository" >&2; exit 2; fi
rm -rf "$S/data" "$S/runs" "$S/logs" "$S/base"; mkdir -p "$S/data" "$S/logs"
PY=${PY:-.venv/bin/python}
export JAX_PLATFORMS=cpu HF_HUB_OFFLINE=1 WORKBENCH_DATA="$S/data" WORKBENCH_RUNS="$S/runs" PYTHONUNBUFFERED=1 OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
preset=$1 steps=$2 limit=$3 tmo=$4; shift 4
wb="$PY -m workbench.cli"
db="$S/data/_base.duckdb" L="$S/logs"
$wb world --preset "$preset" --seed 0 --db "$db" | tail -1
$wb pool build --preset "$preset" --db "$db" --seed 0 | tail -1
$wb warmstart --preset "$preset" --db "$db" --out "$S/base" > "$L/warmstart.log" 2>&1
grep -v "Loading\|Writing" "$L/warmstart.log" | head -3 || true
# DynaSearcher's KG warm start (its own cache key), once, before runs that are offered the KG tool
case " $* " in *:dynasearcher:*|*:dynasearcher\ *|*:dynasearcher_wo_mr:*|*:dynasearcher_wo_mr\ *) $wb warmstart --kg --preset "$preset" --db "$db" > "$L/warmstart_kg.log" 2>&1
  grep -v "Loading\|Writing" "$L/warmstart_kg.log" | tail -8 || true;; esac
for spec in "$@"; do cp "$db" "$S/data/${spec%%:*}.duckdb"; done  # each run its own store (one writer per file)
$wb eval --db "$db" --model "$S/base" --dataset tinyworld --limit "$limit" --preset "$preset" 2>&1 | grep -v Loading > "$OUT/eval_base.txt" &
gpus=(${GPUS:-}); i=0
for spec in "$@"; do
  IFS=: read -r name method sets <<< "$spec"
  args=(); for s in ${sets//,/ }; do args+=(--set "$s"); done
  if [ ${#gpus[@]} -gt 0 ]; then export CUDA_VISIBLE_DEVICES=${gpus[$((i++ % ${#gpus[@]}))]}; fi
  ( timeout "$tmo" $wb train --preset "$preset" --method "$method" --steps "$steps" --db "$S/data/$name.duckdb" --run "$name" "${args[@]}" > "$L/train_$name.log" 2>&1 || echo "train exit $?" >> "$L/train_$name.log"
    $wb runs show "$name" --db "$S/data/$name.duckdb" --json > "$L/metrics_$name.json" 2>&1 || true
    $wb eval --db "$S/data/$name.duckdb" --model "$S/runs/$name/best" --dataset tinyworld --limit "$limit" --preset "$preset" 2>&1 | grep -v Loading > "$L/eval_$name.txt" || true ) &
done
wait
cat "$OUT/eval_base.txt"
for spec in "$@"; do IFS=: read -r name rest <<< "$spec"; echo "== $name $rest"; tail -c 400 "$L/train_$name.log" | tr '\r' '\n' | tail -3; cat "$L/eval_$name.txt"; done | tee "$OUT/summary.txt"
$PY scripts/rl_summary.py "$S" "$OUT" "$@" | tee -a "$OUT/summary.txt"
