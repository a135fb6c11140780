"""Draws a Chrome trace (what the profiler's JSON trace handler writes) as a timeline PNG, for the docs.

  render_trace.py TRACE.json OUT.png [--title TEXT]

One lane per process/thread, durations ("X", and "B"/"E" pairs) stacked by nesting depth, counters ("C") as lines
below; names are printed where a bar is wide enough. No browser or Perfetto needed.
"""
import argparse
import collections
import json

import matplotlib

matplotlib.use("Agg")
import matplotlib.patches  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402


def spans(events):
    """(lane, start_us, dur_us, name) for every duration event; B/E matched per lane as a stack."""
    out, stacks = [], collections.defaultdict(list)
    for e in sorted(events, key=lambda e: (e.get("ts", 0), 0 if e.get("ph") == "E" else 1)):
        lane = (e.get("pid"), e.get("tid"))
        if e.get("ph") == "X":
            out.append((lane, e["ts"], e.get("dur", 0), e.get("name", "")))
        elif e.get("ph") == "B":
            stacks[lane].append(e)
        elif e.get("ph") == "E" and stacks[lane]:
            b = stacks[lane].pop()
            out.append((lane, b["ts"], e["ts"] - b["ts"], b.get("name", "")))
    return out


def depths(lane_spans):
    """Nesting depth of each span in one lane (a span inside an open one goes one row down)."""
    result, open_ends = [], []
    for start, dur, name in sorted(lane_spans, key=lambda s: (s[0], -s[1])):
        while open_ends and open_ends[-1] <= start:
            open_ends.pop()
        result.append((start, dur, name, len(open_ends)))
        open_ends.append(start + dur)
    return result


KINDS = {"engine events": "#4c78a8", "algorithms and callbacks": "#54a24b", "operators (Kineto)": "#f58518",
         "profiler": "#bab0ac"}


def color(name):
    if name.startswith("event/") or name.startswith("dataloader/"):
        return KINDS["engine events"]
    if name.startswith("algorithm/") or name.startswith("callback/"):
        return KINDS["algorithms and callbacks"]
    if name.startswith("PyTorch Profiler"):
        return KINDS["profiler"]
    return KINDS["operators (Kineto)"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("trace")
    ap.add_argument("out")
    ap.add_argument("--title", default="")
    args = ap.parse_args()
    data = json.load(open(args.trace))
    events = data["traceEvents"] if isinstance(data, dict) else data
    names = {(e.get("pid"), e.get("tid")): e["args"]["name"] for e in events
             if e.get("ph") == "M" and e.get("name") == "thread_name"}
    by_lane = collections.defaultdict(list)
    for lane, start, dur, name in spans(events):
        by_lane[lane].append((start, dur, name))
    counters = collections.defaultdict(list)
    for e in events:
        if e.get("ph") == "C":
            for k, v in e.get("args", {}).items():
                counters[f"{e.get('name')}.{k}"].append((e["ts"], v))
    counters = {k: v for k, v in counters.items() if len(v) > 1}  # a line needs two samples
    t0 = min(s for lane in by_lane.values() for s, _, _ in lane)
    lanes = sorted(by_lane, key=lambda l: (str(l[0]), -len(by_lane[l])))
    laid = {lane: depths(by_lane[lane]) for lane in lanes}
    rows = sum(max(d for *_, d in laid[l]) + 2 for l in lanes) + (3 if counters else 0)
    fig, ax = plt.subplots(figsize=(16, max(4, rows * 0.32)), dpi=110)
    span_ms = max(s + d for lane in by_lane.values() for s, d, _ in lane) / 1000.0 - t0 / 1000.0
    px_per_ms = 16 * 110 * 0.85 / max(span_ms, 1e-6)  # the plot's width in pixels over the time shown
    y, ticks, labels = 0, [], []
    for lane in lanes:
        depth_max = max(d for *_, d in laid[lane])
        ticks.append(y + depth_max / 2)
        labels.append(names.get(lane, f"pid {lane[0]} tid {lane[1]}"))
        for start, dur, name, d in laid[lane]:
            x, w = (start - t0) / 1000.0, max(dur / 1000.0, 0.001)
            ax.barh(y + d, w, left=x, height=0.85, color=color(name), edgecolor="white", linewidth=0.3)
            if w * px_per_ms > 4.3 * len(name) + 6:  # the name fits inside the bar
                ax.text(x + w / 2, y + d, name, ha="center", va="center", fontsize=6.5, clip_on=True)
        y += depth_max + 2
    if counters:
        ax2 = ax.inset_axes([0, -0.22, 1, 0.15], sharex=ax)
        for key, points in counters.items():
            ax2.plot([(t - t0) / 1000.0 for t, _ in points], [v for _, v in points], label=key)
        ax2.legend(fontsize=7, loc="upper right")
        ax2.set_yticks([])
    ax.legend(handles=[matplotlib.patches.Patch(color=c, label=k) for k, c in KINDS.items()], fontsize=8,
              loc="lower right")
    ax.set_yticks(ticks, labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("milliseconds")
    ax.set_title(args.title or args.trace, fontsize=10)
    fig.savefig(args.out, bbox_inches="tight")


if __name__ == "__main__":
    main()
