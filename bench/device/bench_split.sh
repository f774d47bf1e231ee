#!/usr/bin/env bash
# Which kind of answer, or freezing itself, makes a tuned compile slower than Inductor's default? One bench run of a
# stored database (an export under bench/results) split by kind (issue 15: hf:gpt2 on the H200, tuned 9-12% slower
# than the default while its sweep measured 1.00-1.04x): Inductor's default, `freezing` (its defaults, frozen: what
# tuned starts from), tuned, tuned-no-kernels (every answer but the Triton kernel configs), tuned-kernels (no fusion
# grouping) and tuned from an empty database (tuner's compile path, no answer). Carry .whl. Usage:
#   bash bench/device/bench_split.sh EXPORT.jsonl.gz MODEL [workload flags]
#   e.g. bash bench/device/bench_split.sh bench/results/h200/hf_gpt2-240-s17b.jsonl.gz hf:gpt2 --dtype bf16 --batch 8 --seq-len 512
set -uo pipefail
source bench/device/setup.sh
export TUNER_CACHE_DIR=/tmp/tuner-cache
EXPORT=$1; MODEL=$2; shift 2
NAME=$(echo "$MODEL" | tr ':,=' '___')
python3 -m tuner db import "$EXPORT" --db sqlite:////tmp/split.db 2>&1 | tail -n 1
python3 -c "from tuner.db import Database; Database.open('sqlite:////tmp/empty.db').close()"
timeout "${LIMIT_S:-420}" python3 -m tuner bench --model "$MODEL" --device cuda "$@" --rounds "${ROUNDS:-40}" \
  --modes default,freezing,tuned,tuned-no-kernels,tuned-kernels --also-db empty=sqlite:////tmp/empty.db \
  --db sqlite:////tmp/split.db --out "$OUT/split-$NAME.json" 2>&1 | quiet | tail -n 16
