#!/usr/bin/env bash
# Train several loop configurations side by side from one base (the preset's tiny warm start, or
# MODEL), then evaluate each best-validation checkpoint and the base on the same test questions
# (the LOG.md tables).
#
# usage: scripts/rl_compare.sh PRESET STEPS LIMIT TRAIN_TIMEOUT "name:method:section.field=v,..." ...
#   e.g. scripts/rl_compare.sh tiny 28 100 6000 "c:coevokg:" "s:search_r1:" "c1:coevokg:method.seed=1"
# LIMIT is test questions per family; a run still training after TRAIN_TIMEOUT seconds is stopped
# and its best checkpoint so far evaluated; a run whose training fails otherwise (refused settings,
# an error) or whose evaluation fails is reported as such in the summary. Prints each run against
# the base (paired gain and sign test) and, for configurations run with several seeds (runs that
# differ only in method.seed; a setting every spec has is left out of the names), their mean with a
# t interval and Welch tests against CoEvoKG.
# Environment: SCRATCH (default $TMPDIR/rl_compare; its data, runs, logs, base, base_kg and base_topology
# are replaced)
# holds the work; OUT (default SCRATCH/out) receives eval_base.txt, summary.txt and metrics.json
# (per-round metrics of every run); PY is the Python with the workbench (default .venv/bin/python);
# GPUS="0 1" spreads the runs round-robin over those CUDA devices. DATASET (default tinyworld) is
# the test set; DATASET=tinyworld_topology evaluates on EoG's answer-set questions (one family per
# query pattern, built in the base store before the runs copy it): EM there is Hit@1, and the
# summary adds set F1 per run and over seeds. DATASET=table1 evaluates on the six TinyWorld benchmarks
# of Table 1 (`workbench eval --suite table1`, built in the base store before the runs copy it; LIMIT
# 500 keeps all of them): the summary's macro EM is over the six, the gains and sign tests pool them,
# and OUT receives suite_<name>.json per evaluation (scripts/reference_file.py reads them).
# MODEL (a model folder or hub id) is the base every run starts from and the base row evaluated,
# instead of the tiny warm start; presets without a tiny backbone (paper, paper-7b, paper-8b) default
# to their backbone.model (paths.local_model). STORE (a store path) is copied for the base and each
# run instead of building a TinyWorld and G_0 at PRESET: the paper tier's KILT store with its QA sets,
#   e.g. MODEL=data/models/Qwen2.5-3B-Instruct STORE=data/kilt.duckdb DATASET=nq GPUS="0 1 2" \
#        scripts/rl_compare.sh paper 314 500 172800 "c:coevokg:" "s:search_r1:" "p:ssp:"
# (each run gets its own copy of STORE: one writer per DuckDB file).
# EVAL_BATCH (default: eval's 64) is the questions per generation batch of every evaluation, the base's
# and the runs' alike (a larger batch means fewer sequential generation calls on a GPU).
# ENGINE (hf | vllm | auto) is every run's and evaluation's generation backend; default hf at the
# smoke and tiny presets (a 5M model gains nothing from vLLM, and several runs sharing a GPU would
# each reserve vLLM's memory share: LOG.md, session 6), else the preset's rollout.backend.
# WARMSTARTS (a folder of warm starts by cache key: another call's WORKBENCH_DATA/cache/warmstart) is
# copied into the scratch cache first, so a warm start trained by an earlier call on the same machine
# (e.g. EoG's topology warm start, which has no shipped copy) is reused; each is found only under its
# own key, as the cache always does.
# REFERENCE names the configuration the Welch tests compare against (default coevokg; e.g.
# REFERENCE=drfree for Dr. Free's Table 3 rows).
# RESUME=1 continues the runs an earlier call left in SCRATCH: the same PRESET, LIMIT, specs, DATASET,
# ENGINE and base (recorded in SCRATCH/logs/call.txt; a call that differs is refused), STEPS may be
# larger, and STORE and WARMSTARTS are left unset (the earlier call's copies are used). Nothing is
# rebuilt or replaced: each run resumes from its last checkpoint (`workbench train --resume`, its
# log appended to) and is evaluated again; the bases' evaluations are the earlier call's (made now
# where that call did not finish one). Runs begun before a default changed (config.CHANGED_DEFAULTS)
# are refused by `train --resume` (the specs cannot change here): finish them with the commit that
# began them.
# Runs longer than one call's time limit train over several calls this way (e.g. 56 rounds of 12
# runs on one GPU: back-to-back calls of one device lease, whose /tmp survives between them).
set -eo pipefail
S=${SCRATCH:-${TMPDIR:-/tmp}/rl_compare}; mkdir -p "$S"; S=$(cd "$S" && pwd -P)
OUT=${OUT:-$S/out}; mkdir -p "$OUT"; OUT=$(cd "$OUT" && pwd -P)
for v in MODEL STORE WARMSTARTS; do  # a path given relative to the caller's folder, before the cd below
  if [ -n "${!v:-}" ] && [ -e "${!v}" ]; then printf -v "$v" '%s' "$(realpath "${!v}")"; fi
done
cd "$(dirname "$0")/.."  # the repository root, whatever the caller's folder
# the scripts below import workbench from this checkout whatever PY is (a python3 without it installed)
export PYTHONPATH="$(pwd -P)${PYTHONPATH:+:$PYTHONPATH}"
if [ "$S" = "$(pwd -P)" ]; then echo "SCRATCH must not be the repository" >&2; exit 2; fi
for v in MODEL STORE WARMSTARTS; do  # the folders below are replaced: never with the user's model or store inside
  case "${!v:-}" in "$S"/data|"$S"/data/*|"$S"/runs|"$S"/runs/*|"$S"/base|"$S"/base/*|"$S"/base_kg|"$S"/base_kg/*|"$S"/base_topology|"$S"/base_topology/*)
    echo "$v=${!v} lies in SCRATCH=$S, whose data/, runs/ and base/ this script replaces: copy it elsewhere first" >&2; exit 2;; esac
done
case "${RESUME:-}" in ""|1) ;; *) echo "RESUME=$RESUME: expected 1 (continue the runs in SCRATCH) or unset" >&2; exit 2;; esac
if [ -n "${RESUME:-}" ]; then
  [ -f "$S/data/_base.duckdb" ] && [ -f "$S/logs/call.txt" ] || {
    echo "RESUME=1: SCRATCH=$S holds no earlier call's runs (no data/_base.duckdb and logs/call.txt)" >&2; exit 2; }
  for v in STORE WARMSTARTS; do [ -z "${!v:-}" ] || {
    echo "RESUME=1 uses the earlier call's store and warm starts in SCRATCH: leave $v unset" >&2; exit 2; }; done
else
  rm -rf "$S/data" "$S/runs" "$S/logs" "$S/base" "$S/base_kg" "$S/base_topology"; mkdir -p "$S/data" "$S/logs"
fi
if [ -n "${WARMSTARTS:-}" ] && [ -z "${RESUME:-}" ]; then
  [ -d "$WARMSTARTS" ] || { echo "WARMSTARTS=$WARMSTARTS: no such folder (expected warm starts by cache key)" >&2; exit 2; }
  mkdir -p "$S/data/cache/warmstart"; cp -r "$WARMSTARTS"/. "$S/data/cache/warmstart/"
fi
PY=${PY:-.venv/bin/python}
# The base: MODEL, else a non-tiny preset's backbone.model, found in the caller's data/models/ (before
# WORKBENCH_DATA moves to the scratch folder); empty for a tiny backbone (its warm start, below).
base=${MODEL:-$($PY -c "import sys; from workbench import config, paths; m = config.preset(sys.argv[1]).backbone.model; print('' if m == 'tiny' else paths.local_model(m))" "$1")}
export JAX_PLATFORMS=cpu HF_HUB_OFFLINE=1 WORKBENCH_DATA="$S/data" WORKBENCH_RUNS="$S/runs" PYTHONUNBUFFERED=1 OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
preset=$1 steps=$2 limit=$3 tmo=$4; shift 4
wb="$PY -m workbench.cli"
ds=${DATASET:-tinyworld}
# what an evaluation of $1 (base, base_kg, a run's name) is on: the dataset, or Table 1's suite with its JSON
target() { if [ "$ds" = table1 ]; then tgt=(--suite table1 --json "$L/suite_$1.json"); else tgt=(--dataset "$ds"); fi; }
case $preset in smoke|tiny) engine=${ENGINE:-hf} ;; *) engine=${ENGINE:-} ;; esac
eng_train=() eng_eval=(); if [ -n "$engine" ]; then eng_train=(--set "rollout.backend=$engine"); eng_eval=(--backend "$engine"); fi
if [ -n "${EVAL_BATCH:-}" ]; then eng_eval+=(--batch-size "$EVAL_BATCH"); fi  # questions per generation batch (eval's default 64)
db="$S/data/_base.duckdb" L="$S/logs"
from=(--model "$base")  # train's base; a tiny backbone's runs make (or reuse) their preset's warm start as before
if [ -z "$base" ]; then from=(); base="$S/base"; fi
# What a RESUME call must share with the first call (STEPS, TRAIN_TIMEOUT, GPUS and OUT may change)
call=$(printf 'preset=%s\nlimit=%s\ndataset=%s\nengine=%s\nbase=%s\n' "$preset" "$limit" "$ds" "$engine" "$base"
       if [ -n "${EVAL_BATCH:-}" ]; then printf 'eval_batch=%s\n' "$EVAL_BATCH"; fi; printf 'spec=%s\n' "$@")
resume=()
if [ -n "${RESUME:-}" ]; then
  if [ "$call" != "$(cat "$L/call.txt")" ]; then
    echo "RESUME=1: this call differs from the one that started the runs in $S (only STEPS, TRAIN_TIMEOUT, GPUS and OUT may change):" >&2
    diff <(echo "$call") "$L/call.txt" >&2 || true; exit 2
  fi
  for spec in "$@"; do [ -f "$S/data/${spec%%:*}.duckdb" ] || {
    echo "RESUME=1: run ${spec%%:*}'s store is not in $S/data (the earlier call stopped before making it): start again without RESUME" >&2; exit 2; }; done
  resume=(--resume); echo "resuming the runs in $S"
else
  echo "$call" > "$L/call.txt"
fi
if [ -z "${RESUME:-}" ]; then  # the set-up: the base store, the warm starts, each run's copy, the bases' evaluations
if [ -n "${STORE:-}" ]; then
  [ -f "$STORE" ] || { echo "STORE=$STORE: no such store file (expected a workbench DuckDB store)" >&2; exit 2; }
  cp "$STORE" "$db"; echo "store: a copy of $STORE"
  # the copy's earlier evaluations go (the summary reads each store's one evaluation; STORE keeps them)
  $PY -c "import sys; from workbench import store; c = store.connect(sys.argv[1]); c.execute('DELETE FROM eval_outcomes'); c.close()" "$db"
else
  $wb world --preset "$preset" --seed 0 --db "$db" | tail -1
  $wb pool build --preset "$preset" --db "$db" --seed 0 | tail -1
fi
if [ "$ds" = table1 ]; then  # likewise: the suite's questions get the same ids in every copy
  $PY -c "import sys; from workbench import config, store; from workbench.kg.benchmarks import ensure_suite as e; c = store.connect(sys.argv[1]); print(sum(e(c, n=config.preset(sys.argv[2]).world.suite_questions).values()), 'suite questions'); c.close()" "$db" "$preset"
fi
if [ "$ds" = tinyworld_topology ]; then  # same question ids in every copy, so outcomes pair
  $PY -c "import sys; from workbench import store; from workbench.kg.topology_qa import ensure_topology_questions as e; c = store.connect(sys.argv[1]); print(e(c), 'topology questions'); c.close()" "$db"
fi
if [ ${#from[@]} -eq 0 ]; then
  $wb warmstart --preset "$preset" --db "$db" --out "$S/base" > "$L/warmstart.log" 2>&1
  grep -v "Loading\|Writing" "$L/warmstart.log" | head -3 || true
  # The other warm starts some runs start from (each its own cache key), once, before the runs, each
  # evaluated beside the base and compared with its runs (rl_summary.warm_starts): DynaSearcher's KG
  # warm start for runs offered the KG tool (SCRATCH/base_kg), EoG's topology warm start for the eog
  # rows (SCRATCH/base_topology)
  for w in $($PY scripts/rl_summary.py --warm-starts "$@"); do
    $wb warmstart "--$w" --preset "$preset" --db "$db" --out "$S/base_$w" > "$L/warmstart_$w.log" 2>&1
    grep -v "Loading\|Writing" "$L/warmstart_$w.log" | tail -9 || true
  done
fi
index="${STORE%.duckdb}.index"  # STORE's persisted search indexes (a dense E5 one takes hours to rebuild)
base_copies=(); for w in kg topology; do if [ -d "$S/base_$w" ]; then base_copies+=("_base_$w"); fi; done
for copy in _base "${base_copies[@]}" "${@%%:*}"; do
  [ "$copy" = _base ] || cp "$db" "$S/data/$copy.duckdb"  # each run its own store (one writer per file)
  if [ -n "${STORE:-}" ] && [ -d "$index" ]; then cp -al "$index" "$S/data/$copy.index" 2>/dev/null || cp -r "$index" "$S/data/$copy.index"; fi
done
fi
gpus=(${GPUS:-})
unevaluated() { [ -z "${RESUME:-}" ] || ! grep -q " macro " "$1" 2>/dev/null; }  # a RESUME call makes only a missing one
# the base's evaluation on the last listed GPU (the first run takes the first)
if unevaluated "$L/eval_base.txt"; then ( if [ ${#gpus[@]} -gt 0 ]; then export CUDA_VISIBLE_DEVICES=${gpus[-1]}; fi
  target base; $wb eval --db "$db" --model "$base" "${tgt[@]}" --limit "$limit" --preset "$preset" "${eng_eval[@]}" 2>&1 | grep -v Loading > "$L/eval_base.txt" ) & fi
for w in kg topology; do  # the other warm starts, beside it
  [ -d "$S/base_$w" ] && unevaluated "$L/eval_base_$w.txt" || continue
  ( if [ ${#gpus[@]} -gt 0 ]; then export CUDA_VISIBLE_DEVICES=${gpus[-1]}; fi
    target "base_$w"; $wb eval --db "$S/data/_base_$w.duckdb" --model "$S/base_$w" "${tgt[@]}" --limit "$limit" --preset "$preset" "${eng_eval[@]}" 2>&1 | grep -v Loading > "$L/eval_base_$w.txt" ) &
done
echo "base: $base"
i=0
for spec in "$@"; do
  IFS=: read -r name method sets <<< "$spec"
  args=(); for s in ${sets//,/ }; do args+=(--set "$s"); done
  if [ ${#gpus[@]} -gt 0 ]; then export CUDA_VISIBLE_DEVICES=${gpus[$((i++ % ${#gpus[@]}))]}; fi
  if [ -n "${RESUME:-}" ]; then echo "== resumed up to $steps rounds" >> "$L/train_$name.log"; fi
  ( rm -f "$L/failed_$name"; rc=0
    timeout "$tmo" $wb train --preset "$preset" --method "$method" --steps "$steps" --db "$S/data/$name.duckdb" --run "$name" "${resume[@]}" "${from[@]}" "${eng_train[@]}" "${args[@]}" >> "$L/train_$name.log" 2>&1 || rc=$?
    if [ $rc -ne 0 ]; then echo "train exit $rc" >> "$L/train_$name.log"; fi
    $wb runs show "$name" --db "$S/data/$name.duckdb" --json > "$L/metrics_$name.json" 2>&1 || true
    # A run whose training failed (refused, broken) or whose evaluation failed is marked, and the summary
    # reports it instead of its store's evaluation (a RESUME call's store still holds the earlier call's)
    if [ $rc -eq 0 ] || [ $rc -eq 124 ]; then  # finished, or stopped at TRAIN_TIMEOUT: its best checkpoint so far
      target "$name"; ( $wb eval --db "$S/data/$name.duckdb" --model "$S/runs/$name/best" "${tgt[@]}" --limit "$limit" --preset "$preset" "${eng_eval[@]}" 2>&1 || echo "eval exit $?" ) | grep -v Loading > "$L/eval_$name.txt" || true
      if grep -q "^eval exit" "$L/eval_$name.txt"; then echo "$(grep "^eval exit" "$L/eval_$name.txt"); logs/eval_$name.txt" > "$L/failed_$name"; fi
    else
      echo "train exit $rc; logs/train_$name.log" > "$L/failed_$name"; echo "not evaluated: train exit $rc (logs/train_$name.log)" > "$L/eval_$name.txt"
    fi ) &
done
wait
cp "$L"/eval_base*.txt "$OUT"/  # kept in SCRATCH too: a RESUME call's OUT gets the first call's
if [ "$ds" = table1 ]; then cp "$L"/suite_*.json "$OUT"/ 2>/dev/null || true; fi  # each evaluation's EM per question
cat "$OUT/eval_base.txt"; for w in kg topology; do if [ -f "$OUT/eval_base_$w.txt" ]; then cat "$OUT/eval_base_$w.txt"; fi; done
for spec in "$@"; do IFS=: read -r name rest <<< "$spec"; echo "== $name $rest"; tr '\r' '\n' < "$L/train_$name.log" | tail -3; cat "$L/eval_$name.txt"; done | tee "$OUT/summary.txt"
$PY scripts/rl_summary.py "$S" "$OUT" "$@" | tee -a "$OUT/summary.txt"
