#!/usr/bin/env bash
# What does a time-budgeted sweep of one model give, against Inductor's default and freezing + max-autotune in one
# bench run? One call on nvidia-h200 (carry .whl). Usage: bash bench/device/sweep_model.sh MODEL SECONDS [flags]
#   e.g. bash bench/device/sweep_model.sh mobilenet_v3_large 150 --dtype bf16 --batch 32 --channels-last
# BENCH=0 runs the sweep alone. Results in $OUT: sweep-MODEL.log (with the sweep's wall time), bench-MODEL.json/.png, MODEL.jsonl.gz (the database).
set -uo pipefail
source bench/device/setup.sh
export TUNER_CACHE_DIR=/tmp/tuner-cache
MODEL=$1; S=$2; shift 2
W="--model $MODEL --device cuda $*"
DB=sqlite:////tmp/$MODEL.db
quiet() { grep -v "^AUTOTUNE\|^  \|torch.__trace\|SingleProcess\|━━\|│        │" ; }
start=$SECONDS
timeout -s INT $((S + 150)) python3 -m tuner sweep $W --budget default --time-budget "$S" --db "$DB" 2>&1 | quiet > "$OUT/sweep-$MODEL.log"
echo "sweep wall: $((SECONDS - start)) s (--time-budget $S)" | tee -a "$OUT/sweep-$MODEL.log"
tail -n 25 "$OUT/sweep-$MODEL.log"
[ "${BENCH:-1}" = 1 ] || exit 0  # BENCH=0: the sweep alone (its wall time against the budget)
timeout 330 python3 -m tuner bench $W --modes default,freezing-max-autotune,tuned --rounds 20 --db "$DB" \
  --out "$OUT/bench-$MODEL.json" 2>&1 | quiet | tail -n 14
python3 -m tuner db export "$OUT/$MODEL.jsonl.gz" --db "$DB" 2>&1 | tail -n 2
