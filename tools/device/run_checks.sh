#!/usr/bin/env bash
# tools/device/run_checks.sh -- run ON THE DEVICE MACHINE (the device tool), after tools/device/fetch_deps.sh here:
#   device run, carry [".deps"], command "bash tools/device/run_checks.sh", timeout_s 540
# Builds the library, tests and benchmarks against the PyTorch install's LibTorch (CUDA), runs the unit tests (the
# CLI and multi-process suites need yaml-cpp, which is not there), then the GPU benchmarks. Every step's
# log goes to $OUT; a failing step does not stop the later ones, so one run reports everything it can.
# The parts that need Debian libraries the machine lacks (TensorBoard: protobuf, libpng; MLflow and object stores:
# libcurl; streaming: libzstd, OpenSSL, libpng, libjpeg) are configured off.
# Dry run on this Debian machine (checks the plumbing, not LibTorch 2.x):
#   OUT=/tmp/devsim TORCH_PREFIX=/usr BUILD=build-devsim \
#   BENCH_ARGS="--depth 18 --batch 8 --size 32 --steps 2 --warmup 1 --precision fp32" bash tools/device/run_checks.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT="${OUT:-/tmp/device-out}"
mkdir -p "$OUT"
BUILD="${BUILD:-build-device}"
JOBS="$(nproc)"
step() { echo "== $1 ($(date -u +%H:%M:%S))" | tee -a "$OUT/summary.txt"; }

step "environment"
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'; cmake --version | head -1; c++ --version | head -1; } 2>&1 | tee -a "$OUT/summary.txt"
step "configure"
# shellcheck source=tools/device/configure.sh
source tools/device/configure.sh
configure_device_build "$BUILD" "$OUT/configure.log"
echo "configure exit $?" | tee -a "$OUT/summary.txt"

step "build (-k 0: every error in one pass)"
ninja -C "$BUILD" -k 0 -j"$JOBS" > "$OUT/build.log" 2>&1
echo "build exit $?" | tee -a "$OUT/summary.txt"
grep -E "error|FAILED" "$OUT/build.log" | head -40 | tee -a "$OUT/summary.txt"

step "tests"
ctest --test-dir "$BUILD" -j8 --output-on-failure --timeout 120 > "$OUT/ctest.log" 2>&1
echo "ctest exit $?" | tee -a "$OUT/summary.txt"
grep -E "tests passed|Failed|\*\*\*" "$OUT/ctest.log" | head -40 | tee -a "$OUT/summary.txt"

step "bench: ChannelsLast, ResNet-50 bf16 224 px batch 256 (target ~1.9x)"
# shellcheck disable=SC2086  # BENCH_ARGS: a dry run on a CPU machine passes small sizes
"$BUILD/bench/channels_last" ${BENCH_ARGS:-} 2>&1 | tee "$OUT/bench_channels_last.log" | grep RESULT | tee -a "$OUT/summary.txt"

step "done"
