#!/usr/bin/env bash
# Train several loop configurations side by side from the tiny warm start, then evaluate each
# best-validation checkpoint and the base on the same test questions (the LOG.md tables).
#
# usage: scripts/rl_compare.sh PRESET STEPS LIMIT TRAIN_TIMEOUT "name:method:section.field=v,..." ...
#   e.g. scripts/rl_compare.sh tiny 30 100 1800 "s:search_r1:" "c:coevokg:method.lr=3e-5"
# Works in a scratch area (/tmp/wbd, /tmp/wbr); writes eval_base.txt, summary.txt and
# metrics.json (per-round metrics of every run) to $OUT (default /tmp/rl_out).
# PY is the Python with the workbench installed (default .venv/bin/python); GPUS="0 1" spreads the
# runs round-robin over those CUDA devices (unset: every run sees all of them).
set -e
PY=${PY:-.venv/bin/python}
OUT=${OUT:-/tmp/rl_out}; mkdir -p $OUT
export JAX_PLATFORMS=cpu HF_HUB_OFFLINE=1 WORKBENCH_DATA=/tmp/wbd WORKBENCH_RUNS=/tmp/wbr PYTHONUNBUFFERED=1 OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
preset=$1 steps=$2 limit=$3 tmo=$4; shift 4
wb="$PY -m workbench.cli"
db=/tmp/wbd/$preset.duckdb
L=/tmp/rl_logs; rm -rf /tmp/wbd /tmp/wbr $L; mkdir -p /tmp/wbd $L
$wb world --preset $preset --seed 0 --db $db | tail -1
$wb pool build --preset $preset --db $db --seed 0 | tail -1
$wb warmstart --preset $preset --db $db --out /tmp/base 2>&1 | grep -v "Loading\|Writing" | head -3
for spec in "$@"; do cp $db /tmp/wbd/${spec%%:*}.duckdb; done  # each run its own store (one writer per file)
$wb eval --db $db --model /tmp/base --dataset tinyworld --limit $limit --preset $preset 2>&1 | grep -v Loading > $OUT/eval_base.txt &
gpus=(${GPUS:-}); i=0
for spec in "$@"; do
  IFS=: read name method sets <<< "$spec"
  args=""; for s in ${sets//,/ }; do args="$args --set $s"; done
  [ ${#gpus[@]} -gt 0 ] && export CUDA_VISIBLE_DEVICES=${gpus[$((i++ % ${#gpus[@]}))]}
  ( timeout $tmo $wb train --preset $preset --method $method --steps $steps --db /tmp/wbd/$name.duckdb --run $name $args > $L/train_$name.log 2>&1 || echo "train exit $?" >> $L/train_$name.log
    $wb runs show $name --db /tmp/wbd/$name.duckdb --json > $L/metrics_$name.json 2>&1 || true
    $wb eval --db /tmp/wbd/$name.duckdb --model /tmp/wbr/$name/best --dataset tinyworld --limit $limit --preset $preset 2>&1 | grep -v Loading > $L/eval_$name.txt || true ) &
done
wait
cat $OUT/eval_base.txt
for spec in "$@"; do IFS=: read name rest <<< "$spec"; echo "== $name $rest"; tail -c 400 $L/train_$name.log | tr '\r' '\n' | tail -3; cat $L/eval_$name.txt; done | tee $OUT/summary.txt
$PY - "$@" > $OUT/metrics.json <<'PY'
import json, sys
out = {}
for spec in sys.argv[1:]:
    name = spec.split(":")[0]
    try:
        out[name] = json.load(open(f"/tmp/rl_logs/metrics_{name}.json"))
    except Exception as e:
        out[name] = str(e)
print(json.dumps(out))
PY
# each best checkpoint against the base on the same questions: paired gain and sign test
$PY - $db "$@" <<'PY' | tee -a $OUT/summary.txt
import sys
from workbench import store
from workbench.evaluate import compare_outcomes, outcomes

def latest(db):
    con = store.connect(db, read_only=True)
    (eval_id,) = con.execute("SELECT max(eval_id) FROM eval_outcomes").fetchone()
    return outcomes(con, eval_id)

base = latest(sys.argv[1])
for spec in sys.argv[2:]:
    name = spec.split(":")[0]
    try:
        run = latest(f"/tmp/wbd/{name}.duckdb")
        print(f"{name} (B) vs base (A): {compare_outcomes(base, run)}")
    except Exception as e:
        print(f"{name} vs base: {e}")
PY
