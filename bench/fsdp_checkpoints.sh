#!/usr/bin/env bash
# bench/fsdp_checkpoints.sh [BUILD_DIR] -- saving and loading a GPT-2-small-shaped FSDP run's state on 2 and 4 ranks,
# as one full file (every rank gathers, rank 0 writes) and as a sharded DCP directory (every rank writes its part):
# time, per-rank resident peak during each, and size on disk. Prints one RESULT line per rank and run.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD="${1:-build}"
DIR="$(mktemp -d)"
trap 'rm -rf "$DIR"' EXIT
for n in 2 4; do
  for k in full sharded; do
    rm -rf "$DIR"/*
    "$BUILD/tools/composer-cpp" launch -n "$n" -- "$BUILD/bench/fsdp_scaling" --strategy FULL_SHARD --steps 2 \
      --checkpoint "$k" --checkpoint-dir "$DIR" | grep "RESULT"
  done
done
