#!/usr/bin/env bash
# One device call: every GPU test (pytest -m gpu: tests/gpu and the gpu-marked tests beside the CPU ones), or those
# matching PYTEST_K. Usage (device tool, carry .whl): [PYTEST_K="expr"] bash bench/device/gpu_tests.sh
set -uo pipefail
source bench/device/setup.sh
export TUNER_CACHE_DIR=/tmp/tuner-cache
timeout "${LIMIT_S:-360}" python3 -m pytest -m gpu -q -p no:cacheprovider --continue-on-collection-errors ${PYTEST_K:+-k "$PYTEST_K"} tests -rA --durations=0 2>&1 \
  | grep -v "torch.__trace\|^AUTOTUNE\|^  " | tee "$OUT/pytest-gpu.log" | tail -40
