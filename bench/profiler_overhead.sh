#!/usr/bin/env bash
# bench/profiler_overhead.sh [BUILD_DIR] -- what the profiler costs a training run: `composer-cpp train` of the
# mnist_cnn on synthetic 28x28 images (batch 64, BATCHES batches, one epoch, no evaluation) without a profiler and
# with each profiler setting, interleaved over ROUNDS rounds (the order rotates), timed from start to exit:
#   none          no profiler
#   default       Composer's default schedule (skip_first 0, wait 0, warmup 1, active 4, repeat 1: batches 1-5 of
#                 the epoch recorded), JSON trace handler, system profiler cpu, Kineto off
#   always        schedule repeat 0 (every batch recorded, a trace written every 5 batches), Kineto off
#   always_sys    as always, with the system profiler's cpu, memory, disk and net counters
#   always_kineto as always, with Kineto (profile_memory, with_flops) over every active batch
# Prints each run and, per setting, the median seconds and its ratio to `none`.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD="${1:-build}"
ROUNDS="${ROUNDS:-3}" BATCHES="${BATCHES:-300}"
CLI="$BUILD/tools/composer-cpp"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cat > "$work/run.yaml" <<YAML
model: {name: mnist_cnn}
train_data: {dataset: synthetic_images, num_samples: $((BATCHES * 64)), batch_size: 64, num_workers: 0}
max_duration: 1ep
progress_bar: false
seed: 1
YAML
kineto_off="torch_prof_profile_memory: false, torch_prof_with_flops: false"
declare -A profiler=(
  [none]=""
  [default]="profiler={sys_prof_cpu: true, $kineto_off, trace_handlers: [{name: json, folder: $work/traces, overwrite: true}]}"
  [always]="profiler={schedule: {repeat: 0}, sys_prof_cpu: false, $kineto_off, trace_handlers: [{name: json, folder: $work/traces, overwrite: true}]}"
  [always_sys]="profiler={schedule: {repeat: 0}, sys_prof_cpu: true, sys_prof_memory: true, sys_prof_disk: true, sys_prof_net: true, $kineto_off, trace_handlers: [{name: json, folder: $work/traces, overwrite: true}]}"
  [always_kineto]="profiler={schedule: {repeat: 0}, sys_prof_cpu: false, torch_prof_folder: $work/kineto, torch_prof_overwrite: true, trace_handlers: [{name: json, folder: $work/traces, overwrite: true}]}"
)
settings=(none default always always_sys always_kineto)
out="$work/results.txt"
for round in $(seq "$ROUNDS"); do
  for i in "${!settings[@]}"; do
    s="${settings[$(((i + round) % ${#settings[@]}))]}"
    rm -rf "$work/traces" "$work/kineto"
    args=("run_name=bench-$s")
    [ -n "${profiler[$s]}" ] && args+=("${profiler[$s]}")
    start=$(date +%s.%N)
    "$CLI" train "$work/run.yaml" "${args[@]}" > "$work/log.txt" 2>&1 || { cat "$work/log.txt"; exit 1; }
    end=$(date +%s.%N)
    traces=$({ find "$work/traces" "$work/kineto" -type f 2>/dev/null || true; } | wc -l)
    echo "RESULT round=$round setting=$s seconds=$(awk "BEGIN{print $end - $start}") trace_files=$traces" | tee -a "$out"
  done
done
.venv/bin/python - "$out" <<'PYEOF'
import statistics, sys
rows = [dict(kv.split("=") for kv in line.split()[1:]) for line in open(sys.argv[1])]
med = {}
for r in rows:
    med.setdefault(r["setting"], []).append(float(r["seconds"]))
base = statistics.median(med["none"])
for s, v in med.items():
    m = statistics.median(v)
    print(f"{s:14s} median {m:.3f} s  vs none {m / base:.3f}x")
PYEOF
