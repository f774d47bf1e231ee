#!/usr/bin/env bash
# Sweep on this environment's torch, then ask `tuner explain` what the database answers on the same torch and on
# another one (OTHER_PY: the python of a virtual environment with that torch and tuner installed, e.g. the CPU
# build of torch 2.13.0). Writes one explain JSON per model and torch under OUT, and the table beside them.
set -euo pipefail
OTHER_PY=${OTHER_PY:?set OTHER_PY to the python of a venv with the other torch and tuner}
OUT=${OUT:-bench/results/cpu/torch-upgrade}
DBS=${DBS:-$(mktemp -d)}
mkdir -p "$OUT"
for item in "mlp 16,64 infer" "convnet 2,16,32,32 infer" "mlp 16,64 train" "convnet 2,16,32,32 train"; do
  set -- $item
  name="$1-$3"
  flags=(--model "tests.helpers.models:$1" --input-shape "$2" --mode "$3" --device cpu --threads 2 --db "sqlite:///$DBS/$name.db")
  tuner sweep "${flags[@]}" --budget quick > "$DBS/$name-sweep.log" 2>&1
  tuner explain "${flags[@]}" --json > "$OUT/$name-swept-torch.json"
  "$OTHER_PY" -m tuner explain "${flags[@]}" --json > "$OUT/$name-other-torch.json"
done
python bench/analysis/torch_upgrade.py "$OUT" "$(python -c 'import torch; print(torch.__version__)')" \
  "$("$OTHER_PY" -c 'import torch; print(torch.__version__)')" > "$OUT/table.md"
cat "$OUT/table.md"
