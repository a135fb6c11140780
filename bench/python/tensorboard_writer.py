"""bench/logger_overhead.sh's reference: torch's SummaryWriter (under Composer's TensorboardLogger) writing S steps of
K scalars, flushed every 100 steps, timed to the closed file. Prints "RESULT impl=python steps=S keys=K us_per_step=X
bytes=B"."""
import argparse
import os
import shutil
import time

from torch.utils.tensorboard import SummaryWriter

p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=20000)
p.add_argument("--keys", type=int, default=20)
p.add_argument("--dir", default="/tmp/composer_logger_bench_py")
a = p.parse_args()
shutil.rmtree(a.dir, ignore_errors=True)
names = [f"metrics/train/key_{k}" for k in range(a.keys)]
start = time.perf_counter()
w = SummaryWriter(log_dir=os.path.join(a.dir, "bench"), flush_secs=365 * 24 * 3600)
for s in range(1, a.steps + 1):
    for k, name in enumerate(names):
        w.add_scalar(name, 1.0 / (s + k), global_step=s)
    if s % 100 == 0:
        w.flush()
w.close()
us = (time.perf_counter() - start) * 1e6
size = sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(a.dir) for f in fs)
print(f"RESULT impl=python steps={a.steps} keys={a.keys} us_per_step={us / a.steps:.3f} bytes={size}")
