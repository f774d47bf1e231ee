#!/usr/bin/env bash
# Would Inductor options pay on top of an export's stored winners: bench/device/tuned_options.py on it, in one call
# (carry .whl). Usage: bash bench/device/tuned_options.sh EXPORT.jsonl.gz "OPTION..." [workload flags]
#   e.g. MODES=max-autotune,tuned bash bench/device/tuned_options.sh bench/results/h200/X.jsonl.gz \
#     "combo_kernels=true triton.enable_pdl=true" --model hf:gpt2 --mode decode --batch 8 --seq-len 512
set -uo pipefail
source bench/device/setup.sh
EXPORT=$1; OPTIONS=$2; shift 2
fresh_caches options
python3 bench/device/tuner_cli.py db import "$EXPORT" --db sqlite:///$FRESH/stored.db 2>&1 | tail -n 1
ARGS=(); for o in $OPTIONS; do ARGS+=(--option "$o"); done  # each o: KEY=VALUE[;KEY=VALUE...]
timeout "${LIMIT_S:-540}" python3 bench/device/tuned_options.py "$@" --db sqlite:///$FRESH/stored.db "${ARGS[@]}" \
  --modes "${MODES:-max-autotune,tuned}" --rounds "${ROUNDS:-30}" --out "$OUT/options.json" 2>&1 | quiet | tail -n 12
