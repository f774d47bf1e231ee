#!/usr/bin/env bash
# The batch table: does a database swept at one batch size serve others? Two steps, one device call each
# (carry .whl and .devdata with the source database, e.g. .devdata/resnet50-default.db: resnet50's --budget default
# sweep at batch 32).
#   SWEEP: bash bench/device/batch_transfer.sh sweep MODEL "8 128" SECONDS --dtype bf16 --channels-last
#          one time-budgeted sweep per batch, each from an empty database and fresh caches -> $OUT/MODEL-bB.db + log
#   BENCH: bash bench/device/batch_transfer.sh bench MODEL B SOURCE.db --dtype bf16 --channels-last
#          one bench run at batch B: Inductor's default, freezing + max-autotune (its cold compile measured), tuned
#          from SOURCE.db (answers transferred from other sizes), tuned-strict (exact entries only) and, when the
#          sweep step left /tmp/MODEL-bB.db (or .devdata has it), tuned-bB: that batch's own sweep -> $OUT/bench-MODEL-bB.json
set -uo pipefail
source bench/device/setup.sh
STEP=$1; MODEL=$2
if [ "$STEP" = sweep ]; then
  BATCHES=$3; S=$4; shift 4
  for B in $BATCHES; do
    DB=/tmp/$MODEL-b$B.db; rm -f "$DB"
    export TUNER_CACHE_DIR=/tmp/fresh-b$B/tuner TORCHINDUCTOR_CACHE_DIR=/tmp/fresh-b$B/inductor TRITON_CACHE_DIR=/tmp/fresh-b$B/triton
    start=$SECONDS
    timeout -s INT $((S * 11 / 10 + 30)) python3 bench/device/tuner_cli.py sweep --model "$MODEL" --device cuda --batch "$B" "$@" \
      --budget default --time-budget "$S" --db "sqlite:///$DB" 2>&1 | quiet | stamp > "$OUT/sweep-$MODEL-b$B.log"
    echo "sweep wall: $((SECONDS - start)) s (--time-budget $S, batch $B)" | tee -a "$OUT/sweep-$MODEL-b$B.log"
    grep -E "done:|won|unfrozen" "$OUT/sweep-$MODEL-b$B.log" | tail -n 6
    cp "$DB" "$OUT/"
  done
  exit 0
fi
B=$3; SRC=$4; shift 4
cp "$SRC" /tmp/source.db && chmod u+w /tmp/source.db
OWN=/tmp/$MODEL-b$B.db; [ -f "$OWN" ] || { [ -f ".devdata/$MODEL-b$B.db" ] && cp ".devdata/$MODEL-b$B.db" "$OWN" && chmod u+w "$OWN"; }
ALSO=(); [ -f "$OWN" ] && ALSO=(--also-db "b$B=sqlite:///$OWN")
export TUNER_CACHE_DIR=/tmp/bench-cache-b$B
timeout "${BENCH_LIMIT:-590}" python3 bench/device/tuner_cli.py bench --model "$MODEL" --device cuda --batch "$B" "$@" \
  --modes default,freezing-max-autotune,tuned,tuned-strict "${ALSO[@]}" --rounds 20 --db "sqlite:////tmp/source.db" \
  --out "$OUT/bench-$MODEL-b$B.json" 2>&1 | quiet | tail -n 16
