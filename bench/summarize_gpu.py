"""Turns bench/gpu_suite.sh's RESULT lines into bench/results/gpu.md's section: per model, each mode's mean step
time over the rounds, its ratio to Python eager, and issue 17's targets checked.

    python bench/summarize_gpu.py RESULTS_FILE ENVIRONMENT_FILE COMMAND
"""
import collections
import datetime
import sys

# Issue 17's targets on one H200 (ms per step) and the anchors' Python eager figures (gpu-anchors.md).
TARGETS = {
    "gpt2": ("trainer", 39.7, "GPT-2 124M, 16 x 1024 tokens, bf16, DecoupledAdamW (fused)"),
    "mlp": ("trainer_graph", 0.40, "MLP 784-4x1024-10, batch 128, fp32, SGD"),
    "resnet50": ("trainer", 54.0, "ResNet-50, 224 px, batch 256, bf16, channels_last, SGD momentum"),
}
ANCHOR_EAGER = {"gpt2": 47.7, "mlp": 1.76, "resnet50": 54.4}
ORDER = ["hand", "trainer", "trainer_graph", "python_eager", "python_compile", "python_cuda_graph", "python_composer"]
LABEL = {
    "hand": "C++ hand-written loop",
    "trainer": "C++ Trainer",
    "trainer_graph": "C++ Trainer, cuda_graph: true",
    "python_eager": "Python eager",
    "python_compile": "Python torch.compile",
    "python_cuda_graph": "Python, step in torch.cuda.graph",
    "python_composer": "Composer's Trainer",
}


def parse(path):
    times = collections.defaultdict(list)
    notes = {}
    for line in open(path):
        kind, *fields = line.split()
        kv = dict(f.split("=", 1) for f in fields if "=" in f)
        key = (kv.get("model"), kv.get("mode"))
        if kind == "RESULT":
            times[key].append(float(kv["ms_per_step"]))
        elif kind in ("SKIPPED", "FAILED"):
            notes[key] = kind.lower() + ": " + (kv.get("reason") or " ".join(fields[2:])).replace("_", " ")
    return times, notes


def main():
    results, environment, command = sys.argv[1:4]
    times, notes = parse(results)
    env = open(environment).read().strip().splitlines()
    out = [f"## {datetime.date.today().isoformat()}: {command}", "", "Machine: " + "; ".join(env), ""]
    out.append("Mean ms per step over the rounds (each round's value in brackets); ratio = Python eager / this.")
    for model, (mode, target, what) in TARGETS.items():
        out += ["", f"### {model}: {what}", "", "| run | ms/step | rounds | vs Python eager |", "|---|---|---|---|"]
        eager = times.get((model, "python_eager"))
        eager_ms = sum(eager) / len(eager) if eager else None
        for m in ORDER:
            t = times.get((model, m))
            if not t:
                out.append(f"| {LABEL[m]} | - | {notes.get((model, m), 'not run')} | |")
                continue
            mean = sum(t) / len(t)
            ratio = f"{eager_ms / mean:.2f}x" if eager_ms else ""
            out.append(f"| {LABEL[m]} | {mean:.3f} | {', '.join(f'{v:.3f}' for v in t)} | {ratio} |")
        got = times.get((model, mode))
        verdict = "not measured"
        if "SMALL=1" in command:
            verdict = "not judged: small sizes check the plumbing, the targets are for the full sizes on the GPU"
        elif got:
            mean = sum(got) / len(got)
            verdict = f"{LABEL[mode]} {mean:.3f} ms: {'met' if mean <= target else 'missed'}"
        out.append("")
        out.append(f"Target: {LABEL[mode]} <= {target} ms (anchors' Python eager: {ANCHOR_EAGER[model]} ms). {verdict}.")
        hand, trainer = times.get((model, "hand")), times.get((model, "trainer"))
        if hand and trainer:
            gap = (sum(trainer) / len(trainer)) / (sum(hand) / len(hand)) - 1
            out.append(f"Trainer vs the hand-written loop: {gap * 100:+.1f} % (target: within 1 %).")
    print("\n".join(out))


if __name__ == "__main__":
    main()
