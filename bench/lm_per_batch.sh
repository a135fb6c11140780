#!/usr/bin/env bash
# bench/lm_per_batch.sh [BUILD_DIR] [ROUNDS] [BATCHES] -- the LM recipe's training time per batch (issue 45: ours
# <= 0.5x Composer's), interleaved: each round runs ours and Composer's run of the same recipe (Alibi, GradientClipping,
# EMA; bench/peers/composer_lm_recipe.py) for BATCHES batches (default 30), the order alternating per round (default
# 3 rounds), and prints each run's seconds per batch, then the medians and their ratio. OLD_LIB=DIR adds a third side:
# our benchmark run against the libcomposer.so in DIR (a build of the previous commit), for a before/after of a
# library change. Tokens as in bench/lm_recipe.sh (TOKENS, default /tmp/composer_lm_recipe_tokens).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD="${1:-build}"
ROUNDS="${2:-3}"
BATCHES="${3:-30}"
TOKENS="${TOKENS:-/tmp/composer_lm_recipe_tokens}"
OLD_LIB="${OLD_LIB:-}"
if [ ! -f "$TOKENS/train.u16" ] || [ ! -f "$TOKENS/val.u16" ]; then
  mkdir -p "$TOKENS"
  "$BUILD/bench/lm_recipe" tokenize --out "$TOKENS" > /dev/null
fi
args=(--tokens "$TOKENS" --target 0 --max-batches "$BATCHES" --eval-every "$BATCHES" --seed 1)
per_batch() {  # per_batch SIDE: seconds of training per batch of one run
  local line
  case "$1" in
    ours) line=$("$BUILD/bench/lm_recipe" train "${args[@]}" --config recipe | grep '^RESULT') ;;
    before) line=$(LD_LIBRARY_PATH="$OLD_LIB" "$BUILD/bench/lm_recipe" train "${args[@]}" --config recipe | grep '^RESULT') ;;
    composer) line=$(.venv/bin/python bench/peers/composer_lm_recipe.py "${args[@]}" \
                       --config alibi,gradient_clipping,ema 2>/dev/null | grep '^RESULT') ;;
  esac
  local s=${line##*train_s=}
  python3 -c "print(f'{${s%% *} / $BATCHES:.4f}')"
}
sides=(ours composer)
[ -n "$OLD_LIB" ] && sides+=(before)
results=$(mktemp)
for ((r = 1; r <= ROUNDS; r++)); do
  order=("${sides[@]}")
  if ((r % 2 == 0)); then order=($(printf '%s\n' "${sides[@]}" | tac)); fi
  for side in "${order[@]}"; do
    t=$(per_batch "$side")
    echo "round=$r side=$side s_per_batch=$t"
    echo "$side $t" >> "$results"
  done
done
python3 - "$results" <<'EOF'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    side, t = line.split()
    runs.setdefault(side, []).append(float(t))
med = {side: statistics.median(ts) for side, ts in runs.items()}
for side, m in med.items():
    print(f"RESULT lm_per_batch side={side} median_s_per_batch={m:.4f} runs={len(runs[side])}")
print(f"RESULT lm_per_batch ours_vs_composer={med['ours'] / med['composer']:.3f}")
if "before" in med:
    print(f"RESULT lm_per_batch before_vs_composer={med['before'] / med['composer']:.3f} "
          f"ours_vs_before={med['ours'] / med['before']:.3f}")
EOF
rm -f "$results"
