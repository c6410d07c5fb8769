#!/usr/bin/env bash
# The tiny tier's Table 1 reference runs (issue 42): base, Search-R1, SSP, C1, C2 and CoEvoKG, each
# trained N rounds per seed and its best-validation checkpoint evaluated on the six TinyWorld
# benchmarks (`eval --suite table1`), in waves of seeds that share one GPU (15 runs fit one H200).
#
# usage: scripts/table1_reference.sh PRESET ROUNDS OUT "SEEDS" ["SEEDS" ...]
#   e.g. GPUS=0 scripts/table1_reference.sh tiny 10 /tmp/t1 "0 1 2" "3 4 5"
# Each wave is one scripts/rl_compare.sh call (SCRATCH=OUT/scratch_K, its OUT=OUT/wave_K); every
# wave builds the same world, pool and suite (seed 0), so the base's outcomes agree across waves.
# Then: scripts/reference_file.py data/reference/tiny_table1_<ROUNDS>rounds.json OUT/wave_* --rename ...
# (LOG.md, session 21, has the command with its provenance). Environment as rl_compare.sh's (GPUS,
# PY, EVAL_BATCH, RESUME).
set -eo pipefail
preset=$1 rounds=$2 out=$3; shift 3
[ $# -ge 1 ] || { echo "usage: $0 PRESET ROUNDS OUT \"SEEDS\" [\"SEEDS\" ...]" >&2; exit 2; }
cd "$(dirname "$0")/.."
mkdir -p "$out"
k=0
for seeds in "$@"; do
  specs=()
  for s in $seeds; do
    for m in search_r1 ssp c1 c2 coevokg; do specs+=("${m}_s$s:$m:method.seed=$s"); done
  done
  DATASET=table1 SCRATCH="$out/scratch_$k" OUT="$out/wave_$k" \
    bash scripts/rl_compare.sh "$preset" "$rounds" 500 "${TRAIN_TIMEOUT:-3600}" "${specs[@]}"
  k=$((k + 1))
done
