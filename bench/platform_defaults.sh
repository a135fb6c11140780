#!/usr/bin/env bash
# bench/platform_defaults.sh [ROUNDS] [TARGET] -- issue 45 item 3: wall time to TARGET (default 0.90) on
# Fashion-MNIST with the library's platform defaults against the alternatives, interleaved in one run:
#   ours-default   build/bench/time_to_accuracy as a user gets it (DatasetLoader's default num_workers, 0 since
#                  issue 45; the Trainer's glibc tuning, tune_allocator)
#   ours-2w-tuned  2 loader worker threads (--workers 2, the default before)
#   ours-0w-glibc  no loader threads and glibc's own malloc settings (GLIBC_TUNABLES set: tune_allocator steps aside)
#   python         the hand-written PyTorch loop (bench/python/time_to_accuracy.py --impl python), the reference
# Same CNN, optimizer, data order and eval cadence everywhere. Prints each RESULT line, then medians per
# configuration and their ratio to the Python loop. Results: bench/results/time_to_accuracy.md.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS="${1:-2}"
TARGET="${2:-0.90}"
PY=.venv/bin/python
out="$(mktemp)"
trap 'rm -f "$out"' EXIT
echo "platform defaults: $ROUNDS rounds, target $TARGET, $(nproc) cores; $(date -u +%FT%TZ)"
common=(--data data/fashion-mnist --target "$TARGET" --max-epochs 6)
for r in $(seq 1 "$ROUNDS"); do
  for config in ours-default ours-2w-tuned ours-0w-glibc python; do
    case "$config" in
      ours-default) cmd=(build/bench/time_to_accuracy "${common[@]}") ;;
      ours-2w-tuned) cmd=(build/bench/time_to_accuracy "${common[@]}" --workers 2) ;;
      ours-0w-glibc) cmd=(env GLIBC_TUNABLES=glibc.malloc.check=0 build/bench/time_to_accuracy "${common[@]}" --workers 0) ;;
      python) cmd=("$PY" bench/python/time_to_accuracy.py --impl python "${common[@]}") ;;
    esac
    "${cmd[@]}" 2>/dev/null | grep '^RESULT' | sed "s/^RESULT time_to_accuracy /RESULT config=$config /" | tee -a "$out"
  done
done
"$PY" - "$out" <<'PYEOF'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    kv = dict(x.split("=", 1) for x in line.split()[1:])
    rows.setdefault(kv["config"], []).append(kv)
ref = {k: statistics.median(float(r[k]) for r in rows["python"]) for k in ("train_s", "total_s")}
print("| configuration | runs | batches | train s (median) | total s (median) | train / Python | total / Python |")
print("|---|---|---|---|---|---|---|")
for config, sel in rows.items():
    med = {k: statistics.median(float(r[k]) for r in sel) for k in ("train_s", "total_s", "batches")}
    print(f"| {config} | {len(sel)} | {med['batches']:.0f} | {med['train_s']:.1f} | {med['total_s']:.1f} | "
          f"{med['train_s'] / ref['train_s']:.3f} | {med['total_s'] / ref['total_s']:.3f} |")
PYEOF
