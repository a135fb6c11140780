#!/usr/bin/env bash
# bench/algorithm_recipes.sh [BUILD_DIR] [RECIPE] [SEEDS] -- the speed-up algorithms on Fashion-MNIST (2-core CPU):
#   1. screen: each method alone for 2 epochs (seed 0): step time and test accuracy against the baseline, which runs
#      first and last so drift shows;
#   2. tta: wall time to 90 % test accuracy, baseline vs RECIPE (comma-separated config names), one pair per seed
#      (seeds other than the screen's), alternating which runs first.
# Prints the RESULT lines and markdown tables for bench/results/algorithm_recipes.md. Needs tools/fetch_data.sh's data.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD="${1:-build}"
RECIPE="${2:-label_smoothing,progressive_resizing}"
SEEDS="${3:-1,2,3}"
SKIP_SCREEN="${SKIP_SCREEN:-0}"
out="$(mktemp)"
if [ "$SKIP_SCREEN" != 1 ]; then
  "$BUILD/bench/algorithm_recipes" screen --epochs 2 --seed 0 --methods \
    baseline,blurpool,channels_last,colout,cutmix,cutout,factorize,ghost_batchnorm,label_smoothing,mixup,progressive_resizing,squeeze_excite,stochastic_depth,weight_standardization,augmix,randaugment,baseline \
    | tee -a "$out"
fi
"$BUILD/bench/algorithm_recipes" tta --recipe "$RECIPE" --seeds "$SEEDS" --target 0.90 --max-epochs 4 --eval-every 50 | tee -a "$out"
python3 bench/summarize_recipes.py "$out"
