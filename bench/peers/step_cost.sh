#!/usr/bin/env bash
# bench/peers/step_cost.sh [ROUNDS] [BATCHES] -- per-step cost of four loops on the same MLP (784-256-256-10, batch
# 64, SGD momentum, synthetic data in memory), interleaved round by round in one run:
#   Composer's Trainer (Python) vs a hand-written PyTorch loop   (bench/peers/step_cost.py)
#   our Trainer vs a hand-written LibTorch loop                  (build/bench/trainer_overhead, one round a call)
# and prints the medians and three ratios: Composer/PyTorch, ours/LibTorch, ours/Composer (target <= 0.5).
# Results: bench/results/vs_composer.md.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROUNDS="${1:-5}"
BATCHES="${2:-300}"
PY=.venv/bin/python
CPP=build/bench/trainer_overhead
[ -x "$CPP" ] || { echo "step_cost: $CPP is missing (build first)" >&2; exit 1; }
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
echo "step_cost: $ROUNDS rounds x $BATCHES batches, 2 threads each, $(nproc) cores; $(date -u +%FT%TZ)"
for r in $(seq 1 "$ROUNDS"); do
  # Rotate the order each round so no side always runs first.
  order=(composer torch cpp)
  for ((k = 0; k < r % 3; k++)); do order=("${order[@]:1}" "${order[0]}"); done
  for side in "${order[@]}"; do
    case "$side" in
      composer|torch) "$PY" bench/peers/step_cost.py --mode "$side" --batches "$BATCHES" 2>/dev/null | grep RESULT ;;
      cpp) "$CPP" --rounds 1 --batches "$BATCHES" | sed -n 's/^round 0: hand \([0-9.]*\) us\/step, trainer \([0-9.]*\) us\/step.*/RESULT step_cost impl=libtorch us_per_step=\1\nRESULT step_cost impl=composer_cpp us_per_step=\2/p' ;;
    esac
  done | sed "s/^/round=$r /" | tee -a "$log"
done
"$PY" - "$log" <<'PY'
import re, statistics, sys
rows = {}
for line in open(sys.argv[1]):
    m = re.search(r'round=(\d+) RESULT step_cost impl=(\w+) us_per_step=([\d.]+)', line)
    if m:
        rows.setdefault(int(m.group(1)), {})[m.group(2)] = float(m.group(3))
med = lambda k: statistics.median(r[k] for r in rows.values())
ratio = lambda a, b: statistics.median(r[a] / r[b] for r in rows.values())
print('median us/step: ' + ', '.join(f'{k} {med(k):.1f}' for k in ('composer', 'torch', 'composer_cpp', 'libtorch')))
print(f'RESULT step_cost composer_over_torch={ratio("composer", "torch"):.3f} '
      f'ours_over_libtorch={ratio("composer_cpp", "libtorch"):.3f} ours_over_composer={ratio("composer_cpp", "composer"):.3f}')
PY
