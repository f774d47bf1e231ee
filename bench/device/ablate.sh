#!/usr/bin/env bash
# What is each lever's share of tuned's gain on a GPU? One bench run of a stored database with `--ablate` (tuned, and
# tuned with each winner group, each stored rewrite and CUDA graphs left to Inductor), beside the Inductor modes in MODES.
# Winners are kept per device model, so the call names one export per card and runs the one measured on the card it
# got. Carry .whl (and .whl-hf for hf: models). Usage:
#   MODES=max-autotune,reduce-overhead,tuned-reduce-overhead bash bench/device/ablate.sh H200_EXPORT H100_EXPORT \
#     hf:gpt2 --mode decode --dtype bf16 --batch 8 --seq-len 512
# Results in $OUT: bench-MODEL.json/.png (bench/device/bench_db.sh).
set -uo pipefail
H200=$1; H100=$2; shift 2
CARD=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)
case "$CARD" in
  *H200*) EXPORT=$H200 ;;
  *H100*) EXPORT=$H100 ;;
  *) echo "no export measured on $CARD"; exit 1 ;;
esac
echo "card: $CARD; export: $EXPORT"
MODES=${MODES:-freezing-reduce-overhead} EMPTY=0 bash bench/device/bench_db.sh "$EXPORT" "$@" --ablate
