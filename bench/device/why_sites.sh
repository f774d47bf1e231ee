#!/usr/bin/env bash
# Why do template-site winners that each win at their site gain little in the whole model? One device call (carry
# .whl and .devdata), resnet50 bf16 b32 channels-last, from the shipped databases: the full sweep's (whole check
# 2.048 -> 1.51 ms), its template-site winners alone (.devdata/full-sites.jsonl.gz) and a --budget default sweep's
# (.devdata/s11.jsonl.gz). bench/device/profile_kernels.py gives the device time per kernel and the wall time per
# step under freezing + Inductor's defaults (an empty database) and each database's winners (tuned-kernels: the full
# sweep's without its fusion grouping). Results in $OUT: resnet50-profile.json.
set -uo pipefail
source bench/device/setup.sh
export TUNER_CACHE_DIR=/tmp/tuner-cache
D=/tmp/why; mkdir -p "$D"
W="--model resnet50 --device cuda --dtype bf16 --batch 32 --channels-last"
python3 bench/device/tuner_cli.py db import bench/results/h200/resnet50-bf16-b32-2026-11-30.jsonl.gz --db "sqlite:///$D/full.db" | tail -n 1
for x in full-sites s11; do python3 bench/device/tuner_cli.py db import ".devdata/$x.jsonl.gz" --db "sqlite:///$D/$x.db" | tail -n 1; done
timeout 400 python3 bench/device/profile_kernels.py $W --db "sqlite:///$D/full.db" --also-db "empty=sqlite:///$D/empty.db" \
  --also-db "sites=sqlite:///$D/full-sites.db" --also-db "s11=sqlite:///$D/s11.db" \
  --modes tuned-empty,tuned-sites,tuned-kernels,tuned,tuned-s11 --top 70 \
  --out "$OUT/resnet50-profile.json" 2>&1 | grep -v "^AUTOTUNE\|torch.__trace" | tail -n 75
