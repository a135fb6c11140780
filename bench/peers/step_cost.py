"""Per-step cost in Python: MosaicML Composer's Trainer and a hand-written PyTorch loop on the same MLP.

The Python half of bench/peers/step_cost.sh (the C++ half is build/bench/trainer_overhead): MLP 784-256-256-10,
batch 64, SGD(lr 0.01, momentum 0.9), 50 batches of synthetic data in memory cycled for --batches steps.

Usage: step_cost.py --mode composer|torch [--batches N] [--threads T]
Prints: RESULT step_cost impl=<composer|torch> us_per_step=<float>
"""
import argparse
import time

import torch
from torch.utils.data import DataLoader, TensorDataset


def make_mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(784, 256), torch.nn.ReLU(), torch.nn.Linear(256, 256), torch.nn.ReLU(),
                               torch.nn.Linear(256, 10))


def data():
    g = torch.Generator().manual_seed(3)
    return TensorDataset(torch.randn(64 * 50, 784, generator=g), torch.randint(0, 10, (64 * 50,), generator=g))


def run_torch(batches):
    net = make_mlp()
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    loader = DataLoader(data(), batch_size=64, shuffle=True, generator=torch.Generator().manual_seed(1))
    it = iter(loader)
    start = time.perf_counter()
    for _ in range(batches):
        try:
            x, y = next(it)
        except StopIteration:
            it = iter(loader)
            x, y = next(it)
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(net(x), y)
        loss.backward()
        opt.step()
        loss.item()  # a real loop logs its loss
    return time.perf_counter() - start


def run_composer(batches):
    from composer import Trainer
    from composer.models import ComposerClassifier
    model = ComposerClassifier(make_mlp(), num_classes=10)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loader = DataLoader(data(), batch_size=64, shuffle=True, generator=torch.Generator().manual_seed(1))
    trainer = Trainer(model=model, train_dataloader=loader, optimizers=opt, max_duration=f'{batches}ba',
                      progress_bar=False, log_to_console=False, device='cpu', precision='fp32', seed=0)
    start = time.perf_counter()
    trainer.fit()
    return time.perf_counter() - start


def main():
    p = argparse.ArgumentParser()
    p.add_argument('--mode', choices=['composer', 'torch'], required=True)
    p.add_argument('--batches', type=int, default=300)
    p.add_argument('--threads', type=int, default=2)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    run = run_composer if a.mode == 'composer' else run_torch
    run(20)  # warm-up
    seconds = run(a.batches)
    print(f'RESULT step_cost impl={a.mode} us_per_step={1e6 * seconds / a.batches:.1f}', flush=True)


if __name__ == '__main__':
    main()
