#!/usr/bin/env bash
# bench/object_store.sh [BUILD_DIR] [ROUNDS] -- S3ObjectStore against Composer's S3ObjectStore (boto3) on the same
# moto S3 server on loopback: a 256 MiB upload and download, 200 small (64 KiB) uploads and their listing, in
# interleaved rounds alternating which goes first; then what saving every batch costs a training run (no saving, a
# local folder, an s3:// folder). Prints each RESULT line and the medians.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD="${1:-build}"
ROUNDS="${2:-3}"
source bench/moto.sh
head -c $((256 << 20)) /dev/urandom > "$work/big.bin"
out="$work/out"
for r in $(seq 1 "$ROUNDS"); do
  cpp=("$BUILD/bench/object_store" transfer "$work/big.bin" 200)
  py=("$PY" bench/python/s3_transfer.py "$work/big.bin" 200)
  if [ $((r % 2)) -eq 1 ]; then "${cpp[@]}" | tee -a "$out"; "${py[@]}" | tee -a "$out"
  else "${py[@]}" | tee -a "$out"; "${cpp[@]}" | tee -a "$out"; fi
done
for r in $(seq 1 "$ROUNDS"); do
  for f in none "$work/local" "s3://bench/train"; do "$BUILD/bench/object_store" train "$f" 40 2>/dev/null | tee -a "$out"; done
done
"$PY" - "$out" <<'PYEOF'
import statistics, sys
rows = [dict(kv.split("=") for kv in line.split()[1:]) for line in open(sys.argv[1]) if line.startswith("RESULT")]
for key in ("upload_mib_s", "download_mib_s", "small_put_ms", "list_ms"):
    med = {i: statistics.median(float(r[key]) for r in rows if r.get("impl") == i) for i in ("cpp", "python")}
    print(f"median {key}: ours {med['cpp']:.2f}, Composer/boto3 {med['python']:.2f}")
for key in ("train_s", "fit_s"):
    t = {m: statistics.median(float(r[key]) for r in rows if r.get("mode") == m) for m in ("none", "local", "s3")}
    print(f"median {key} (40 batches, a checkpoint every batch): none {t['none']:.2f}, local {t['local']:.2f}, "
          f"s3 {t['s3']:.2f}; s3 / local = {t['s3'] / t['local']:.2f}")
PYEOF
