#!/usr/bin/env bash
# Two sweeps started together on one machine (each with its own database and cache folder) against one alone: with
# the machine-wide measurement lock they time one at a time, so their decisions should be the solo sweep's.
# Usage: bash bench/cpu/concurrent_sweeps.sh OUTDIR  (prints each database's winners, then whether they agree)
set -euo pipefail
OUT=${1:-/tmp/concurrent}; rm -rf "$OUT"; mkdir -p "$OUT"
W=(--model resnet18 --device cpu --batch 1 --image-size 64 --budget quick)
run() { TUNER_CACHE_DIR="$OUT/cache-$1" TORCHINDUCTOR_CACHE_DIR="$OUT/ind-$1" /usr/bin/time -f "$1 wall %e s" \
          tuner sweep "${W[@]}" --db "sqlite:///$OUT/$1.db" > "$OUT/$1.log" 2>&1; tail -n 1 "$OUT/$1.log"; }
run solo
run a & run b & wait
python3 - "$OUT" <<'PY'
import sys
from tuner.db import Database
out = sys.argv[1]
def winners(name):
    db = Database.open(f"sqlite:///{out}/{name}.db", create=False, read_only=True)
    try:
        return {r["task"]: r["config"] for r in db.top_winners(1000)}
    finally:
        db.close()
w = {n: winners(n) for n in ("solo", "a", "b")}
for n, rows in w.items():
    print(n, {k: (v.get("choice") or {kk: vv for kk, vv in v.items() if kk in ("cpp.simdlen", "cpp.min_chunk_size")}) for k, v in rows.items()})
for n in ("a", "b"):
    same = [k for k in w["solo"] if w[n].get(k) == w["solo"][k]]
    print(f"{n}: {len(same)} of {len(w['solo'])} solo decisions equal")
PY
