#!/usr/bin/env bash
# Does timing template-site choices as CUDA-graph replays (TUNER_SITE_TIMING=cudagraph) pick better winners?
# One call on nvidia-h200-x2 (about 8 minutes; carry .whl). `pytest -m gpu` needs a call of its own
# (bench/device/gpu_tests.sh, about 4 minutes):
#   1. bench/device/extern_timing.py: torch.addmm at vit's and resnet50's GEMM shapes, timed as a site times it, as a
#      CUDA graph, and back to back; which of the hooks this torch has
#   2. the same vit_b_16 bf16 b32 sweep (template sites and kernels, no fusion groupings, SWEEP_S seconds) twice
#      from empty databases, one per GPU: GPU 0 with Inductor's timing, GPU 1 with CUDA-graph replays
#   3. one bench run: Inductor's default against both databases' winners (modes tuned and tuned-graph; the
#      whole-workload check may have reverted some, which the sweep logs say)
# Results in $OUT: extern-timing.json, bench-vit-site-timing.json/.png and the sweep logs.
set -uo pipefail
source bench/device/setup.sh
export TUNER_CACHE_DIR=/tmp/tuner-cache
D=$PWD/.devdata; mkdir -p "$D"
VIT="--model vit_b_16 --device cuda --dtype bf16 --batch 32"
SWEEP_S=${SWEEP_S:-180}

CUDA_VISIBLE_DEVICES=0 timeout 120 python3 bench/device/extern_timing.py --out "$OUT/extern-timing.json" 2>&1 | tail -n 12

rm -f "$D/vit-launch.db" "$D/vit-graph.db"
for t in launch graph; do
  gpu=$([ $t = launch ] && echo 0 || echo 1); timing=$([ $t = launch ] && echo launch || echo cudagraph)
  CUDA_VISIBLE_DEVICES=$gpu TUNER_SITE_TIMING=$timing timeout -s INT $((SWEEP_S + 120)) python3 bench/device/tuner_cli.py sweep $VIT \
    --budget default --no-fusion --time-budget "$SWEEP_S" --db "sqlite:///$D/vit-$t.db" 2>&1 | quiet > "$OUT/sweep-vit-$t.log" &
done
wait
for t in launch graph; do echo "== sweep $t"; grep -v "│        │" "$OUT/sweep-vit-$t.log" | tail -n 12; done

CUDA_VISIBLE_DEVICES=0 timeout 180 python3 bench/device/tuner_cli.py bench $VIT --modes default,tuned --rounds 30 \
  --db "sqlite:///$D/vit-launch.db" --also-db "graph=sqlite:///$D/vit-graph.db" \
  --out "$OUT/bench-vit-site-timing.json" 2>&1 | quiet | tail -n 12
