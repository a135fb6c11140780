"""Python mirror of bench/time_to_accuracy.cpp: same CNN, DecoupledSGDW, cosine-with-warmup schedule stepped per
batch as Composer does (batch k uses f(k-1)), batch 128, evaluation every N batches on the full test set, stop at
the target accuracy. Wall time excludes evaluation for train_s, as Composer's timestamp does.

--impl python: a hand-written PyTorch loop. --impl composer: MosaicML Composer's Trainer with the same model,
optimizer (composer.optim.DecoupledSGDW), scheduler (CosineAnnealingWithWarmupScheduler), data order (randperm
seeded seed + epoch, batches of 128, normalised as the loop does), eval cadence and ThresholdStopper, optionally
with Composer's algorithms (--algorithms weight_standardization,channels_last).

--profile DIR [--profile-batches N]: record N batches with torch.profiler's Kineto (after 20 skipped and 5 of warm-up;
record_shapes only, no memory or flops) into DIR, then stop, without evaluation: the Python loop through
torch.profiler.profile, Composer through its own Profiler. bench/peers/step_profile.sh."""
import argparse
import gzip
import math
import os
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


def read_idx(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        raw = f.read()
    ndim = raw[3]
    shape = tuple(int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim))
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim).reshape(shape)


def load(root, train):
    prefix = "train" if train else "t10k"
    def pick(name):
        p = os.path.join(root, name)
        return p if os.path.exists(p) else p + ".gz"
    x = read_idx(pick(f"{prefix}-images-idx3-ubyte"))
    y = read_idx(pick(f"{prefix}-labels-idx1-ubyte"))
    return torch.from_numpy(x.copy()).unsqueeze(1), torch.from_numpy(y.astype(np.int64))


class CNN(nn.Module):
    def __init__(self, width=32):
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(1, width, 3, padding=1, bias=False), nn.BatchNorm2d(width), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(width, 2 * width, 3, padding=1, bias=False), nn.BatchNorm2d(2 * width), nn.ReLU(), nn.MaxPool2d(2),
            nn.Flatten(), nn.Linear(2 * width * 7 * 7, 10))

    def forward(self, x):
        return self.net(x)


class DecoupledSGDW(torch.optim.Optimizer):
    def __init__(self, params, lr, momentum, weight_decay):
        super().__init__(params, dict(lr=lr, momentum=momentum, weight_decay=weight_decay))
        for g in self.param_groups:
            g["initial_lr"] = g["lr"]

    @torch.no_grad()
    def step(self):
        for g in self.param_groups:
            for p in g["params"]:
                if p.grad is None:
                    continue
                st = self.state[p]
                if "buf" not in st:
                    st["buf"] = p.grad.clone()
                else:
                    st["buf"].mul_(g["momentum"]).add_(p.grad)
                p.mul_(1 - (g["lr"] / g["initial_lr"]) * g["weight_decay"])
                p.add_(st["buf"], alpha=-g["lr"])


class EpochOrder(torch.utils.data.Sampler):
    """Batches of `batch` indices in the order randperm(n, seed + epoch), the epoch counting __iter__ calls."""

    def __init__(self, n, batch, seed):
        self.n, self.batch, self.seed, self.epoch = n, batch, seed, 0

    def __iter__(self):
        order = torch.randperm(self.n, generator=torch.Generator().manual_seed(self.seed + self.epoch))
        self.epoch += 1
        return iter([order[i:i + self.batch] for i in range(0, self.n, self.batch)])

    def __len__(self):
        return math.ceil(self.n / self.batch)


class Normalized(torch.utils.data.Dataset):
    """uint8 images, normalised a batch at a time (DataLoader calls __getitems__ with the batch's indices)."""

    def __init__(self, x, y, norm):
        self.x, self.y, self.norm = x, y, norm

    def __len__(self):
        return len(self.y)

    def __getitems__(self, idx):
        idx = torch.as_tensor(idx)
        return self.norm(self.x[idx]), self.y[idx]


PROFILE_SKIP, PROFILE_WARMUP = 20, 5  # as bench/time_to_accuracy.cpp's --profile

ALGORITHMS = {"weight_standardization": "WeightStandardization", "channels_last": "ChannelsLast",
              "label_smoothing": "LabelSmoothing", "blurpool": "BlurPool"}


def run_composer(a, xtr, ytr, xte_n, yte, norm):
    import composer.algorithms
    from composer import Trainer
    from composer.callbacks import ThresholdStopper
    from composer.models import ComposerClassifier
    from composer.optim import CosineAnnealingWithWarmupScheduler, DecoupledSGDW as ComposerSGDW
    torch.manual_seed(a.seed)
    model = ComposerClassifier(CNN(), num_classes=10)
    train = torch.utils.data.DataLoader(Normalized(xtr, ytr, norm), batch_sampler=EpochOrder(len(ytr), 128, a.seed),
                                        collate_fn=lambda b: b)
    test = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(xte_n, yte), batch_size=1000)
    algorithms = [getattr(composer.algorithms, ALGORITHMS[n])() for n in a.algorithms.split(",") if n]
    profiler, duration = None, f"{a.max_epochs}ep"
    if a.profile:
        from composer.profiler import Profiler, cyclic_schedule
        profiler = Profiler(schedule=cyclic_schedule(skip_first=PROFILE_SKIP, wait=0, warmup=PROFILE_WARMUP,
                                                     active=a.profile_batches, repeat=1),
                            trace_handlers=[], sys_prof_cpu=False, torch_prof_folder=a.profile,
                            torch_prof_filename="composer.{batch}.pt.trace.json", torch_prof_remote_file_name=None,
                            torch_prof_memory_remote_file_name=None, torch_prof_overwrite=True,
                            torch_prof_record_shapes=True, torch_prof_profile_memory=False, torch_prof_with_flops=False)
        duration, test = f"{PROFILE_SKIP + PROFILE_WARMUP + a.profile_batches}ba", None
    start = time.perf_counter()
    trainer = Trainer(model=model, train_dataloader=train, eval_dataloader=test, max_duration=duration, profiler=profiler,
                      optimizers=ComposerSGDW(model.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4),
                      schedulers=CosineAnnealingWithWarmupScheduler(t_warmup="100ba"), eval_interval=f"{a.eval_every}ba",
                      algorithms=algorithms,
                      callbacks=[] if a.profile else [ThresholdStopper("MulticlassAccuracy", "eval", a.target)],
                      device_train_microbatch_size=128,  # the batch sampler hides the batch size from Composer
                      progress_bar=False, log_to_console=False, device="cpu", precision="fp32", seed=a.seed)
    trainer.fit()
    total_s = time.perf_counter() - start
    st = trainer.state
    acc = float(st.eval_metric_values.get("MulticlassAccuracy", 0.0))
    return acc, int(st.timestamp.batch), st.timestamp.total_wct.total_seconds(), total_s


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--impl", choices=["python", "composer"], default="python")
    ap.add_argument("--algorithms", default="", help="composer only: comma-separated, e.g. weight_standardization,channels_last")
    ap.add_argument("--data", default="data/mnist")
    ap.add_argument("--target", type=float, default=0.985)
    ap.add_argument("--max-epochs", type=int, default=3)
    ap.add_argument("--eval-every", type=int, default=100)
    ap.add_argument("--seed", type=int, default=17)
    ap.add_argument("--threads", type=int, default=int(os.environ.get("OMP_NUM_THREADS", os.cpu_count())))
    ap.add_argument("--profile", default="", help="folder for a Kineto trace of --profile-batches batches")
    ap.add_argument("--profile-batches", type=int, default=30)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    fashion = "fashion" in a.data
    mean, std = (0.2860, 0.3530) if fashion else (0.1307, 0.3081)
    xtr, ytr = load(a.data, True)
    xte, yte = load(a.data, False)
    norm = lambda x: (x.float() / 255 - mean) / std
    xte_n = norm(xte)
    tag = "" if not a.algorithms else f" algorithms={a.algorithms}"
    if a.impl == "composer":
        acc, step, train_s, total_s = run_composer(a, xtr, ytr, xte_n, yte, norm)
        print(f"RESULT time_to_accuracy impl=composer data={'fashion_mnist' if fashion else 'mnist'} target={a.target:.4f} "
              f"reached={int(acc >= a.target)} acc={acc:.4f} batches={step} train_s={train_s:.2f} total_s={total_s:.2f} "
              f"threads={torch.get_num_threads()}{tag}")
        return
    if a.algorithms:
        raise SystemExit("--algorithms needs --impl composer")
    torch.manual_seed(a.seed)
    model = CNN()
    opt = DecoupledSGDW(model.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4)
    batch = 128
    per_epoch = math.ceil(len(xtr) / batch)
    total = per_epoch * a.max_epochs
    warm = 100

    def factor(t):
        if t < warm:
            return t / warm
        frac = min(1.0, (t - warm) / (total - warm))
        return (1 + math.cos(math.pi * frac)) / 2

    def evaluate():
        model.eval()
        correct = 0
        with torch.no_grad():
            for i in range(0, len(xte_n), 1000):
                correct += (model(xte_n[i:i + 1000]).argmax(1) == yte[i:i + 1000]).sum().item()
        model.train()
        return correct / len(xte_n)

    prof = None
    if a.profile:
        os.makedirs(a.profile, exist_ok=True)
        profiled = PROFILE_SKIP + PROFILE_WARMUP + a.profile_batches
        prof = torch.profiler.profile(
            activities=[torch.profiler.ProfilerActivity.CPU], record_shapes=True,
            schedule=torch.profiler.schedule(skip_first=PROFILE_SKIP, wait=0, warmup=PROFILE_WARMUP,
                                             active=a.profile_batches, repeat=1),
            on_trace_ready=lambda p: p.export_chrome_trace(os.path.join(a.profile, f"python.{profiled}.pt.trace.json")))
        prof.start()
    start = time.perf_counter()
    train_s, step, acc = 0.0, 0, 0.0
    for g in opt.param_groups:
        g["lr"] = g["initial_lr"] * factor(0)
    done = False
    for epoch in range(a.max_epochs):
        gen = torch.Generator().manual_seed(a.seed + epoch)
        order = torch.randperm(len(xtr), generator=gen)
        t0 = time.perf_counter()
        for i in range(0, len(order), batch):
            idx = order[i:i + batch]
            x, y = norm(xtr[idx]), ytr[idx]
            opt.zero_grad(set_to_none=True)
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            loss.item()
            for g in opt.param_groups:
                g["lr"] = g["initial_lr"] * factor(step)
            step += 1
            if prof is not None:
                prof.step()
                if step == profiled:
                    prof.stop()
                    done = True
                    break
                continue
            if step % a.eval_every == 0 or step == total:
                train_s += time.perf_counter() - t0
                acc = evaluate()
                t0 = time.perf_counter()
                if acc >= a.target:
                    done = True
                    break
        train_s += time.perf_counter() - t0
        if done:
            break
    total_s = time.perf_counter() - start
    print(f"RESULT time_to_accuracy impl=python data={'fashion_mnist' if fashion else 'mnist'} target={a.target:.4f} "
          f"reached={int(acc >= a.target)} acc={acc:.4f} batches={step} train_s={train_s:.2f} total_s={total_s:.2f} "
          f"threads={torch.get_num_threads()}")


if __name__ == "__main__":
    main()
