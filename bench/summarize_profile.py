"""Per-step breakdown of Kineto traces (Chrome JSON) of the same training step on several sides.

Usage: summarize_profile.py BATCHES LABEL=TRACE [LABEL=TRACE ...]

For each trace: the training thread (the one with the most operator time), its top-level operators (cpu_op events
not inside another cpu_op on that thread) summed by name per batch, the wall time per batch (first to last operator
of the window, over BATCHES), the part of it no operator covers (the framework's own code: the Python interpreter,
Composer's or our Trainer, the data loader's hand-off), and the operator time on other threads (data-loader
workers). Prints one table with a column per side, the largest operators first."""
import collections
import json
import sys


def top_level(events):
    """Events (sorted by start) not nested in an earlier one."""
    out, end = [], -1.0
    for e in events:
        if e["ts"] >= end:
            out.append(e)
            end = e["ts"] + e["dur"]
    return out


def summarize(path, batches):
    trace = json.load(open(path))
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    ops = [e for e in events if e.get("ph") == "X" and e.get("cat") == "cpu_op" and "dur" in e]
    by_tid = collections.defaultdict(list)
    for e in ops:
        by_tid[e["tid"]].append(e)
    main_tid = max(by_tid, key=lambda t: sum(e["dur"] for e in top_level(sorted(by_tid[t], key=lambda e: e["ts"]))))
    main = top_level(sorted(by_tid[main_tid], key=lambda e: e["ts"]))
    wall = (max(e["ts"] + e["dur"] for e in main) - min(e["ts"] for e in main)) / batches
    per_op = collections.Counter()
    for e in main:
        per_op[e["name"]] += e["dur"] / batches
    other = sum(e["dur"] for t, evs in by_tid.items() if t != main_tid
                for e in top_level(sorted(evs, key=lambda e: e["ts"]))) / batches
    return {"wall": wall, "ops": per_op, "other_threads": other}


def main():
    batches = int(sys.argv[1])
    sides = []
    for arg in sys.argv[2:]:
        label, path = arg.split("=", 1)
        sides.append((label, summarize(path, batches)))
    names = collections.Counter()
    for _, s in sides:
        names.update(s["ops"])
    width = max(12, max(len(label) for label, _ in sides))
    head = "| per batch, ms | " + " | ".join(label.ljust(width) for label, _ in sides) + " |"
    print(head)
    print("|---|" + "|".join("---:" for _ in sides) + "|")

    def row(name, values):
        print(f"| {name} | " + " | ".join(f"{v / 1000:.2f}".rjust(width) for v in values) + " |")

    row("**wall (training thread)**", [s["wall"] for _, s in sides])
    row("operators, top level", [sum(s["ops"].values()) for _, s in sides])
    row("outside operators", [s["wall"] - sum(s["ops"].values()) for _, s in sides])
    row("operators on other threads", [s["other_threads"] for _, s in sides])
    for name, _ in names.most_common():
        values = [s["ops"].get(name, 0.0) for _, s in sides]
        if max(values) < 50:  # under 0.05 ms per batch on every side
            continue
        row(f"`{name}`", values)


if __name__ == "__main__":
    main()
