#!/usr/bin/env bash
# What a sweep costs and what it reaches: time-budgeted sweeps of one model, each from an empty database and fresh
# caches (Inductor, Triton, tuner), then (BENCH=1) one bench run of all their databases against Inductor's default
# and freezing + max-autotune, whose compile time is measured there, cold. One device call each (carry .whl and, for
# the bench, .devdata with the sweeps' databases).
#   SWEEP: bash bench/device/sweep_cost.sh sweep MODEL "60 120" --dtype bf16 --batch 32 --channels-last
#   BENCH: bash bench/device/sweep_cost.sh bench MODEL "60 120" --dtype bf16 --batch 32 --channels-last
# A budget of "default" is the --budget default sweep with no time budget (stopped with Ctrl-C after DEFAULT_LIMIT s).
# Results in $OUT (few files: the device tool brings back at most 8): MODEL-S.db and MODEL-S.tgz (sweep-MODEL-S.log,
# its wall time on the last line, MODEL-S.stats.json and the workers' logs), bench-MODEL.json/.png.
# bench/analysis/sweep_cost.py turns them into bench/results/<device>/MODEL-sweep-cost.json and its PNG.
set -uo pipefail
source bench/device/setup.sh
STEP=$1; MODEL=$2; BUDGETS=$3; shift 3
W="--model $MODEL --device cuda $*"
if [ "$STEP" = sweep ]; then
  for S in $BUDGETS; do
    DB=/tmp/$MODEL-$S.db; rm -f "$DB"
    export TUNER_CACHE_DIR=/tmp/fresh-$MODEL-$S/tuner TORCHINDUCTOR_CACHE_DIR=/tmp/fresh-$MODEL-$S/inductor TRITON_CACHE_DIR=/tmp/fresh-$MODEL-$S/triton
    if [ "$S" = default ]; then LIMIT=${DEFAULT_LIMIT:-540}; TB=(); else LIMIT=$((S * 11 / 10 + 30)); TB=(--time-budget "$S"); fi
    start=$(date +%s.%N)
    timeout -s INT "$LIMIT" python3 bench/device/tuner_cli.py sweep $W --budget default "${TB[@]}" --db "sqlite:///$DB" 2>&1 | quiet | stamp > "$OUT/sweep-$MODEL-$S.log"
    wall=$(python3 -c "import time; print(f'{time.time() - $start:.1f}')")
    echo "sweep wall: $wall s (--time-budget $S)" | tee -a "$OUT/sweep-$MODEL-$S.log"
    grep -E "deadline|ends by|done:|budget" "$OUT/sweep-$MODEL-$S.log" | head -12
    python3 bench/device/tuner_cli.py db stats --json --db "sqlite:///$DB" > "$OUT/$MODEL-$S.stats.json"
    cp "$DB" "$OUT/$MODEL-$S.db"
    cp -r "$TUNER_CACHE_DIR/logs" "$OUT/logs-$MODEL-$S" 2>/dev/null
    (cd "$OUT" && tar czf "$MODEL-$S.tgz" "sweep-$MODEL-$S.log" "$MODEL-$S.stats.json" "logs-$MODEL-$S" 2>/dev/null && rm -r "sweep-$MODEL-$S.log" "$MODEL-$S.stats.json" "logs-$MODEL-$S")
  done
  exit 0
fi
ALSO=()
for S in $BUDGETS; do
  DB=/tmp/$MODEL-$S.db; [ -f "$DB" ] || { cp ".devdata/$MODEL-$S.db" "$DB" && chmod u+w "$DB"; }
  ALSO+=(--also-db "s$S=sqlite:///$DB")
done
export TUNER_CACHE_DIR=/tmp/bench-cache
timeout "${BENCH_LIMIT:-590}" python3 bench/device/tuner_cli.py bench $W --modes default,freezing-max-autotune "${ALSO[@]}" --rounds 20 --db "sqlite:////tmp/none.db" \
  --out "$OUT/bench-$MODEL.json" 2>&1 | quiet | tail -n 14
