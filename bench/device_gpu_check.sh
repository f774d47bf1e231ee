#!/usr/bin/env bash
# One device call: the GPU tests, then a quick resnet18 sweep and bench (a smoke run of the whole CUDA path).
# Usage (device tool, carry .whl): bash bench/device_gpu_check.sh
set -uo pipefail
source bench/device_setup.sh
export TUNER_CACHE_DIR=/tmp/tuner-cache
timeout 300 python3 -m pytest -m gpu -q -p no:cacheprovider tests/gpu -rA 2>&1 | tee "$OUT/pytest-gpu.log" | grep -v "^AUTOTUNE\|^  " | tail -60
DB=sqlite:////tmp/r18.db
W="--model resnet18 --device cuda --dtype bf16 --batch 32 --channels-last"
timeout 200 python3 -m tuner sweep $W --budget quick --time-budget 120 --db $DB 2>&1 | tee "$OUT/sweep-r18.log" | grep -v "^AUTOTUNE\|^  " | tail -40
timeout 150 python3 -m tuner bench $W --modes eager,default,tuned --rounds 10 --db $DB --out "$OUT/bench-r18.json" 2>&1 | tail -15
tar czf "$OUT/logs.tgz" -C "$TUNER_CACHE_DIR" logs 2>/dev/null; ls "$OUT"
