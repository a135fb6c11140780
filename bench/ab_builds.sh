#!/usr/bin/env bash
# bench/ab_builds.sh OLD_BUILD NEW_BUILD -- the same benchmarks from two builds, interleaved, for a change that must
# not make them slower: 3 pairs of trainer_overhead (old, new), then the 2-rank DDP and FULL_SHARD step of
# fsdp_scaling in 2 rounds (old then new, new then old). OLD_BUILD is e.g. a clean clone's build of the previous commit.
set -euo pipefail
OLD="$1"
NEW="$2"
for pair in 1 2 3; do
  for side in old new; do
    B=$([ "$side" = old ] && echo "$OLD" || echo "$NEW")
    echo "pair $pair $side: $("$B/bench/trainer_overhead" --rounds 9 --batches 500 2>&1 | grep RESULT)"
  done
done
for round in 1 2; do
  order="old new"
  if [ "$round" = 2 ]; then order="new old"; fi
  for side in $order; do
    B=$([ "$side" = old ] && echo "$OLD" || echo "$NEW")
    for s in ddp FULL_SHARD; do
      "$B/tools/composer-cpp" launch -n 2 -- "$B/bench/fsdp_scaling" --strategy "$s" --steps 3 | grep RESULT |
        sed "s/^/round=$round $side /"
    done
  done
done
