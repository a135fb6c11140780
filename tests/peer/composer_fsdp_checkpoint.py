"""Composer's own FSDP writes a sharded checkpoint, for tests/dist/fsdp_test.cpp to load in C++.

Run under torchrun on 2 ranks: python -m torch.distributed.run --standalone --nproc_per_node 2 \
    composer_fsdp_checkpoint.py SAVE_FOLDER
Trains the fsdp_worker's network (Linear 7->31, Tanh, Linear 31->5 in float64, in a ComposerClassifier: parameters
module.0.* and module.2.*) for 3 batches with Composer's Trainer under parallelism_config fsdp (FULL_SHARD,
mixed_precision FULL, state_dict_type sharded) and DecoupledAdamW in the worker's two groups (weight decay 1e-4 on
the weights, none on the biases), saving SAVE_FOLDER/ep0-ba3 in PyTorch's Distributed Checkpoint layout through torch
FSDP's sharded state dict.

Composer 0.32.1 hands FSDP device_id=torch.cuda.current_device(), which needs CUDA; on this CPU-only machine that call
is pointed at the CPU device (torch FSDP shards on CPU over Gloo), the one change to Composer's code path.
"""
import sys

import torch

torch.cuda.current_device = lambda: torch.device('cpu')

from composer import Trainer  # noqa: E402
from composer.models import ComposerClassifier  # noqa: E402
from composer.optim import DecoupledAdamW  # noqa: E402
from composer.utils import dist  # noqa: E402


def main():
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(7, 31), torch.nn.Tanh(), torch.nn.Linear(31, 5)).double()
    model = ComposerClassifier(net, num_classes=5)
    x = torch.randn(48, 7, dtype=torch.float64)
    y = torch.randint(0, 5, (48,))
    data = torch.utils.data.TensorDataset(x, y)
    loader = torch.utils.data.DataLoader(data, batch_size=8, sampler=dist.get_sampler(data, shuffle=False))
    named = list(model.named_parameters())
    optimizer = DecoupledAdamW([{'params': [p for n, p in named if 'bias' not in n]},
                                {'params': [p for n, p in named if 'bias' in n], 'weight_decay': 0.0}],
                               lr=1e-2, weight_decay=1e-4)
    trainer = Trainer(model=model, train_dataloader=loader, max_duration='3ba', device='cpu', optimizers=optimizer,
                      parallelism_config={'fsdp': {'sharding_strategy': 'FULL_SHARD', 'mixed_precision': 'FULL',
                                                   'state_dict_type': 'sharded'}},
                      save_folder=sys.argv[1], save_interval='3ba', progress_bar=False, log_to_console=False)
    trainer.fit()
    print(f'saved rank {dist.get_global_rank()}', flush=True)


if __name__ == '__main__':
    main()
