set -uo pipefail
source bench/device/setup.sh
export TUNER_CACHE_DIR=/tmp/tuner-cache
D=/tmp/why; mkdir -p "$D"
python3 bench/device/tuner_cli.py db import bench/results/h200/resnet50-bf16-b32-2026-11-30.jsonl.gz --db "sqlite:///$D/full.db" | tail -n 1
python3 bench/device/tuner_cli.py db import bench/results/h200/resnet50-default-2026-12-01.jsonl.gz --db "sqlite:///$D/s10.db" | tail -n 1
timeout 480 python3 bench/device/graph_levers.py --model resnet50 --dtype bf16 --batch 32 --channels-last \
  --db "empty=sqlite:///$D/empty.db" --db "full=sqlite:///$D/full.db" --db "s10=sqlite:///$D/s10.db" \
  --out "$OUT/resnet50-graph-levers.json" 2>&1 | grep -v "^AUTOTUNE\|torch.__trace\|^  " | tail -n 30
