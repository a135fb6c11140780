"""Composer's side of the checkpoint peer tests (tests/peer/checkpoint_interop_test.cpp).

The run: an MLP 8-16-4 in float64, DecoupledAdamW(lr=0.01, weight_decay=0.01), constant learning rate, the 16
samples of DATA (a torch.save dict {"x", "y"} written by the C++ test) in batches of 4 in order, 3 epochs (12 batches).

  continue CKPT DATA OUT   load a composer-cpp checkpoint (load_path) into Composer's Trainer and train to 12 batches
  save DIR DATA OUT        train with Composer from its own initialisation, checkpoint at batch 6 into DIR, go on to 12
  save_sharded DIR DATA OUT  the same, but at batch 6 DIR is written as Composer writes a sharded checkpoint
                           (state_dict_type 'sharded'): torch.distributed.checkpoint.save of {'state': state.state_dict(),
                           'rng': the RNG states} with DefaultSavePlanner(dedup_save_to_lowest_rank=True). Composer's
                           FSDP itself needs CUDA; here the tensors are whole (one chunk each) instead of FSDP shards.

OUT (JSON): {"start_batch": batch after loading, "losses": {batch: loss} for the batches this process trained}.
A composer-cpp checkpoint has no Python or numpy RNG state (C++ has neither), so it is loaded with
load_ignore_keys=["rng"]; nothing in this run draws random numbers after initialisation.
"""
import json
import sys

import torch
from safetensors.torch import load_file
from torch.utils.data import DataLoader, TensorDataset

import torch.distributed.checkpoint as dist_cp
from torch.distributed.checkpoint import DefaultSavePlanner

from composer import Callback, Trainer
from composer.utils import reproducibility
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


class ShardedSaver(Callback):
    """At batch 6, Composer's sharded save (composer/utils/checkpoint.py, _save_checkpoint) of this state."""

    def __init__(self, folder):
        self.folder = folder

    def batch_end(self, state, logger):
        if int(state.timestamp.batch) != 6:
            return
        state_dict = {'state': state.state_dict(), 'rng': reproducibility.get_rng_state()}
        # One process without a process group: DCP saves as the single rank (no_dist), in the same format.
        dist_cp.save(state_dict=state_dict, storage_writer=dist_cp.FileSystemWriter(self.folder),
                     planner=DefaultSavePlanner(dedup_save_to_lowest_rank=True))


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
    elif mode == 'save_sharded':
        kwargs['callbacks'].append(ShardedSaver(path))
        trainer = Trainer(**kwargs)
    else:
        raise SystemExit(f'unknown mode {mode}')
    trainer.fit()
    with open(out, 'w') as f:
        json.dump({'start_batch': recorder.start_batch, 'losses': recorder.losses}, f)


if __name__ == '__main__':
    main()
