# Sourced by the device scripts: install the carried wheels (Optuna, SQLAlchemy, Alembic) and tuner itself.
export PYTHONUNBUFFERED=1
export PYTHONPATH=$PWD/.site
# Drop autotuning chatter and progress-bar redraws from a log (line-buffered, so `timeout` leaves a complete log).
quiet() { grep --line-buffered -v "^AUTOTUNE\|^  \|torch.__trace\|SingleProcess\|━━\|│        │" ; }
# Prefix each line with the seconds since the pipe started (where a sweep's time went).
stamp() { python3 -uc "import sys, time; t = time.time()
for line in sys.stdin: print(f'[{time.time() - t:6.1f}] {line}', end='')"; }
# Empty caches for one run (tuner's, Inductor's, Triton's) under $FRESH, even on a machine held warm from an earlier
# call: a database or an autotuning cache kept in /tmp would let a run continue the one before. Usage: fresh_caches NAME
fresh_caches() {
  FRESH=/tmp/fresh-$1-$(date +%s%N)
  mkdir -p "$FRESH"
  export TUNER_CACHE_DIR=$FRESH/tuner TORCHINDUCTOR_CACHE_DIR=$FRESH/inductor TRITON_CACHE_DIR=$FRESH/triton
}
# Installed once per call: a script sourced after another one sees TUNER_DEVICE_READY and skips the installs.
if [ -z "${TUNER_DEVICE_READY:-}" ]; then
  python3 -m pip install -q --upgrade --no-index --no-deps --target .site .whl/*.whl || exit 1
  python3 -m pip install -q --no-index --no-deps --no-build-isolation -e . || exit 1
  python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__, torch.cuda.get_device_name())"
  # timm and Transformers for timm: and hf: models, when their wheels are carried (.whl-hf: pip download for Python
  # 3.12, without the packages the device image has already, e.g. numpy and torch).
  if [ -d .whl-hf ]; then python3 -m pip install -q --no-index --find-links .whl-hf timm transformers || exit 1; fi
  export TUNER_DEVICE_READY=1
fi
