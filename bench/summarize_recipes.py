"""Markdown tables from bench/algorithm_recipes RESULT lines (screen and tta)."""
import statistics
import sys


def rows(path, kind):
    out = []
    for line in open(path):
        parts = line.split()
        if len(parts) > 2 and parts[0] == "RESULT" and parts[1] == kind:
            out.append(dict(p.split("=", 1) for p in parts[2:]))
    return out


def main(path):
    screen = rows(path, "screen")
    if screen:
        base = [r for r in screen if r["method"] == "baseline"]
        step0 = statistics.mean(float(r["step_ms"]) for r in base)
        acc0 = statistics.mean(float(r["acc"]) for r in base)
        print("| method | step ms | step time vs baseline | test accuracy | vs baseline (points) |")
        print("|---|---|---|---|---|")
        for r in screen:
            name = r["method"] + (" (run %d)" % (base.index(r) + 1) if r["method"] == "baseline" else "")
            print("| %s | %.1f | %.2fx | %.2f %% | %+.2f |" % (name, float(r["step_ms"]), float(r["step_ms"]) / step0,
                                                          100 * float(r["acc"]), 100 * (float(r["acc"]) - acc0)))
        print()
    tta = rows(path, "tta")
    if tta:
        seeds = sorted({r["seed"] for r in tta}, key=int)
        print("| seed | config | reached | batches | train s | total s | test acc |")
        print("|---|---|---|---|---|---|---|")
        for r in tta:
            print("| %s | %s | %s | %s | %s | %s | %.2f %% |" % (r["seed"], r["config"], r["reached"], r["batches"],
                                                               r["train_s"], r["total_s"], 100 * float(r["acc"])))
        speedups = []
        for s in seeds:
            pair = [r for r in tta if r["seed"] == s]
            b = [r for r in pair if r["config"] == "baseline"][0]
            c = [r for r in pair if r["config"] != "baseline"][0]
            if b["reached"] == "1" and c["reached"] == "1":
                speedups.append(float(b["train_s"]) / float(c["train_s"]))
        print()
        if speedups:
            print("Speed-up (baseline train s / recipe train s) over %d seeds: median %.2fx, min %.2fx, max %.2fx%s" % (
                len(speedups), statistics.median(speedups), min(speedups), max(speedups),
                "" if len(speedups) == len(seeds) else " (%d pairs where one side missed the target left out)" % (len(seeds) - len(speedups))))
        else:
            print("No seed where both reached the target.")


if __name__ == "__main__":
    main(sys.argv[1])
