#!/usr/bin/env bash
# The GPU machine's one entry point: `bash bench/device/run.sh COMMAND [ARGS...]`, run through the device tool with
# `.whl` carried. Every command installs the wheels from `.whl/` first (bench/device/setup.sh) and writes what it
# measured under $OUT. Fill `.whl/` once on this machine, from the wheels for the device image's Python 3.12:
#   mkdir -p .whl && cp ../shared/device-wheels/*.whl .whl/ && echo /.whl/ >> .git/info/exclude
# (timm and Transformers, for timm: and hf: models, go to `.whl-hf/`, carried too, where the image lacks them.)
#
#   sweep-and-bench MODEL SECONDS [flags]   a sweep from an empty database, then one bench (sweep_model.sh)
#   bench-db EXPORT MODEL [flags]           one bench of a stored export (bench_db.sh)
#   ablate EXPORT... MODEL [flags]          tuned with each lever left out (ablate.sh)
#   profile --model MODEL [flags]           the step's top kernels (profile_kernels.py)
#   gpu-tests                               pytest -m gpu (gpu_tests.sh)
set -uo pipefail
here=$(dirname "$0")
command=${1:-}
shift || true
case "$command" in
  sweep-and-bench) exec bash "$here/sweep_model.sh" "$@" ;;
  bench-db) exec bash "$here/bench_db.sh" "$@" ;;
  ablate) exec bash "$here/ablate.sh" "$@" ;;
  profile) source "$here/setup.sh" && exec python3 "$here/profile_kernels.py" "$@" ;;
  gpu-tests) exec bash "$here/gpu_tests.sh" "$@" ;;
  *) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; [ -z "$command" ] || [ "$command" = help ]; exit $? ;;
esac
