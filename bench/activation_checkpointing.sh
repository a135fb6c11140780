#!/usr/bin/env bash
# bench/activation_checkpointing.sh [BUILD_DIR] -- FSDP FULL_SHARD with activation_checkpointing off and on, on 1 and
# 2 ranks, interleaved (ROUNDS rounds of off, on): the peak resident memory each rank reaches and the step time.
# A GPT-2-small-shaped decoder (LAYERS=12, D_MODEL=768, HEADS=12) at sequences of SEQ tokens, BATCH per rank, so
# that activations are a visible part of the peak; RANKS="1 2" the world sizes. Prints one RESULT line per rank and
# run.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD="${1:-build}"
STEPS="${STEPS:-3}" ROUNDS="${ROUNDS:-2}" SEQ="${SEQ:-256}" BATCH="${BATCH:-4}" RANKS="${RANKS:-1 2}"
LAYERS="${LAYERS:-12}" D_MODEL="${D_MODEL:-768}" HEADS="${HEADS:-12}"
for n in $RANKS; do
  for round in $(seq "$ROUNDS"); do
    for ac in 0 1; do
      "$BUILD/tools/composer-cpp" launch -n "$n" -- "$BUILD/bench/fsdp_scaling" --strategy FULL_SHARD \
        --activation-checkpointing "$ac" --seq "$SEQ" --batch "$BATCH" --steps "$STEPS" \
        --layers "$LAYERS" --d-model "$D_MODEL" --heads "$HEADS" | grep "RESULT" |
        sed "s/^/round=$round /"
    done
  done
done
