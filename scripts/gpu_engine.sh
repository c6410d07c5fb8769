#!/usr/bin/env bash
# The GPU engine's measurements (issue 14; LOG.md records what they printed), on one CUDA machine
# with vLLM and Unsloth installed (on the lent H200: ../shared/gpu/README.md's bundle).
#
# usage: scripts/gpu_engine.sh PART...  run in the order given, each writing $OUT/PART.json (or .log):
#   world      the tiny world and its chain pool in $SCRATCH (kept between calls)
#   logprobs   vLLM's per-token log-probs vs the trainer's for the same tokens (the warm start)
#   tiny       `workbench train` at the tiny preset, 3 rounds, rollout.backend=vllm then hf
#   gen3b      bench gpu at the Qwen2.5-3B shape: bare generation (vLLM, HF) and the LoRA update
#   update3b   the LoRA update alone at the 3B shape (8 x 1,024, r 16) per UPDATE_VARIANTS (default "auto auto+packed
#              offload": method.gradient_checkpointing[+method.pack_sequences]) beside Unsloth's standalone step
#   update3b_varied  the same on rows of varied length (a quarter of 1,024 to all): padded vs packed (issue 44)
#   loop3b     rollout() itself at the 3B shape on both engines, 256 trajectories (vLLM's experiments on its engine)
#   loop3b_v1  loop3b with vLLM's V1 model runner (VLLM_USE_V2_MODEL_RUNNER=0; 0.26 picks V2 for dense models)
#   loop3b_mp  vLLM alone in loop3b with its engine core in a process of its own (VLLM_ENABLE_V1_MULTIPROCESSING=1)
#              (loop3b*: LOOP_ENGINES="vllm" times vLLM alone; LOOP_PROFILE=1 adds a cProfile'd pass, bench gpu --profile)
#   round3b    one CoEvoKG round at paper shape (3B, 64 questions x 5 rollouts, 8 turns, top-3, LoRA 16)
#              (round*: ROUND_SET="--set section.field=v ..." is appended, e.g. rollout.max_new_tokens=500)
#   round7b round8b  the same round at the Qwen2.5-7B / Llama-3.1-8B shapes
#   gen7b gen8b  the same as gen3b at the Qwen2.5-7B / Llama-3.1-8B shapes
#   retrieval  dense search of 256 queries over 1M and 10M x 768 vectors: FAISS on the CPU vs torch top-k on the GPU
#   ddp_equiv  `workbench train --gpus 2` vs one GPU, tiny preset, 2 rounds, rollouts replicated: per-round metrics (issue 20)
#   scale3b    one CoEvoKG round at paper shape (3B random weights, as round3b) on 1, 2, 4, 8 GPUs (as many as
#              the machine has; `--gpus N`, rollouts sharded, hf backend unless SCALE_BACKEND=vllm): stages and peaks
# Environment: SCRATCH (default /tmp/gpu_engine), OUT (default $SCRATCH/out), PY (default python3).
set -eo pipefail
S=${SCRATCH:-/tmp/gpu_engine}; OUT=${OUT:-$S/out}; mkdir -p "$S/data" "$OUT"
cd "$(dirname "$0")/.."
PY=${PY:-python3}
# vLLM logs to stdout by default, which put its lines into the JSON files below (session 11's loop3b.json)
export HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1 VLLM_USE_FLASHINFER_SAMPLER=0 VLLM_NO_USAGE_STATS=1 \
  VLLM_LOGGING_STREAM=ext://sys.stderr UNSLOTH_DISABLE_STATISTICS=1 WORKBENCH_RUNS="$S/runs" TOKENIZERS_PARALLELISM=false
wb="$PY -m workbench.cli"
db="$S/data/tiny.duckdb"
base=$(ls -d data/pretrained/warmstart/*/ | head -1)
# the paper's shape of a round (seed 000, section 4.1: 5 rollouts, 8 turns, top-3; one optimiser step a
# round as the paper presets map 314 steps), the rest ours (until session 19: 4 steps a round, whose later
# steps' rows the trainer recomputes old log-probs for)
paper=(--set method.chains_per_round=64 --set method.group_size=5 --set rollout.max_turns=8 --set search.topk=3
       --set method.lora_rank=16 --set rollout.backend=vllm --set rollout.max_new_tokens=128
       --set rollout.max_total_tokens=4096 --set method.micro_batch=8 --set rollout.vllm_memory=0.35
       --set method.minibatches=1)
model3b() {  # a random Qwen2.5-3B with the warm start's tokenizer padded to its vocabulary, made once
  local model="$S/qwen2.5-3b-random"
  [ -d "$model" ] || $PY -c "from workbench.bench.gpu import paper_shape_folder as f; \
f('qwen2.5-3b', '$base', '$model', device='cuda')" >&2 || return 1
  echo "$model"
}
for part in "$@"; do
  echo "== $part $(date +%T)"
  case $part in
    world) [ -f "$db" ] || { $wb world --preset tiny --seed 0 --db "$db" | tail -1
                             $wb pool build --preset tiny --db "$db" --seed 0 | tail -1; } ;;
    logprobs) $wb bench gpu --parts logprobs --model "$base" --db "$db" > "$OUT/logprobs.json" ;;
    tiny) for b in vllm hf; do
            $wb train --preset tiny --method coevokg --steps 3 --db "$db" --run "tiny-$b" --overwrite \
              --set rollout.backend=$b > "$OUT/tiny-$b.log" 2>&1
            $wb runs show "tiny-$b" --db "$db" --json > "$OUT/tiny-$b.json"
          done ;;
    gen3b) $wb bench gpu --shape qwen2.5-3b --parts generation update > "$OUT/gen3b.json" ;;
    gen7b) $wb bench gpu --shape qwen2.5-7b --parts generation update > "$OUT/gen7b.json" ;;
    update3b) $wb bench gpu --shape qwen2.5-3b --parts update --update-variants ${UPDATE_VARIANTS:-auto auto+packed offload} \
                --unsloth-standalone > "$OUT/update3b.json" ;;
    update3b_varied) $wb bench gpu --shape qwen2.5-3b --parts update --update-lengths varied \
                       --update-variants ${UPDATE_VARIANTS:-auto auto+packed} > "$OUT/update3b_varied.json" ;;
    gen8b) $wb bench gpu --shape llama-3.1-8b --parts generation update > "$OUT/gen8b.json" ;;
    loop3b|loop3b_v1|loop3b_mp) vars=(); engines=(${LOOP_ENGINES:-vllm hf}); model=$(model3b) || exit 1
              [ $part = loop3b_v1 ] && vars=(VLLM_USE_V2_MODEL_RUNNER=0)
              [ $part = loop3b_mp ] && vars=(VLLM_ENABLE_V1_MULTIPROCESSING=1) && engines=(vllm)
              env "${vars[@]}" $wb bench gpu --shape qwen2.5-3b --parts loop --engines "${engines[@]}" \
                --round-model "$model" --db "$db" --set rollout.max_new_tokens=64 ${LOOP_PROFILE:+--profile} \
                > "$OUT/$part.json" ;;
    round3b|round7b|round8b) shape=$(case $part in round3b) echo qwen2.5-3b;; round7b) echo qwen2.5-7b;;
                                     *) echo llama-3.1-8b;; esac)
             $wb bench gpu --shape $shape --parts round --model "$base" --db "$db" "${paper[@]}" ${ROUND_SET:-} \
               > "$OUT/$part.json" ;;
    retrieval) $wb bench gpu --parts retrieval > "$OUT/retrieval.json" ;;
    ddp_equiv) for n in 1 2; do
                 $wb train --gpus $n --preset tiny --steps 2 --db "$db" --run "ddp-$n" --overwrite \
                   --set rollout.backend=hf --set rollout.data_parallel=replicate > "$OUT/ddp_equiv-$n.log" 2>&1
                 $wb runs show "ddp-$n" --db "$db" --json > "$OUT/ddp_equiv-$n.json"
               done
               $PY -c "import json,math,sys; a,b=(json.load(open(sys.argv[i])) for i in (1,2)); \
bad=[(r['round'],k,r[k],s[k]) for r,s in zip(a,b) for k in r if not k.startswith('time_') and r[k]!=s[k] and not \
(isinstance(r[k],float) and math.isclose(r[k],s[k],rel_tol=1e-5,abs_tol=1e-8 if k=='kl' else 1e-9))]; \
print(json.dumps({'rounds':len(a),'outside_tolerance':bad}))" "$OUT/ddp_equiv-1.json" "$OUT/ddp_equiv-2.json" \
                 > "$OUT/ddp_equiv.json" ;;
    scale3b) model=$(model3b) || exit 1
             for n in 1 2 4 8; do
               [ "$n" -le "$(nvidia-smi -L | wc -l)" ] || continue
               $wb train --gpus $n --preset tiny --model "$model" --steps 1 --db "$db" --run "scale-$n" --overwrite \
                 "${paper[@]}" --set rollout.backend=${SCALE_BACKEND:-hf} --set method.val_questions=4 \
                 > "$OUT/scale3b-$n.log" 2>&1
               $wb runs show "scale-$n" --db "$db" --json > "$OUT/scale3b-$n.json"
               grep -ho "rank [0-9]*: peak GPU memory [0-9.]* GiB" "$OUT/scale3b-$n.log" || true
             done
             $PY -c "import json,sys; r={n: json.load(open(f'$OUT/scale3b-{n}.json'))[0] for n in (1,2,4,8) \
if __import__('os').path.exists(f'$OUT/scale3b-{n}.json')}; print(json.dumps({n: {k: v for k, v in m.items() \
if k.startswith('time_')} for n, m in r.items()}, indent=1))" > "$OUT/scale3b.json" ;;
    *) echo "unknown part $part" >&2; exit 2 ;;
  esac
  [ ! -f "$OUT/$part.json" ] || tail -c 1500 "$OUT/$part.json"
done
