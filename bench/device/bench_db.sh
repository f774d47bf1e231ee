#!/usr/bin/env bash
# One bench run of a stored database (an export under bench/results, or one a previous call brought back), for when a
# sweep and its bench do not fit one call (a training step's max-autotune compile alone can take minutes). By default
# the modes split a tuned compile by kind of answer (hf:gpt2 on the H200, tuned 9-12% slower than the
# default while its sweep measured 1.00-1.04x): Inductor's default, `freezing` (its defaults, frozen: what tuned starts
# from), tuned, tuned-no-kernels (every answer but the Triton kernel configs), tuned-kernels (no fusion grouping) and
# tuned from an empty database (tuner's compile path, no answer). Carry .whl. Usage:
#   bash bench/device/bench_db.sh EXPORT.jsonl.gz MODEL [workload flags]
#   e.g. bash bench/device/bench_db.sh bench/results/h200/hf_gpt2-240-2026-12-02-2.jsonl.gz hf:gpt2 --dtype bf16 --batch 8 --seq-len 512
#   MODES=default,max-autotune-no-cudagraphs,tuned EMPTY=0 bash bench/device/bench_db.sh DB.jsonl.gz resnet50 --mode train ...
set -uo pipefail
source bench/device/setup.sh
EXPORT=$1; MODEL=$2; shift 2
NAME=$(echo "$MODEL" | tr ':,=' '___')
fresh_caches "bench-$NAME"  # each mode's compile time as a first compile's, whatever ran on this machine before
# A bench of an export that did not arrive (a path the call did not carry) would time tuned from an empty database.
python3 bench/device/tuner_cli.py db import "$EXPORT" --db sqlite:///$FRESH/stored.db > "$FRESH/import.log" 2>&1 || { tail -n 2 "$FRESH/import.log"; exit 1; }
tail -n 1 "$FRESH/import.log"
ALSO=()
if [ "${EMPTY:-1}" = 1 ]; then
  python3 -c "from tuner.db import Database; Database.open('sqlite:///$FRESH/empty.db').close()"
  ALSO=(--also-db empty=sqlite:///$FRESH/empty.db)
fi
timeout "${LIMIT_S:-540}" python3 bench/device/tuner_cli.py bench --model "$MODEL" --device cuda "$@" --rounds "${ROUNDS:-40}" \
  --modes "${MODES:-default,freezing,tuned,tuned-no-kernels,tuned-kernels}" "${ALSO[@]}" \
  --db sqlite:///$FRESH/stored.db --out "$OUT/bench-$NAME.json" 2>&1 | quiet | tail -n 16
