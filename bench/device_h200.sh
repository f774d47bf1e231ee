#!/usr/bin/env bash
# The H200 acceptance runs of issues #3 (GPU tuning) and #4 (fusion groupings) on nvidia-h200-x2, one phase per
# device call (a call may last 10 minutes). The databases live in .devdata/ (git-ignored): carry it.
#   bash bench/device_h200.sh full    both GPUs: the full resnet50 bf16 b32 channels-last sweep from an empty
#                                     database (r50-full.db), --budget default, no time budget, --workers 2; its
#                                     wall time is the figure (a cut at FULL_S seconds keeps every trial: rerun)
#   bash bench/device_h200.sh rest    GPU 0: vit_b_16 bf16 b32 sweep continued (VIT_S), then its bench and a
#                                            kernel profile: default vs the winners the sweep's whole-workload
#                                            check had not yet seen
#                                     GPU 1: the resnet18 bf16 training-step sweep continued (R18_S), then its bench
#   bash bench/device_h200.sh final   GPU 0: the full resnet50 sweep continued (no time budget), then a bench of
#                                            its database: default, tuned-kernels, tuned
#                                     GPU 1: pytest -m gpu
set -uo pipefail
source bench/device_setup.sh
export TUNER_CACHE_DIR=/tmp/tuner-cache
D=$PWD/.devdata; mkdir -p "$D"
R50="--model resnet50 --device cuda --dtype bf16 --batch 32 --channels-last"
VIT="--model vit_b_16 --device cuda --dtype bf16 --batch 32"
R18="--model resnet18 --device cuda --dtype bf16 --batch 32 --channels-last --mode train"
FULL_S=${FULL_S:-550}; VIT_S=${VIT_S:-240}; R18_S=${R18_S:-150}
quiet() { grep -v "^AUTOTUNE\|^  \|torch.__trace\|SingleProcess\|━━" ; }
sweep() {  # sweep NAME SECONDS WORKLOAD...
  local name=$1 s=$2; shift 2
  timeout -s INT $((s + 90)) python3 -m tuner sweep "$@" --budget default --time-budget "$s" --db "sqlite:///$D/$name.db" 2>&1 | quiet
}
bench() {  # bench NAME SECONDS MODES WORKLOAD...
  local name=$1 s=$2 modes=$3; shift 3
  timeout "$s" python3 -m tuner bench "$@" --modes "$modes" --rounds 30 --db "sqlite:///$D/$name.db" --out "$OUT/bench-$name.json" 2>&1 | quiet
}
case "${1:-}" in
full)
  rm -f "$D/r50-full.db"
  start=$(date +%s.%N)
  timeout -s INT "$FULL_S" python3 -m tuner sweep $R50 --budget default --workers 2 --db "sqlite:///$D/r50-full.db" 2>&1 \
    | quiet > "$OUT/sweep-r50-full.log"
  echo "rc $? wall $(python3 -c "import sys,time; print(round(time.time()-float(sys.argv[1]),1))" "$start") s" | tee -a "$OUT/sweep-r50-full.log"
  grep -v "│        │" "$OUT/sweep-r50-full.log" | tail -n 25
  ;;
rest)
  (
    CUDA_VISIBLE_DEVICES=1 sweep r18-train "$R18_S" $R18 > "$OUT/sweep-r18-train.log"
    CUDA_VISIBLE_DEVICES=1 bench r18-train 110 default,tuned-kernels,tuned $R18 > "$OUT/bench-r18-train.log"
  ) &
  cp "$D/vit.db" "$D/vit-before.db"
  CUDA_VISIBLE_DEVICES=0 sweep vit "$VIT_S" $VIT > "$OUT/sweep-vit.log"
  CUDA_VISIBLE_DEVICES=0 bench vit 110 default,tuned-kernels,tuned $VIT > "$OUT/bench-vit.log"
  CUDA_VISIBLE_DEVICES=0 timeout 120 python3 bench/profile_kernels.py $VIT --db "sqlite:///$D/vit-before.db" \
    --modes default,tuned --out "$OUT/profile-vit-before.json" 2>&1 | quiet | tail -n 32 > "$OUT/profile-vit.log"
  wait
  for f in sweep-vit bench-vit profile-vit sweep-r18-train bench-r18-train; do echo "== $f"; grep -v "│        │" "$OUT/$f.log" | tail -n 14; done
  ;;
final)
  (
    start=$(date +%s.%N)  # the full resnet50 sweep continued where the time limit of the `full` call cut it
    CUDA_VISIBLE_DEVICES=0 timeout -s INT 300 python3 -m tuner sweep $R50 --budget default --db "sqlite:///$D/r50-full.db" 2>&1 \
      | quiet > "$OUT/sweep-r50-full-2.log"
    echo "rc $? wall $(python3 -c "import sys,time; print(round(time.time()-float(sys.argv[1]),1))" "$start") s" >> "$OUT/sweep-r50-full-2.log"
    CUDA_VISIBLE_DEVICES=0 bench r50-full 110 default,tuned-kernels,tuned $R50 > "$OUT/bench-r50-full.log"
  ) &
  CUDA_VISIBLE_DEVICES=1 timeout 290 python3 -m pytest -m gpu -q -p no:cacheprovider tests/gpu -rA --durations=0 2>&1 \
    | grep -v "torch.__trace\|^AUTOTUNE\|^  " > "$OUT/pytest-gpu.log"
  wait
  tail -n 14 "$OUT/pytest-gpu.log"; for f in sweep-r50-full-2 bench-r50-full; do echo "== $f"; grep -v "│        │" "$OUT/$f.log" | tail -n 16; done
  ;;
*) echo "usage: $0 full|rest|final"; exit 2 ;;
esac
mkdir -p "$OUT/db"
for f in "$D"/*.db; do python3 -c "import sqlite3,sys; sqlite3.connect(sys.argv[1]).execute(\"VACUUM INTO '\" + sys.argv[2] + \"'\")" "$f" "$OUT/db/$(basename "$f")"; done
tar czf "$OUT/data.tgz" -C "$OUT" db -C "$TUNER_CACHE_DIR" logs 2>/dev/null && rm -rf "$OUT/db"
ls -la "$OUT"
