"""Composer's losses, metrics and initializers (and torchmetrics' binary metrics) on the inputs the C++ peer test
sends: reads a JSON file of requests (argv[1]), writes the answers (argv[2]). Tensors travel as
{"shape": [...], "data": [...], "dtype": "float64" | "int64"}."""
import json
import sys

import torch
from composer.loss import DiceLoss, binary_cross_entropy_with_logits, soft_cross_entropy
from composer.loss.utils import ensure_targets_one_hot
from composer.metrics import Dice, MIoU
from composer.models import Initializer
from torchmetrics.classification import BinaryAUROC, BinaryF1Score


def tensor(t):
    dtype = torch.float64 if t['dtype'] == 'float64' else torch.int64
    return torch.tensor(t['data'], dtype=dtype).reshape(t['shape'])


def out(t):
    t = torch.as_tensor(t)
    return {'shape': list(t.shape), 'data': t.reshape(-1).double().tolist()}


def loss(spec):
    x, y = tensor(spec['input']), tensor(spec['target'])
    kwargs = spec.get('kwargs', {})
    if 'weight' in spec:
        kwargs['weight'] = tensor(spec['weight'])
    name = spec['loss']
    if name == 'soft_cross_entropy':
        return out(soft_cross_entropy(x, y, **kwargs))
    if name == 'binary_cross_entropy_with_logits':
        return out(binary_cross_entropy_with_logits(x, y, **kwargs))
    if name == 'dice_loss':
        return out(DiceLoss(**kwargs)(x, y))
    if name == 'ensure_targets_one_hot':
        return out(ensure_targets_one_hot(x, y))
    raise ValueError(name)


def metric(spec):
    name, kwargs = spec['metric'], spec.get('kwargs', {})
    m = {'MIoU': MIoU, 'Dice': Dice, 'BinaryF1Score': BinaryF1Score, 'BinaryAUROC': BinaryAUROC}[name](**kwargs)
    for update in spec['updates']:
        preds, target = tensor(update['preds']), tensor(update['target'])
        if name.startswith('Binary'):
            preds = preds.float()  # torchmetrics' float inputs
        m.update(preds, target)
    return float(m.compute())


def initializer(spec):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(5, 4), torch.nn.Conv2d(3, 2, 3), torch.nn.BatchNorm2d(2),
                                torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm2d(3)))
    torch.manual_seed(spec['seed'])
    model.apply(Initializer(spec['name']).get_initializer())
    return {k: out(v.detach()) for k, v in model.state_dict().items() if not k.endswith(('running_mean',
                                                                                           'running_var',
                                                                                           'num_batches_tracked'))}


def main():
    with open(sys.argv[1]) as f:
        requests = json.load(f)
    answers = {
        'losses': [loss(s) for s in requests.get('losses', [])],
        'metrics': [metric(s) for s in requests.get('metrics', [])],
        'initializers': [initializer(s) for s in requests.get('initializers', [])],
    }
    with open(sys.argv[2], 'w') as f:
        json.dump(answers, f)


if __name__ == '__main__':
    main()
