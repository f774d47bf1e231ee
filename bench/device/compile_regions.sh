#!/usr/bin/env bash
# Where does max-autotune's compile spend its time, workload by workload? (For the estimate of that compile,
# tuner/budget/estimate.py, which is under on every LLM prefill.) One `tuner bench` of freezing + max-autotune alone
# per workload, fresh caches, each mode's record holding Inductor's own timers (`compile_regions`). One call on
# nvidia-h200 (carry .whl, and .whl-hf for hf: models). Usage: bash bench/device/compile_regions.sh "MODEL FLAGS" ...
#   e.g. bash bench/device/compile_regions.sh "vit_b_32 --dtype bf16 --batch 32" "hf:qwen2,... --dtype bf16 --batch 8 --seq-len 512"
# LIMIT_S: each bench's time limit (300). Results in $OUT: regions-MODEL.json (MODEL with :,= as _).
set -uo pipefail
source bench/device/setup.sh
for W in "$@"; do
  read -r MODEL FLAGS <<< "$W"
  NAME=$(echo "$MODEL" | tr ':,=' '___')
  fresh_caches "regions-$NAME"
  # shellcheck disable=SC2086
  timeout "${LIMIT_S:-300}" python3 bench/device/tuner_cli.py bench --model "$MODEL" --device cuda $FLAGS --modes freezing-max-autotune \
    --rounds 3 --db "sqlite:///$FRESH/none.db" --out "$OUT/regions-$NAME.json" 2>&1 | quiet | tail -n 4
  python3 -c "import json, sys; r = json.load(open(sys.argv[1]))['results']['freezing-max-autotune']
print(sys.argv[2], 'compile', r['compile_s'], 's'); [print(f'  {k}: {v[0]} s, {v[1]} times') for k, v in list(r['compile_regions'].items())[:25]]" "$OUT/regions-$NAME.json" "$NAME"
done
