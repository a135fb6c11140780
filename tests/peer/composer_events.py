"""Composer's side of the event-order peer test (tests/peer/peer_test.cpp runs the same scenario in C++).

Usage: python composer_events.py OUT_JSON SAVE_FOLDER

Scenario: 16 training samples in batches of 4 (4 batches an epoch, no shuffle), max_duration 2ep, two microbatches
per batch, evaluators every epoch and every 3 batches, a checkpoint every 2 batches, training stopped by a callback
at batch 6 (in the middle of the second epoch); then trainer.eval() and trainer.predict(). Writes every event that
a callback saw, in order, as a JSON list of Composer's event values ("init", "before_load", ...).
"""
import json
import sys

import torch
from torch.utils.data import DataLoader, TensorDataset

from composer import Callback, Evaluator, Trainer
from composer.models import ComposerClassifier


class Recorder(Callback):
    def __init__(self):
        self.events = []

    def run_event(self, event, state, logger):
        self.events.append(event.value)


class StopAtBatch(Callback):
    def __init__(self, batch):
        self.batch = batch

    def batch_end(self, state, logger):
        if int(state.timestamp.batch) == self.batch:
            state.stop_training()


def loader(n, batch_size, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 8, generator=g)
    y = torch.randint(0, 4, (n,), generator=g)
    return DataLoader(TensorDataset(x, y), batch_size=batch_size, shuffle=False)


def main():
    out, save_folder = sys.argv[1], sys.argv[2]
    torch.manual_seed(0)
    module = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    recorder = Recorder()
    trainer = Trainer(
        model=ComposerClassifier(module, num_classes=4),
        train_dataloader=loader(16, 4, 1),
        eval_dataloader=[
            Evaluator(label='eval_epoch', dataloader=loader(6, 3, 2), eval_interval='1ep'),
            Evaluator(label='eval_batches', dataloader=loader(4, 4, 3), eval_interval='3ba'),
        ],
        max_duration='2ep',
        device_train_microbatch_size=2,
        save_folder=save_folder,
        save_interval='2ba',
        save_overwrite=True,
        callbacks=[recorder, StopAtBatch(6)],
        progress_bar=False,
        log_to_console=False,
        device='cpu',
        seed=42,
    )
    trainer.fit()
    trainer.eval()
    trainer.predict(loader(5, 5, 4))
    with open(out, 'w') as f:
        json.dump(recorder.events, f)


if __name__ == '__main__':
    main()
