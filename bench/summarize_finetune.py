"""Summarizes bench/finetune.sh's output (stdin): per mode, the largest loss difference between the sides at any
step, and the median seconds per step of each side (the first step, which includes the allocator's warm-up, left out)
with their ratio; then the median tokens per second of generation on each side."""
import re
import statistics
import sys
from collections import defaultdict

losses = defaultdict(dict)       # (side, mode) -> {step: loss}
times = defaultdict(list)        # (side, mode) -> [seconds]
gen = defaultdict(list)          # side -> [tokens/s]
current = None
for line in sys.stdin:
    print(line, end="")
    if line.startswith("RUN "):
        current = tuple(line.split()[1:3])
    elif line.startswith("STEP ") and current:
        _, step, loss, secs = line.split()
        losses[current].setdefault(int(step), float(loss))
        if int(step) > 1:
            times[current].append(float(secs))
    elif line.startswith("GENERATE "):
        side = line.split()[1]
        gen[side].append(float(re.search(r"tokens_per_s=([\d.]+)", line).group(1)))
for mode in ("full", "lora"):
    ours, theirs = losses[("ours", mode)], losses[("composer", mode)]
    if not ours or not theirs:
        continue
    diff = max(abs(ours[s] - theirs[s]) for s in ours if s in theirs)
    t_ours, t_comp = statistics.median(times[("ours", mode)]), statistics.median(times[("composer", mode)])
    print(f"SUMMARY finetune mode={mode} steps={len(ours)} max_loss_diff={diff:.2e} "
          f"first_loss ours={ours[1]:.6f} composer={theirs[1]:.6f} last_loss ours={ours[max(ours)]:.6f} "
          f"composer={theirs[max(theirs)]:.6f} s_per_step ours={t_ours:.3f} composer={t_comp:.3f} "
          f"ratio={t_ours / t_comp:.3f}")
if gen["ours"] and gen["transformers"]:
    o, t = statistics.median(gen["ours"]), statistics.median(gen["transformers"])
    print(f"SUMMARY generate tokens_per_s ours={o:.1f} transformers={t:.1f} ratio={o / t:.2f}")
