#!/usr/bin/env bash
# What does a sweep's capture cost, item by item, at two revisions of tuner? Each revision's capture of a small MLP
# on the CPU, interleaved, N times (a --time-budget 12 sweep each: the capture line is what is read).
# Usage: bash bench/cpu/capture_cost.sh REV_A REV_B [N]   (checks out each revision in this work tree, then main)
set -uo pipefail
cd "$(dirname "$0")/../.."
A=$1; B=$2; N=${3:-3}
folder=$(mktemp -d)
for _ in $(seq "$N"); do
  for rev in "$A" "$B"; do
    git checkout -q "$rev" || exit 1
    line=$(TUNER_CACHE_DIR="$folder" timeout 120 tuner sweep --model tests.helpers.models:mlp --input-shape 16,64 --device cpu \
      --threads 2 --budget quick --trials 1 --time-budget 12 --db "sqlite:///$folder/$RANDOM.db" 2>&1 | tr '\n' ' ' | tr -s ' ' \
      | grep -o "capture: [0-9]* s ([^)]*)")
    echo "$(git rev-parse --short HEAD) $line"
  done
done
git checkout -q main
