#!/usr/bin/env bash
# The H200 acceptance runs of issues #3 (GPU tuning) and #4 (fusion groupings) on nvidia-h200-x2, one phase per
# device call (a call may last 10 minutes; freezing + max-autotune alone compiles resnet50 for about 5). The
# databases live in .devdata/ (git-ignored): carry it, or find it there on a machine still warm from the last call.
#   bash bench/device_h200.sh sweep   GPU 0: resnet50 bf16 b32 channels-last sweep, --budget default, time budget R50_S
#                                     GPU 1: pytest -m gpu (PYTEST_K selects), then vit_b_16 bf16 b32 (VIT_S) and
#                                            resnet18 bf16 b32 training-step (R18_S) sweeps
#                                     A second run continues every study where the first stopped.
#   bash bench/device_h200.sh bench   GPU 0: one resnet50 tuner bench: eager, default, freezing + max-autotune,
#                                            tuned-kernels, tuned
#                                     GPU 1: (RESUME_VIT_S > 0: the vit_b_16 sweep continued first), then vit_b_16 and
#                                            resnet18-training benches: default, tuned-kernels, tuned
#   bash bench/device_h200.sh check   GPU 0: pytest -m gpu; GPU 1: the vit_b_16 sweep continued (VIT_S)
set -uo pipefail
source bench/device_setup.sh
export TUNER_CACHE_DIR=/tmp/tuner-cache
D=$PWD/.devdata; mkdir -p "$D"
R50="--model resnet50 --device cuda --dtype bf16 --batch 32 --channels-last"
VIT="--model vit_b_16 --device cuda --dtype bf16 --batch 32"
R18="--model resnet18 --device cuda --dtype bf16 --batch 32 --channels-last --mode train"
R50_S=${R50_S:-480}; VIT_S=${VIT_S:-170}; R18_S=${R18_S:-0}; PYTEST_K=${PYTEST_K:-}
quiet() { grep -v "^AUTOTUNE\|^  \|torch.__trace\|SingleProcess\|━━" ; }
sweep() {  # sweep NAME SECONDS WORKLOAD...
  local name=$1 s=$2; shift 2
  timeout -s INT $((s + 70)) python3 -m tuner sweep "$@" --budget default --time-budget "$s" --db "sqlite:///$D/$name.db" 2>&1 | quiet
}
case "${1:-}" in
sweep)
  (
    CUDA_VISIBLE_DEVICES=1 timeout 330 python3 -m pytest -m gpu -q -p no:cacheprovider tests/gpu -rA --durations=0 ${PYTEST_K:+-k "$PYTEST_K"} \
      2>&1 | grep -v "torch.__trace\|^AUTOTUNE\|^  " > "$OUT/pytest-gpu.log"
    [ "$VIT_S" -gt 0 ] && CUDA_VISIBLE_DEVICES=1 sweep vit "$VIT_S" $VIT > "$OUT/sweep-vit.log"
    [ "$R18_S" -gt 0 ] && CUDA_VISIBLE_DEVICES=1 sweep r18-train "$R18_S" $R18 > "$OUT/sweep-r18-train.log"
  ) &
  [ "$R50_S" -gt 0 ] && CUDA_VISIBLE_DEVICES=0 sweep r50 "$R50_S" $R50 | tee "$OUT/sweep-r50.log" | grep -v "│        │" | tail -40
  wait
  tail -3 "$OUT/pytest-gpu.log"; tail -n 12 "$OUT"/sweep-vit.log "$OUT"/sweep-r18-train.log 2>/dev/null
  ;;
bench)
  ls "$D"/r50.db "$D"/vit.db || exit 3
  (
    [ -n "$PYTEST_K" ] && CUDA_VISIBLE_DEVICES=1 timeout 120 python3 -m pytest -m gpu -q -p no:cacheprovider tests/gpu -rA \
      -k "$PYTEST_K" 2>&1 | grep -v "torch.__trace\|^AUTOTUNE\|^  " > "$OUT/pytest-gpu.log"
    [ "${RESUME_VIT_S:-0}" -gt 0 ] && CUDA_VISIBLE_DEVICES=1 sweep vit "$RESUME_VIT_S" $VIT > "$OUT/sweep-vit-resumed.log"
    CUDA_VISIBLE_DEVICES=1 timeout 150 python3 -m tuner bench $VIT --modes default,tuned-kernels,tuned --rounds 30 \
      --db "sqlite:///$D/vit.db" --out "$OUT/bench-vit.json" 2>&1 | quiet > "$OUT/bench-vit.log"
    [ -f "$D/r18-train.db" ] && CUDA_VISIBLE_DEVICES=1 timeout 150 python3 -m tuner bench $R18 --modes default,tuned-kernels,tuned \
      --rounds 30 --db "sqlite:///$D/r18-train.db" --out "$OUT/bench-r18-train.json" 2>&1 | quiet > "$OUT/bench-r18-train.log"
  ) &
  CUDA_VISIBLE_DEVICES=0 timeout 520 python3 -m tuner bench $R50 --modes eager,default,freezing-max-autotune,tuned-kernels,tuned \
    --rounds 30 --db "sqlite:///$D/r50.db" --out "$OUT/bench-resnet50.json" 2>&1 | quiet | tail -20
  wait
  tail -n 3 "$OUT"/pytest-gpu.log 2>/dev/null; tail -n 12 "$OUT"/sweep-vit-resumed.log "$OUT/bench-vit.log" "$OUT/bench-r18-train.log" 2>/dev/null
  ;;
check)  # the GPU test suite on GPU 0 while GPU 1 continues the vit_b_16 sweep (its whole-workload check included)
  CUDA_VISIBLE_DEVICES=1 sweep vit "${VIT_S}" $VIT > "$OUT/sweep-vit-check.log" &
  CUDA_VISIBLE_DEVICES=0 timeout 330 python3 -m pytest -m gpu -q -p no:cacheprovider tests/gpu -rA --durations=0 2>&1 \
    | grep -v "torch.__trace\|^AUTOTUNE\|^  " > "$OUT/pytest-gpu.log"
  wait
  tail -n 14 "$OUT/pytest-gpu.log"; grep -v "│        │" "$OUT/sweep-vit-check.log" | tail -n 30
  ;;
*) echo "usage: $0 sweep|bench|check"; exit 2 ;;
esac
for f in "$D"/*.db; do python3 -c "import sqlite3,sys; sqlite3.connect(sys.argv[1]).execute(\"VACUUM INTO '\" + sys.argv[2] + \"'\")" "$f" "$OUT/$(basename "$f")"; done
tar czf "$OUT/logs.tgz" -C "$TUNER_CACHE_DIR" logs 2>/dev/null
ls -la "$OUT"
