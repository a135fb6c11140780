#!/usr/bin/env bash
# bench/lm_methods.sh [BUILD_DIR] [BATCHES] -- the language-model methods one at a time on Moby Dick (2-core CPU):
# examples/configs/mobydick_gpt.yaml (character GPT, 4 layers, d_model 128, sequences of 128, batch 32) for BATCHES
# batches (default 300), one run per line, sequential, same seed; prints the process wall time and the final eval
# LanguageCrossEntropy (20 batches of the test split at 128 characters) as RESULT lines.
#   fp32: baseline, alibi (trained on 32, evaluated on 128), alibi evaluated on 256 characters (longer than the model
#         was built for), ema (half life 30 batches), gated_linear_units;
#   amp_bf16: baseline, low_precision_layernorm, for BF16_BATCHES batches (default 30; bfloat16 is slow on CPUs
#             without native bfloat16 arithmetic).
# METHODS="baseline gated_linear_units" runs only the named lines. Needs tools/fetch_data.sh's data.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD="${1:-build}"
BATCHES="${2:-300}"
BF16_BATCHES="${BF16_BATCHES:-30}"
CLI="$BUILD/tools/composer-cpp"
common=(max_duration="${BATCHES}ba" eval_interval="${BATCHES}ba" save_folder= "loggers=[]" "callbacks=[]"
        progress_bar=false)
METHODS="${METHODS:-}"
run() {
  local label="$1"; shift
  if [ -n "$METHODS" ] && [[ " $METHODS " != *" $label "* ]]; then return; fi
  local start end out
  start=$(date +%s.%N)
  out=$("$CLI" train examples/configs/mobydick_gpt.yaml "${common[@]}" run_name="lm-$label" "$@" 2>&1)
  end=$(date +%s.%N)
  local ce
  ce=$(printf '%s\n' "$out" | sed -n 's/.*metrics\/eval\/LanguageCrossEntropy = \([0-9.e+-]*\).*/\1/p' | tail -1)
  echo "RESULT lm method=$label batches=$BATCHES wall_s=$(python3 -c "print(round($end - $start, 1))") eval_ce=${ce:-none}"
}
run baseline "algorithms=[]"
run alibi "algorithms=[{name: alibi, max_sequence_length: 256}]"
run alibi-eval256 "algorithms=[{name: alibi, max_sequence_length: 256}]" eval_data.seq_len=256 eval_data.batch_size=32
run ema "algorithms=[{name: ema, half_life: 30ba}]"
run gated_linear_units "algorithms=[{name: gated_linear_units}]"
BATCHES="$BF16_BATCHES" common[0]=max_duration="${BF16_BATCHES}ba" common[1]=eval_interval="${BF16_BATCHES}ba"
run bf16-baseline precision=amp_bf16 "algorithms=[]"
run bf16-low_precision_layernorm precision=amp_bf16 "algorithms=[{name: low_precision_layernorm}]"
