#!/usr/bin/env bash
# Issue-2 acceptance on a CPU machine: a quick sweep of resnet50 (fp32, batch 1), then eager, Inductor default,
# freezing + max-autotune and tuned, compiled with fresh caches and timed interleaved in one process.
# Usage: bash bench/cpu/resnet50.sh [DB_URL]
set -euo pipefail
cd "$(dirname "$0")/../.."
DB=${1:-sqlite:///$PWD/bench/results/cpu-xeon-2c/resnet50.db}
tuner sweep --model resnet50 --device cpu --batch 1 --budget quick --db "$DB" 2>&1 | grep -v "━━"
tuner bench --model resnet50 --device cpu --batch 1 --rounds 60 --db "$DB" \
  --modes eager,default,freezing-max-autotune,tuned --out bench/results/cpu-xeon-2c/resnet50-fp32-b1-$(date +%F).json 2>&1 | grep -v "AUTOTUNE\|^  \|strides:\|dtypes:\|SingleProcess"
