#!/usr/bin/env bash
# The resnet50 story on the H200 (bf16, batch 32, channels_last, inference), in two device calls, since one call
# may last 10 minutes and freezing + max-autotune alone compiles for about 6:
#   bash bench/device_resnet50.sh sweep   (nvidia-h200-x2; carry .whl) one-GPU sweep on GPU 0 while GPU 1 runs the
#                                          GPU tests and the sample-efficiency measurement; then a two-GPU sweep
#                                          (--workers 2). Writes r50-1gpu.db, r50-2gpu.db, logs, sample-eff.json.
#   bash bench/device_resnet50.sh bench   (nvidia-h200; carry .whl and .devdata holding those two databases)
#                                          eager / default / freezing + max-autotune / tuned (1 GPU) / tuned-2gpu,
#                                          one tuner bench run -> bench-resnet50.json/.png
set -uo pipefail
source bench/device_setup.sh
export TUNER_CACHE_DIR=/tmp/tuner-cache
W="--model resnet50 --device cuda --dtype bf16 --batch 32 --channels-last"
SEARCH_S=${SEARCH_S:-180}
quiet() { grep -v "^AUTOTUNE\|^  \|torch.__trace\|SingleProcess" ; }
vacuum() { python3 -c "import sqlite3,sys; sqlite3.connect(sys.argv[1]).execute(\"VACUUM INTO '\" + sys.argv[2] + \"'\")" "$1" "$2"; }
case "${1:-}" in
sweep)
  (
    CUDA_VISIBLE_DEVICES=1 timeout 170 python3 -m pytest -m gpu -q -p no:cacheprovider tests/gpu -rA -k "sweep_then or illegal" 2>&1 | quiet | tail -30
    CUDA_VISIBLE_DEVICES=1 timeout 230 python3 bench/sample_efficiency.py measure $W --kernels 12 --time-limit 170 --out "$OUT/sample-eff.json"
  ) > "$OUT/side.log" 2>&1 &
  CUDA_VISIBLE_DEVICES=0 timeout -s INT 280 python3 -m tuner sweep $W --budget default --time-budget "$SEARCH_S" --db sqlite:////tmp/r50-1gpu.db 2>&1 | quiet | tee "$OUT/sweep-1gpu.log" | tail -12
  wait
  timeout -s INT 280 python3 -m tuner sweep $W --budget default --time-budget "$SEARCH_S" --workers 2 --db sqlite:////tmp/r50-2gpu.db 2>&1 | quiet | tee "$OUT/sweep-2gpu.log" | tail -12
  vacuum /tmp/r50-1gpu.db "$OUT/r50-1gpu.db"; vacuum /tmp/r50-2gpu.db "$OUT/r50-2gpu.db"
  tar czf "$OUT/logs.tgz" -C "$TUNER_CACHE_DIR" logs 2>/dev/null
  ;;
bench)
  timeout 560 python3 -m tuner bench $W --modes eager,default,freezing-max-autotune,tuned --rounds 30 \
    --db sqlite:///$PWD/.devdata/r50-1gpu.db --also-db 2gpu=sqlite:///$PWD/.devdata/r50-2gpu.db \
    --out "$OUT/bench-resnet50.json" 2>&1 | quiet | tail -20
  ;;
*) echo "usage: $0 sweep|bench"; exit 2 ;;
esac
ls -la "$OUT"
