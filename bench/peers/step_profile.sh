#!/usr/bin/env bash
# bench/peers/step_profile.sh [BATCHES] -- where the Fashion-MNIST CNN's training step spends its time: Kineto traces
# of BATCHES batches (after 20 skipped and 5 of warm-up) of the same step on each side, summarized per operator.
#   ours       build/bench/time_to_accuracy --profile (the Trainer with its own Profiler, 2 loader workers)
#   python     bench/python/time_to_accuracy.py --impl python --profile (a hand-written loop, torch.profiler)
#   composer   bench/python/time_to_accuracy.py --impl composer --profile (Composer's Trainer and Profiler)
# and ours and Composer's with WeightStandardization + ChannelsLast. Every side records shapes only (no memory,
# no flops). Results: bench/results/step_profile.md.
set -euo pipefail
cd "$(dirname "$0")/../.."
BATCHES="${1:-40}"
PY=.venv/bin/python
DATA=data/fashion-mnist
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
echo "step_profile: $BATCHES batches per side, $(nproc) cores; $(date -u +%FT%TZ)"
recipe=weight_standardization,channels_last
build/bench/time_to_accuracy --data "$DATA" --profile "$dir/ours" --profile-batches "$BATCHES" >/dev/null
"$PY" bench/python/time_to_accuracy.py --impl python --data "$DATA" --profile "$dir/python" \
  --profile-batches "$BATCHES" >/dev/null 2>&1
"$PY" bench/python/time_to_accuracy.py --impl composer --data "$DATA" --profile "$dir/composer" \
  --profile-batches "$BATCHES" >/dev/null 2>&1
build/bench/time_to_accuracy --data "$DATA" --algorithms "$recipe" --profile "$dir/ours_r" \
  --profile-batches "$BATCHES" >/dev/null
"$PY" bench/python/time_to_accuracy.py --impl composer --data "$DATA" --algorithms "$recipe" \
  --profile "$dir/composer_r" --profile-batches "$BATCHES" >/dev/null 2>&1
trace() { ls "$dir/$1"/*.json | head -1; }
"$PY" bench/summarize_profile.py "$BATCHES" ours="$(trace ours)" python="$(trace python)" \
  composer="$(trace composer)" ours+WS+CL="$(trace ours_r)" composer+WS+CL="$(trace composer_r)"
