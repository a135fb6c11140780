#!/usr/bin/env bash
# tools/docs/screenshots.sh [BUILD_DIR] -- the pictures in docs/profiler.md and docs/loggers.md, from a real run:
# the demo's CNN on Fashion-MNIST for BATCHES batches with the TensorboardLogger, an ImageVisualizer and the profiler
# (JSON traces with Kineto's operators). The trace of the recorded window is drawn by tools/docs/render_trace.py;
# TensorBoard itself (the project environment's) serves the event files on loopback and headless Chromium (Debian's
# `chromium`) takes the screenshot. Writes docs/images/profiler_trace.png and docs/images/tensorboard_scalars.png.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD="${1:-build}"
BATCHES="${BATCHES:-400}" PORT="${PORT:-6123}"
command -v chromium >/dev/null || { echo "screenshots: needs Debian's chromium (apt-get install chromium)"; exit 1; }
work="$(mktemp -d)"
tb_pid=""
trap '[ -n "$tb_pid" ] && kill "$tb_pid" 2>/dev/null; rm -rf "$work"' EXIT
"$BUILD/tools/composer-cpp" train examples/configs/fashion_cnn.yaml run_name=docs-pictures max_duration="${BATCHES}ba" \
  eval_interval=100ba save_folder= progress_bar=false \
  "loggers=[{name: tensorboard, log_dir: $work/tb, flush_interval: 10}]" \
  "callbacks=[{name: speed_monitor, window_size: 20}, {name: lr_monitor}, {name: image_visualizer, interval: 100ba}]" \
  "profiler={schedule: {skip_first: 20, wait: 0, warmup: 1, active: 2, repeat: 1}, torch_prof_folder: $work/kineto, trace_handlers: [{name: json, folder: $work/traces}]}"
mkdir -p docs/images
trace="$(find "$work/traces" -name 'ep*-rank0.json' | sort | head -1)"
.venv/bin/python tools/docs/render_trace.py "$trace" docs/images/profiler_trace.png \
  --title "composer-cpp profiler: two batches of the Fashion-MNIST CNN (event markers, callbacks, Kineto operators)"
.venv/bin/tensorboard --logdir "$work/tb" --host 127.0.0.1 --port "$PORT" >"$work/tensorboard.log" 2>&1 &
tb_pid=$!
for _ in $(seq 60); do curl -sf "http://127.0.0.1:$PORT/data/runs" >/dev/null && break; sleep 1; done
chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1500,1000 \
  --virtual-time-budget=15000 --screenshot=docs/images/tensorboard_scalars.png \
  "http://127.0.0.1:$PORT/?darkMode=false#scalars&tagFilter=%5E(loss%2Ftrain%7Cmetrics%2Feval%7Clr-%7Cthroughput%2Fsamples)" 2>"$work/chromium.log" || { cat "$work/chromium.log"; exit 1; }
echo "screenshots: wrote docs/images/profiler_trace.png and docs/images/tensorboard_scalars.png"
