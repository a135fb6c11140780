"""Composer's side of the checkpoint peer tests (tests/peer/checkpoint_interop_test.cpp).

The run: an MLP 8-16-4 in float64, DecoupledAdamW(lr=0.01, weight_decay=0.01), constant learning rate, the 16
samples of DATA (a torch.save dict {"x", "y"} written by the C++ test) in batches of 4 in order, 3 epochs (12 batches).

  continue CKPT DATA OUT   load a composer-cpp checkpoint (load_path) into Composer's Trainer and train to 12 batches
  save DIR DATA OUT        train with Composer from its own initialisation, checkpoint at batch 6 into DIR, go on to 12

OUT (JSON): {"start_batch": batch after loading, "losses": {batch: loss} for the batches this process trained}.
A composer-cpp checkpoint has no Python or numpy RNG state (C++ has neither), so it is loaded with
load_ignore_keys=["rng"]; nothing in this run draws random numbers after initialisation.
"""
import json
import sys

import torch
from safetensors.torch import load_file
from torch.utils.data import DataLoader, TensorDataset

from composer import Callback, Trainer
from composer.models import ComposerClassifier
from composer.optim import DecoupledAdamW


class LossRecorder(Callback):
    def __init__(self):
        self.losses = {}
        self.start_batch = None

    def fit_start(self, state, logger):
        self.start_batch = int(state.timestamp.batch)

    def batch_end(self, state, logger):
        self.losses[int(state.timestamp.batch)] = float(state.loss)


def main():
    mode, path, data_path, out = sys.argv[1:5]
    data = load_file(data_path)
    loader = DataLoader(TensorDataset(data["x"], data["y"]), batch_size=4, shuffle=False)
    torch.manual_seed(0)
    module = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4)).double()
    model = ComposerClassifier(module, num_classes=4)
    recorder = LossRecorder()
    kwargs = dict(model=model, train_dataloader=loader, max_duration='12ba', callbacks=[recorder],
                  optimizers=DecoupledAdamW(model.parameters(), lr=0.01, weight_decay=0.01),
                  progress_bar=False, log_to_console=False, device='cpu', seed=42)
    if mode == 'continue':
        trainer = Trainer(load_path=path, load_ignore_keys=['rng'], **kwargs)
    elif mode == 'save':
        trainer = Trainer(save_folder=path, save_interval='6ba', save_overwrite=True, **kwargs)
    else:
        raise SystemExit(f'unknown mode {mode}')
    trainer.fit()
    with open(out, 'w') as f:
        json.dump({'start_batch': recorder.start_batch, 'losses': recorder.losses}, f)


if __name__ == '__main__':
    main()
