#!/usr/bin/env bash
# bench/logger_overhead.sh [BUILD_DIR] [ROUNDS] -- TensorboardLogger against torch's SummaryWriter (what Composer's
# TensorboardLogger writes with): 20000 steps of 20 scalars, interleaved rounds alternating which goes first; prints
# each round and the median per-step cost of each with their ratio.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD="${1:-build}"
ROUNDS="${2:-5}"
PY=.venv/bin/python
out="$(mktemp)"
for r in $(seq 1 "$ROUNDS"); do
  cpp=("$BUILD/bench/logger_overhead")
  py=("$PY" bench/python/tensorboard_writer.py)
  if [ $((r % 2)) -eq 1 ]; then "${cpp[@]}" | tee -a "$out"; "${py[@]}" | tee -a "$out"
  else "${py[@]}" | tee -a "$out"; "${cpp[@]}" | tee -a "$out"; fi
done
"$PY" - "$out" <<'PYEOF'
import statistics, sys
rows = [dict(kv.split("=") for kv in line.split()[1:]) for line in open(sys.argv[1]) if line.startswith("RESULT")]
med = {i: statistics.median(float(r["us_per_step"]) for r in rows if r["impl"] == i) for i in ("cpp", "python")}
print(f"median us/step: ours {med['cpp']:.2f}, SummaryWriter {med['python']:.2f}; "
      f"SummaryWriter / ours = {med['python'] / med['cpp']:.1f}x")
PYEOF
