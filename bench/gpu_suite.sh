#!/usr/bin/env bash
# bench/gpu_suite.sh -- issue 17's GPU suite in one device call: builds the library, the CUDA tests and
# bench/gpu_suite against the machine's PyTorch (LibTorch with CUDA), runs the CUDA tests (the recorded step equals
# the eager one; automatic microbatching on real CUDA out-of-memory), then times GPT-2 124M (16 x 1024, bf16), the
# MLP 784-4x1024-10 (batch 128, fp32) and ResNet-50 (batch 256, bf16, channels_last): our hand-written loop, the
# Trainer and the Trainer with cuda_graph, beside Python eager, torch.compile, a CUDA-graphed Python step and
# Composer's Trainer, interleaved over ROUNDS, and writes $OUT/gpu.md (copy it to bench/results/gpu.md).
# Prepare here, once:   bash tools/device/fetch_deps.sh && bash tools/device/fetch_wheels.sh
# Run:  device run, carry [".deps", ".whl"], command "bash bench/gpu_suite.sh", timeout_s 560
# Budget: about 8 minutes on an H200 (16 cores build in about 3). Every step logs to $OUT; a failing step does not
# stop the later ones.
# Dry run on a CPU machine (plumbing only; small models, no CUDA tests or graphs):
#   OUT=/tmp/gpu-dry BUILD=build CONFIGURE=0 SMALL=1 PYTHON=.venv/bin/python ROUNDS=1 bash bench/gpu_suite.sh
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-/tmp/gpu-suite-out}"
BUILD="${BUILD:-build-gpu}"
ROUNDS="${ROUNDS:-2}"
PYTHON="${PYTHON:-python3}"
SMALL_ARG=""
[ "${SMALL:-0}" = 1 ] && SMALL_ARG="--small"
mkdir -p "$OUT"
RESULTS="$OUT/results.txt"
: > "$RESULTS"
step() { echo "== $1 ($(date -u +%H:%M:%S))" | tee -a "$OUT/summary.txt"; }
started=$(date +%s)

step "environment"
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || echo "no nvidia-smi";
  "$PYTHON" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'; } 2>&1 |
  tee "$OUT/environment.txt" | tee -a "$OUT/summary.txt"

if [ -d .whl ] && ls .whl/*.whl > /dev/null 2>&1; then
  step "Composer's wheels (.whl, tools/device/fetch_wheels.sh) into a private folder"
  "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/composer-site \
    .whl/*.whl > "$OUT/wheels.log" 2>&1
  echo "pip exit $?" | tee -a "$OUT/summary.txt"
  export PYTHONPATH="/tmp/composer-site${PYTHONPATH:+:$PYTHONPATH}"
fi

if [ "${CONFIGURE:-1}" = 1 ]; then
  step "configure"
  # shellcheck source=tools/device/configure.sh
  source tools/device/configure.sh
  configure_device_build "$BUILD" "$OUT/configure.log"
  echo "configure exit $?" | tee -a "$OUT/summary.txt"
fi
step "build"
ninja -C "$BUILD" -k 0 -j"$(nproc)" composer gpu_suite optim_test trainer_test microbatch_test models_test \
  > "$OUT/build.log" 2>&1
echo "build exit $?" | tee -a "$OUT/summary.txt"
grep -E "error|FAILED" "$OUT/build.log" | head -30 | tee -a "$OUT/summary.txt"

step "CUDA tests"
export COMPOSER_SOURCE_DIR="$PWD"
(cd "$BUILD/tests" && rc=0 &&
  { ./trainer_test --gtest_filter='CudaGraph*' || rc=1; } &&
  { ./optim_test --gtest_filter='GraphCapture*:DecoupledAdamW*:DecoupledSGDW*' || rc=1; } &&
  { ./microbatch_test --gtest_filter='*Cuda*' || rc=1; } &&
  { ./models_test --gtest_filter='ActivationCheckpointingTest.*' || rc=1; } && exit $rc) > "$OUT/cuda_tests.log" 2>&1
echo "CUDA tests exit $?" | tee -a "$OUT/summary.txt"
grep -E "^\[  (PASSED|FAILED|SKIPPED) |Failure|Skipped" "$OUT/cuda_tests.log" | head -20 | tee -a "$OUT/summary.txt"

cpp() {  # model mode
  timeout 240 "$BUILD/bench/gpu_suite" --model "$1" --mode "$2" $SMALL_ARG > "$OUT/run.log" 2>&1
  local rc=$?
  grep -h "^RESULT" "$OUT/run.log" >> "$RESULTS" ||
    echo "FAILED model=$1 mode=$2 rc=$rc $(tail -1 "$OUT/run.log" | tr ' ' '_' | cut -c1-200)" >> "$RESULTS"
  cat "$OUT/run.log" >> "$OUT/bench.log"
}
py() {  # model mode
  timeout 300 "$PYTHON" bench/python/gpu_reference.py --model "$1" --mode "$2" $SMALL_ARG > "$OUT/run.log" 2>&1
  local rc=$?
  grep -hE "^(RESULT|SKIPPED)" "$OUT/run.log" >> "$RESULTS" ||
    echo "FAILED model=$1 mode=python_$2 rc=$rc $(tail -1 "$OUT/run.log" | tr ' ' '_' | cut -c1-200)" >> "$RESULTS"
  cat "$OUT/run.log" >> "$OUT/bench.log"
}
for round in $(seq 1 "$ROUNDS"); do
  step "bench round $round"
  for model in mlp gpt2 resnet50; do
    cpp "$model" hand
    cpp "$model" trainer
    cpp "$model" trainer_graph
    py "$model" eager
    py "$model" cuda_graph
    py "$model" composer
    # torch.compile spends about a minute compiling GPT-2; once is enough (its steps are stable), and the anchors
    # have no ResNet-50 figure for it.
    if [ "$round" = 1 ] && [ "$model" != resnet50 ]; then py "$model" compile; fi
  done
done

step "report"
"$PYTHON" bench/summarize_gpu.py "$RESULTS" "$OUT/environment.txt" \
  "bash bench/gpu_suite.sh (ROUNDS=$ROUNDS${SMALL_ARG:+, SMALL=1})" > "$OUT/gpu.md"
cat "$OUT/gpu.md" | tee -a "$OUT/summary.txt"
step "done in $(( $(date +%s) - started )) s"
