#!/usr/bin/env bash
# bench/fsdp_scaling.sh [BUILD_DIR] -- per-rank memory and step time of DDP, FULL_SHARD and SHARD_GRAD_OP on 1, 2
# and 4 ranks (GPT-2-small-shaped, 2-core CPU: the ranks share the cores, so step times compare strategies at one
# world size, not scaling). ROUNDS rounds (default 2), the strategies interleaved at each world size, in reverse
# order every other round, so that a slow spell of the host does not fall on one strategy. Prints one RESULT line
# per rank and run, prefixed with its round.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD="${1:-build}"
STEPS="${STEPS:-3}"
ROUNDS="${ROUNDS:-2}"
for n in 1 2 4; do
  for round in $(seq 1 "$ROUNDS"); do
    order="ddp FULL_SHARD SHARD_GRAD_OP"
    if ((round % 2 == 0)); then order="SHARD_GRAD_OP FULL_SHARD ddp"; fi
    for s in $order; do
      "$BUILD/tools/composer-cpp" launch -n "$n" -- "$BUILD/bench/fsdp_scaling" --strategy "$s" --steps "$STEPS" \
        | grep "RESULT" | sed "s/^/round=$round /"
    done
  done
done
