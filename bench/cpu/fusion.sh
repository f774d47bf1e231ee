#!/usr/bin/env bash
# Issue-4 acceptance on this CPU (2 threads): fusion groupings on top of the kernel winners.
#   resnet50 fp32 b1 inference and a resnet18 training step (fp32, batch 8, 112²): a sweep with fusion groupings,
#   then one tuner bench run each: eager, Inductor default, tuned-kernels (kernel winners, Inductor's fusion), tuned.
# Usage: bash bench/cpu/fusion.sh [r50] [r18]   (both by default)
set -euo pipefail
cd "$(dirname "$0")/../.."
quiet() { grep -v "━━\|AUTOTUNE\|^  \|strides:\|dtypes:\|SingleProcess" || true; }
R50="--model resnet50 --device cpu --batch 1 --threads 2"
R18="--model resnet18 --device cpu --mode train --batch 8 --image-size 112 --threads 2"
DB50=sqlite:///$PWD/bench/results/cpu-xeon-2c/resnet50-fusion.db
DB18=sqlite:///$PWD/bench/results/cpu-xeon-2c/resnet18-train-fusion.db
WHAT=${*:-r50 r18}
if [[ $WHAT == *r50* ]]; then
  /usr/bin/time -f "sweep wall %e s" tuner sweep $R50 --budget quick --db "$DB50" 2>&1 | quiet
  tuner bench $R50 --rounds 40 --db "$DB50" --modes eager,default,tuned-kernels,tuned --out bench/results/cpu-xeon-2c/resnet50-fusion-$(date +%F).json 2>&1 | quiet
fi
if [[ $WHAT == *r18* ]]; then
  /usr/bin/time -f "sweep wall %e s" tuner sweep $R18 --budget quick --trials 4 --db "$DB18" 2>&1 | quiet
  tuner bench $R18 --rounds 30 --db "$DB18" --modes eager,default,tuned-kernels,tuned --out bench/results/cpu-xeon-2c/resnet18-train-fusion-$(date +%F).json 2>&1 | quiet
fi
