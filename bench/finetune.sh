#!/usr/bin/env bash
# bench/finetune.sh [BUILD_DIR] [ROUNDS] -- fine-tuning SmolLM2-135M-Instruct (tools/fetch_data.sh smollm2 text) with
# our Trainer (build/bench/finetune) and with Composer's Trainer around HuggingFaceModel (bench/peers/composer_finetune.py)
# on the same GGUF weights, the same windows of Moby Dick in the model's tokens (BATCH x SEQ, default 8 x 256), the
# same DecoupledAdamW (lr 1e-5 full, 1e-4 LoRA), fp32, 2 threads, full fine-tuning and LoRA (the same initial PEFT
# adapters on both sides), STEPS batches each (default 4), interleaved and rotated per round; then greedy generation
# of 32 tokens, ours (KV cache) against transformers' generate. Prints every STEP line, and the summary lines of
# bench/summarize_finetune.py (bash bench/finetune.sh | .venv/bin/python bench/summarize_finetune.py).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD="${1:-build}"
ROUNDS="${2:-2}"
STEPS="${STEPS:-4}" BATCH="${BATCH:-8}" SEQ="${SEQ:-256}"
GGUF=data/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
WORK="${WORK:-/tmp/composer_finetune_bench}"
mkdir -p "$WORK"
PY=.venv/bin/python
"$BUILD/bench/finetune" prepare --gguf "$GGUF" --text data/text/mobydick.txt --seq "$SEQ" \
  --windows $((STEPS * BATCH)) --out "$WORK/windows.safetensors"
[ -f "$WORK/adapters/adapter_config.json" ] || $PY bench/peers/composer_finetune.py init --gguf "$GGUF" --out "$WORK/adapters" 2>/dev/null
lr() { [ "$1" = full ] && echo 1e-5 || echo 1e-4; }
run() {  # SIDE MODE
  local args=(--gguf "$GGUF" --windows "$WORK/windows.safetensors" --mode "$2" --adapters "$WORK/adapters"
              --steps "$STEPS" --batch "$BATCH" --lr "$(lr "$2")")
  echo "RUN $1 $2"
  if [ "$1" = ours ]; then "$BUILD/bench/finetune" train "${args[@]}"; else $PY bench/peers/composer_finetune.py train "${args[@]}" 2>/dev/null; fi | grep -E '^(STEP|RESULT)'
}
jobs=("ours full" "composer full" "ours lora" "composer lora")
for ((r = 0; r < ROUNDS; r++)); do
  for ((i = 0; i < ${#jobs[@]}; i++)); do run ${jobs[(i + r) % ${#jobs[@]}]}; done
done
$PY -c "
import torch; from safetensors.torch import save_file
save_file({'input_ids': torch.tensor([[504, 3575, 282, 4649, 314]])}, '$WORK/prompt.safetensors')"
for ((r = 0; r < ROUNDS; r++)); do
  "$BUILD/bench/finetune" generate --gguf "$GGUF" --prompt-ids "$WORK/prompt.safetensors" --new 32 --rounds 2
  $PY bench/peers/composer_finetune.py generate --gguf "$GGUF" --prompt-ids "$WORK/prompt.safetensors" --new 32 --rounds 2 2>/dev/null
done
