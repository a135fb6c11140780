#!/usr/bin/env bash
# bench/auto_microbatch.sh [BUILD_DIR] -- what automatic microbatching costs (2-core CPU): the steady-state step
# with "auto" against the size unset (the same whole batch fits), interleaved in one process, on 1 and 2 ranks; then
# the first step of a search under a real memory limit (RLIMIT_AS on rank 0) against the steps after it.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD="${1:-build}"
ROUNDS="${ROUNDS:-5}"
for n in 1 2; do
  "$BUILD/tools/composer-cpp" launch -n "$n" -- "$BUILD/bench/auto_microbatch" --rounds "$ROUNDS" --batches 10 \
    --limit-mib 40 | grep -v "^\[rank 1\]"
done
