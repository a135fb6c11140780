#!/usr/bin/env bash
# bench/fsdp_scaling.sh [BUILD_DIR] -- per-rank memory and step time of DDP, FULL_SHARD and SHARD_GRAD_OP on 1, 2
# and 4 ranks (GPT-2-small-shaped, 2-core CPU: the ranks share the cores, so step times compare strategies at one
# world size, not scaling). Prints one RESULT line per rank and run.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD="${1:-build}"
STEPS="${STEPS:-3}"
for n in 1 2 4; do
  for s in ddp FULL_SHARD SHARD_GRAD_OP; do
    "$BUILD/tools/composer-cpp" launch -n "$n" -- "$BUILD/bench/fsdp_scaling" --strategy "$s" --steps "$STEPS" \
      | grep "RESULT"
  done
done
