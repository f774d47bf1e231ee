#!/usr/bin/env bash
# Why do template-site winners that each win at their site gain little in the whole model? One device call (carry
# .whl), resnet50 bf16 b32 channels-last, from two shipped databases: the full sweep's (whole check 2.048 -> 1.51 ms)
# and session 10's --budget default sweep (2.064 -> 1.986 ms).
#   1. bench/device/profile_kernels.py: device time per kernel under freezing + Inductor's defaults (an empty
#      database), each database's winners, and the full sweep's without its fusion grouping
#   2. the GPU tests of site-batch timing (at the site, deferred, as CUDA-graph replays)
# Results in $OUT: resnet50-profile.json, pytest-site.log.
set -uo pipefail
source bench/device/setup.sh
export TUNER_CACHE_DIR=/tmp/tuner-cache
D=/tmp/why; mkdir -p "$D"
W="--model resnet50 --device cuda --dtype bf16 --batch 32 --channels-last"
python3 -m tuner db import bench/results/h200/resnet50-bf16-b32.jsonl.gz --db "sqlite:///$D/full.db" | tail -n 1
python3 -m tuner db import bench/results/h200/resnet50-default-s10.jsonl.gz --db "sqlite:///$D/s10.db" | tail -n 1
timeout 300 python3 bench/device/profile_kernels.py $W --db "sqlite:///$D/full.db" --also-db "s10=sqlite:///$D/s10.db" \
  --also-db "empty=sqlite:///$D/empty.db" --modes tuned-empty,tuned,tuned-kernels,tuned-s10 --top 80 \
  --out "$OUT/resnet50-profile.json" 2>&1 | grep -v "^AUTOTUNE\|torch.__trace" | tail -n 90
timeout 200 python3 -m pytest -m gpu -q -p no:cacheprovider tests/gpu/test_cuda_path.py -k site_batch -rA 2>&1 \
  | grep -v "torch.__trace\|^AUTOTUNE\|^  " | tee "$OUT/pytest-site.log" | tail -n 15
