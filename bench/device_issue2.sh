#!/usr/bin/env bash
# One device call: install the carried wheels and tuner, run the CPU test suite under the device's torch (2.11),
# then probe the CUDA hooks. Usage (device tool, carry .whl): bash bench/device_issue2.sh
set -uo pipefail
export PYTHONUNBUFFERED=1
python3 -m pip install -q --upgrade --no-index --no-deps --target .site .whl/*.whl && export PYTHONPATH=$PWD/.site || exit 1
python3 -m pip install -q --no-index --no-deps --no-build-isolation -e . || exit 1
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__, torch.cuda.get_device_name())"
# The wheel test needs a package registry, which the device cannot reach.
python3 -m pytest -q -p no:cacheprovider --deselect tests/test_packaging.py 2>&1 | tee "$OUT/pytest-torch211.log" | tail -25
python3 bench/device_probe.py resnet50 2>&1 | tee "$OUT/probe.log" | grep -v "^AUTOTUNE\|^  \|SingleProcess" | tail -40
