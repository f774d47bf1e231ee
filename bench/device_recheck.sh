#!/usr/bin/env bash
# Device call: re-run the tests that failed under torch 2.11, then the CUDA hook probe.
set -uo pipefail
export PYTHONUNBUFFERED=1
python3 -m pip install -q --upgrade --no-index --no-deps --target .site .whl/*.whl && export PYTHONPATH=$PWD/.site || exit 1
python3 -m pip install -q --no-index --no-deps --no-build-isolation -e . || exit 1
timeout 300 python3 -m pytest -q -p no:cacheprovider --durations=8 tests/tuner/test_worker_failures.py \
  tests/tuner/test_sweep_cpu.py::test_sweep_then_tuned_compile_benchmarks_nothing tests/backend/test_tuned_backend.py 2>&1 \
  | tee "$OUT/pytest-torch211-recheck.log" | tail -16
timeout 240 python3 bench/device_probe.py resnet50 2>&1 | tee "$OUT/probe.log" | grep -v "^AUTOTUNE\|^  \|SingleProcess\|strides:\|dtypes:" | tail -30
