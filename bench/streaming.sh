#!/usr/bin/env bash
# bench/streaming.sh [BUILD_DIR] [ROUNDS] -- StreamingDataset against MosaicML Streaming's StreamingDataset (with a
# torch DataLoader) on the same MDS shards: Fashion-MNIST's 60000 training images written by streaming.MDSWriter,
# read from a local folder and through a moto S3 server on loopback into an empty cache; batch 256, 2 workers;
# interleaved rounds alternating which goes first. Prints each RESULT line and the median ratios.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD="${1:-build}"
ROUNDS="${2:-3}"
source bench/moto.sh
$PY tests/data/mds_write.py fashion "$work/mds" data/fashion-mnist/train-images-idx3-ubyte.gz \
  data/fashion-mnist/train-labels-idx1-ubyte.gz 60000
$PY tests/storage/moto_s3.py put_dir "$AWS_ENDPOINT_URL" bench bench bench fashion "$work/mds"
out="$work/out"
for r in $(seq 1 "$ROUNDS"); do
  for where in local s3; do
    if [ "$where" = local ]; then remote=""; local="$work/mds"; else remote="s3://bench/fashion"; fi
    cache() { rm -rf "$work/cache"; echo "$work/cache"; }
    cpp() { "$BUILD/bench/streaming" "$remote" "$([ -n "$remote" ] && cache || echo "$local")" 256 2; }
    py() { "$PY" bench/python/streaming_read.py "$remote" "$([ -n "$remote" ] && cache || echo "$local")" 256 2; }
    if [ $((r % 2)) -eq 1 ]; then cpp | tee -a "$out"; py | tee -a "$out"; else py | tee -a "$out"; cpp | tee -a "$out"; fi
  done
done
"$PY" - "$out" <<'PYEOF'
import statistics, sys
rows = [dict(kv.split("=") for kv in line.split()[1:]) for line in open(sys.argv[1]) if line.startswith("RESULT")]
for where in ("local", "s3"):
    med = {i: statistics.median(float(r["samples_per_s"]) for r in rows if r["impl"] == i and r["where"] == where)
           for i in ("cpp", "python")}
    print(f"median samples/s {where}: ours {med['cpp']:.0f}, Streaming {med['python']:.0f}; "
          f"ours / Streaming = {med['cpp'] / med['python']:.1f}x")
PYEOF
