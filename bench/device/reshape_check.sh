#!/usr/bin/env bash
# Does the reshaped sweep side (typed jobs, phases, one owner of process-wide state) still work on the device's
# torch (2.11)? One call, about 8 minutes (carry .whl):
#   1. pytest -m gpu (the CUDA path end to end)
#   2. the CPU tests of the backend adapters and the CPU sweep, under this torch
# Results in $OUT: pytest-gpu.log, pytest-cpu-torch211.log.
set -uo pipefail
source bench/device/setup.sh
export TUNER_CACHE_DIR=/tmp/tuner-cache
timeout "${GPU_S:-330}" python3 -m pytest -m gpu -q -p no:cacheprovider tests/gpu -rA --durations=0 2>&1 | quiet | tee "$OUT/pytest-gpu.log" | tail -30
CUDA_VISIBLE_DEVICES= timeout "${CPU_S:-200}" python3 -m pytest -q -p no:cacheprovider -x tests/backend tests/tuner/test_sweep_cpu.py \
  tests/tuner/test_worker_failures.py tests/tuner/test_search.py 2>&1 | quiet | tee "$OUT/pytest-cpu-torch211.log" | tail -15
