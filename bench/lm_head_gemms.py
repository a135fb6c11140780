"""The LM recipe's tied-head GEMMs alone (issue 45: is "LM time per batch <= 0.5x Composer's" reachable here?).

The LM recipe (bench/lm_recipe.sh: GPT-2 shape with 2 layers, d_model 128, vocabulary 50257, batch 16 x 128 tokens)
spends its step in the tied head: logits = h @ W^T over 2048 x 50257, and in the backward dh = g @ W and
dW = g^T @ h. This times those three GEMMs with LibTorch's CPU BLAS (the wheel's MKL, what both Composer and this
library run) and with numpy's bundled OpenBLAS, 2 threads each, median of ROUNDS.

Usage: OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2 .venv/bin/python bench/lm_head_gemms.py [ROUNDS]
"""
import statistics
import sys
import time

import numpy as np
import torch

rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
torch.set_num_threads(2)
torch.manual_seed(0)
h, w, g = torch.randn(2048, 128), torch.randn(50257, 128), torch.randn(2048, 50257)
hn, wn, gn = h.numpy(), w.numpy(), g.numpy()
cases = {
    "logits h @ W^T": (lambda: h @ w.t(), lambda: hn @ wn.T),
    "dh g @ W": (lambda: g @ w, lambda: gn @ wn),
    "dW g^T @ h": (lambda: g.t() @ h, lambda: gn.T @ hn),
}


def median_s(f):
    f()
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        f()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


print(f"lm_head_gemms: {rounds} rounds, torch {torch.__version__}, numpy {np.__version__}")
print("| GEMM | LibTorch (MKL) s | numpy (OpenBLAS) s |")
print("|---|---|---|")
total_t = total_n = best = 0.0
for name, (ft, fn) in cases.items():
    t, n = median_s(ft), median_s(fn)
    total_t, total_n, best = total_t + t, total_n + n, best + min(t, n)
    print(f"| {name} | {t:.3f} | {n:.3f} |")
print(f"| all three | {total_t:.3f} | {total_n:.3f} |")
print(f"best of each: {best:.3f} s")
