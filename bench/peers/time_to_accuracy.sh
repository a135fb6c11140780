#!/usr/bin/env bash
# bench/peers/time_to_accuracy.sh [REPEATS] [TARGET] -- wall time to TARGET (default 0.90) test accuracy on
# Fashion-MNIST: our Trainer (build/bench/time_to_accuracy) vs MosaicML Composer's Trainer
# (bench/python/time_to_accuracy.py --impl composer), same CNN, optimizer, schedule, data order and eval cadence,
# for the baseline and for one recipe both implement (WeightStandardization + ChannelsLast). Runs alternate which side
# goes first; the summary gives medians and the ours/Composer wall-time ratio (target <= 0.7).
# Results: bench/results/vs_composer.md.
set -euo pipefail
cd "$(dirname "$0")/../.."
REPEATS="${1:-2}"
TARGET="${2:-0.90}"
PY=.venv/bin/python
out="$(mktemp)"
trap 'rm -f "$out"' EXIT
echo "time_to_accuracy vs Composer: $REPEATS repeats, target $TARGET, $(nproc) cores; $(date -u +%FT%TZ)"
for recipe in "" "weight_standardization,channels_last"; do
  extra=(); [ -z "$recipe" ] || extra=(--algorithms "$recipe")
  for r in $(seq 1 "$REPEATS"); do
    cpp=(build/bench/time_to_accuracy --data data/fashion-mnist --target "$TARGET" --max-epochs 6 "${extra[@]}")
    py=("$PY" bench/python/time_to_accuracy.py --impl composer --data data/fashion-mnist --target "$TARGET" --max-epochs 6 "${extra[@]}")
    if [ $((r % 2)) -eq 1 ]; then "${cpp[@]}" | tee -a "$out"; "${py[@]}" 2>/dev/null | tee -a "$out"
    else "${py[@]}" 2>/dev/null | tee -a "$out"; "${cpp[@]}" | tee -a "$out"; fi
  done
done
"$PY" - "$out" <<'PYEOF'
import statistics, sys
rows = []
for line in open(sys.argv[1]):
    if line.startswith("RESULT"):
        kv = dict(x.split("=", 1) for x in line.split()[2:])
        kv.setdefault("algorithms", "baseline")
        rows.append(kv)
for recipe in ("baseline", "weight_standardization,channels_last"):
    med = {}
    for impl in ("cpp", "composer"):
        sel = [r for r in rows if r["algorithms"] == recipe and r["impl"] == impl]
        med[impl] = {k: statistics.median(float(r[k]) for r in sel) for k in ("train_s", "total_s", "batches", "acc")}
        med[impl]["reached"] = all(r["reached"] == "1" for r in sel)
    c, p = med["cpp"], med["composer"]
    print(f"SUMMARY {recipe}: ours total {c['total_s']:.1f}s train {c['train_s']:.1f}s batches {c['batches']:.0f} | "
          f"composer total {p['total_s']:.1f}s train {p['train_s']:.1f}s batches {p['batches']:.0f} | reached {c['reached']}/{p['reached']} | "
          f"ratio ours/composer wall {c['total_s'] / p['total_s']:.3f} train {c['train_s'] / p['train_s']:.3f}")
PYEOF
