#!/usr/bin/env bash
# What does a time-budgeted sweep of one model give, against Inductor's default and freezing + max-autotune in one
# bench run? One call on nvidia-h200 (carry .whl). Usage: bash bench/device/sweep_model.sh MODEL SECONDS [flags]
# SECONDS "default": no --time-budget (the --budget default sweep sizes itself to max-autotune's expected compile).
#   e.g. bash bench/device/sweep_model.sh mobilenet_v3_large 150 --dtype bf16 --batch 32 --channels-last
# BENCH=0 runs the sweep alone; ROUNDS the bench's rounds (20); BENCH_LIMIT_S its time limit (330); BENCH_FLAGS more flags (--ablate); MODES sets the bench's modes (default: default,freezing-max-autotune,tuned), e.g. for
# a decode step under CUDA graphs:
#   MODES=reduce-overhead,max-autotune,tuned-reduce-overhead bash bench/device/sweep_model.sh hf:gpt2 150 --mode decode \
#     --dtype bf16 --batch 8 --seq-len 512
# A sweep and its bench share the call's 600 s: where max-autotune's compile is long (resnet50 b32: the bench ran past
# 330 s twice), run BENCH=0 here, then bench/device/bench_db.sh on the export in a call of its own.
# Results in $OUT (MODEL with :,= as _): sweep-MODEL.log (with the sweep's wall time), bench-MODEL.json/.png,
# MODEL.jsonl.gz (the database).
set -uo pipefail
source bench/device/setup.sh
MODEL=$1; S=$2; shift 2
W="--model $MODEL --device cuda $*"
NAME=$(echo "$MODEL" | tr ':,=' '___')
# Fresh caches and an empty database for each run: a database kept in /tmp let a second sweep of one model continue the first.
fresh_caches "$NAME"
DB=sqlite:///$FRESH/$NAME.db
start=$SECONDS
if [ "$S" = default ]; then LIMIT=(); WAIT=${SWEEP_LIMIT_S:-540}; else LIMIT=(--time-budget "$S"); WAIT=$((S + 150)); fi
timeout -s INT "$WAIT" python3 bench/device/tuner_cli.py sweep $W --budget default "${LIMIT[@]}" --db "$DB" 2>&1 | quiet | stamp > "$OUT/sweep-$NAME.log"
echo "sweep wall: $((SECONDS - start)) s (--budget default ${LIMIT[*]})" | tee -a "$OUT/sweep-$NAME.log"
tail -n 25 "$OUT/sweep-$NAME.log"
python3 bench/device/tuner_cli.py db export "$OUT/$NAME.jsonl.gz" --db "$DB" 2>&1 | tail -n 2  # before the bench: kept if it runs out of time
[ "${BENCH:-1}" = 1 ] || exit 0  # BENCH=0: the sweep alone (its wall time against the budget)
timeout "${BENCH_LIMIT_S:-330}" python3 bench/device/tuner_cli.py bench $W --modes "${MODES:-default,freezing-max-autotune,tuned}" --rounds "${ROUNDS:-20}" ${BENCH_FLAGS:-} --db "$DB" \
  --out "$OUT/bench-$NAME.json" 2>&1 | quiet | tail -n 14
