#!/usr/bin/env bash
# bench/lm_recipe.sh [BUILD_DIR] [TARGET] [SEEDS] -- the LM recipe benchmark (2-core CPU): wall time (training only)
# to a validation cross entropy of TARGET (default 6.0) on GPT-2 BPE tokens of Moby Dick, Poe, Huckleberry Finn and
# the King James Bible, for our baseline, our recipe and Composer's run of the same recipe on an equivalent randomly
# initialised Hugging Face GPT-2 (bench/peers/composer_lm_recipe.py), one triple per seed (default 1), sequential, the
# order rotated per seed. MAX_BATCHES (default 1500) caps each run; EXTRA="composer:baseline" adds Composer's
# baseline. Needs tools/fetch_data.sh text gpt2 texts.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD="${1:-build}"
TARGET="${2:-6.0}"
SEEDS="${3:-1}"
MAX_BATCHES="${MAX_BATCHES:-1500}"
EVAL_EVERY="${EVAL_EVERY:-50}"
EXTRA="${EXTRA:-}"
TOKENS="${TOKENS:-/tmp/composer_lm_recipe_tokens}"
mkdir -p "$TOKENS"
if [ ! -f "$TOKENS/train.u16" ] || [ ! -f "$TOKENS/val.u16" ]; then
  "$BUILD/bench/lm_recipe" tokenize --out "$TOKENS"
fi
common=(--tokens "$TOKENS" --target "$TARGET" --max-batches "$MAX_BATCHES" --eval-every "$EVAL_EVERY")
run() {  # run SIDE CONFIG SEED
  if [ "$1" = ours ]; then
    "$BUILD/bench/lm_recipe" train "${common[@]}" --config "$2" --seed "$3" | grep -E '^(EVAL|RESULT)'
  else
    .venv/bin/python bench/peers/composer_lm_recipe.py "${common[@]}" --config "$2" --seed "$3" 2>/dev/null | grep -E '^(EVAL|RESULT)'
  fi
}
IFS=, read -ra seeds <<< "$SEEDS"
k=0
for seed in "${seeds[@]}"; do
  order=("ours:baseline" "ours:recipe" "composer:recipe")
  [ -n "$EXTRA" ] && order+=("$EXTRA")
  for ((i = 0; i < k % ${#order[@]}; i++)); do order=("${order[@]:1}" "${order[0]}"); done
  for job in "${order[@]}"; do run "${job%%:*}" "${job#*:}" "$seed"; done
  k=$((k + 1))
done
