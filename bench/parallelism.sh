#!/usr/bin/env bash
# bench/parallelism.sh [BUILD_DIR] -- issue 44 item 6: per-rank memory and step time of the SmolLM2-135M-shaped
# Llama (bench/fsdp_scaling --model smollm2: 30 layers, hidden 576, GQA 9/3 heads, tied 49152-token embedding) under
# DDP, FULL_SHARD, SHARD_GRAD_OP, tensor parallelism over every rank ("TP") and, on 4 ranks, FSDP 2 x TP 2
# ("FSDPxTP") on 1, 2 and 4 ranks (composer-cpp launch), the strategies interleaved at each world size and reversed
# every other round. On the 2-core CPU the ranks share the cores: step times compare strategies at one world size, not
# scaling. SmolLM2's 9 query and 3 key-value heads do not split in 2 or 4, so TP splits the MLPs only
# (--tp-plan mlp; the attention stays whole on every rank of the group) and, in the rows TP_PLANS adds, the
# vocabulary too (mlp+vocab: the tied 49152-token embedding's rows, the logits gathered; mlp+vocab+loss: with
# loss_parallel, the logits left split for the loss; a "+sp" suffix adds sequence_parallel, which needs the
# default plan: SmolLM2's heads split in 3, so WORLDS=3); the global batch is the same for every row.
# Each world size also runs FULL_SHARD with the model built under nn::DeferredInit ("FULL_SHARD+deferred": drawn unit
# by unit, each sharded as drawn); "setup peak" is the resident high-water mark from building the model to the end of
# the Trainer's construction. (The larger configuration that does not fit one process under a memory limit is
# tests/dist/deferred_init_dist_test.cpp's: 4 ranks under RLIMIT_AS.)
# Environment: ROUNDS (default 1), STEPS (default 3), SEQ (default 64), BATCH (default 2 per rank), WORLDS
# (default "1 2 4"), TP_PLANS (default "mlp mlp+vocab mlp+vocab+loss": the TP rows' plans), STRATEGIES (default
# "ddp FULL_SHARD SHARD_GRAD_OP FULL_SHARD+deferred": the other rows). Prints each RESULT
# line, then a table of medians per (world, strategy).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD="${1:-build}"
ROUNDS="${ROUNDS:-1}"
STEPS="${STEPS:-3}"
SEQ="${SEQ:-64}"
BATCH="${BATCH:-2}"
WORLDS="${WORLDS:-1 2 4}"
TP_PLANS="${TP_PLANS:-mlp mlp+vocab mlp+vocab+loss}"
STRATEGIES="${STRATEGIES:-ddp FULL_SHARD SHARD_GRAD_OP FULL_SHARD+deferred}"
out="$(mktemp)"
trap 'rm -f "$out"' EXIT
echo "parallelism: smollm2 shape, $ROUNDS round(s), $STEPS steps, seq $SEQ, batch $BATCH per rank, $(nproc) cores; $(date -u +%FT%TZ)"
for n in $WORLDS; do
  for round in $(seq 1 "$ROUNDS"); do
    order="$STRATEGIES"
    if ((n > 1)); then for p in $TP_PLANS; do order="$order TP:$p"; done; fi
    if ((n == 4)); then order="$order FSDPxTP"; fi
    if ((round % 2 == 0)); then order="$(echo "$order" | tr ' ' '\n' | tac | tr '\n' ' ')"; fi
    for s in $order; do
      extra=(--strategy "${s%+deferred}" --deferred 0)
      case "$s" in
        *+deferred) extra=(--strategy FULL_SHARD --deferred 1) ;;
        TP:*)
          plan="${s#TP:}" loss=0 sp=0
          if [[ "$plan" == *+sp ]]; then plan="${plan%+sp}" sp=1; fi
          if [[ "$plan" == *+loss ]]; then plan="${plan%+loss}" loss=1; fi
          extra=(--strategy FULL_SHARD --tp "$n" --tp-plan "$plan" --loss-parallel "$loss" --sequence-parallel "$sp") ;;
        FSDPxTP) extra=(--strategy FULL_SHARD --tp 2 --tp-plan mlp) ;;
      esac
      "$BUILD/tools/composer-cpp" launch -n "$n" -- "$BUILD/bench/fsdp_scaling" --model smollm2 "${extra[@]}" \
        --steps "$STEPS" --seq "$SEQ" --batch "$BATCH" | grep "RESULT" | tee -a "$out"
    done
  done
done
python3 - "$out" <<'PYEOF'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    kv = dict(x.split("=", 1) for x in line.split() if "=" in x)
    name = kv["strategy"] + ("+deferred" if kv.get("deferred") == "1" else "")
    tp = int(kv.get("tp", "1"))
    if tp > 1:
        plan = kv.get("plan", "default") + (", loss_parallel" if kv.get("loss_parallel") == "1" else "") + (", sequence_parallel" if kv.get("sequence_parallel") == "1" else "")
        name = ("TP %d" % tp if tp == int(kv["world"]) else "FULL_SHARD %d x TP %d" % (int(kv["world"]) // tp, tp)) + " (" + plan + ")"
    rows.setdefault((int(kv["world"]), name), []).append(kv)
mib = lambda b: float(b) / 2**20
print("| ranks | strategy | step s (median) | params MiB / rank | grads MiB / rank | optimizer MiB / rank | setup peak RSS MiB / rank (max) | peak RSS MiB / rank (max) |")
print("|---|---|---|---|---|---|---|---|")
for (world, strategy), sel in sorted(rows.items()):
    med = lambda k: statistics.median(float(r[k]) for r in sel)
    print(f"| {world} | {strategy} | {med('step_ms') / 1000:.2f} | {mib(med('param_bytes')):.0f} | "
          f"{mib(med('grad_bytes')):.0f} | {mib(med('optim_bytes')):.0f} | {max(float(r['setup_peak_mib']) for r in sel):.0f} | "
          f"{max(float(r['peak_rss_mib']) for r in sel):.0f} |")
PYEOF
