"""Answers questions about Composer's semantics for tests/peer/semantics_test.cpp.

Usage: composer_semantics.py REQUESTS.json ANSWERS.json
REQUESTS: {"time_strings": [str], "schedulers": [{"class": str, "kwargs": {...}, "max_duration": str,
           "dataloader_len": int, "ssr": float, "batches": [int]}],
           "gradient_clipping": [{"clipping_type": str, "clipping_threshold": float,
                                  "params": [{"shape": [int], "weight": [float], "grad": [float] | null}]}],
           "seq_length_warmup": [...], "ema": [{"kwargs": {...}, "tensors": [{"name": str, "shape": [int],
                    "dtype": "float64" | "int64", "buffer": bool, "model": [float], "ema": [float]}]}],
           "freeze_layers": [{"current_duration": float, "freeze_start": float, "freeze_level": float}],
           "alibi": [{"n_heads": int, "max_len": int, "causal": bool}],
           "optimizer_metrics": [{"lr", "betas", "eps", "weight_decay": float, "params": [{"name": str,
                                  "shape": [int], "weight": [float]}], "grads": [[[float]]] (per step, per param)}],
           "gpu_flops": [{"device_name": str, "precision": "fp32" | "amp_fp16" | "amp_bf16"}],
           "fsdp_mixed_precision": [{"precision": str, "mixed_precision": str | {key: str}}]}
ANSWERS:  {"time_strings": [{"value": float, "unit": str} | {"error": str}],
           "schedulers": [{"factors": [float]} | {"error": str}],
           "gradient_clipping": [{"grads": [[float] | null]}],  (float64, flattened)
           "ema": [{"smoothing": float, "ema": {name: [float]}} | {"error": str}],
           "freeze_layers": [{"depth": int, "percentage": float, "requires_grad": [bool], "in_optimizer": int}],
           "alibi": [{"slopes": [float], "shape": [int], "bias": [float]}],
           "early_stopper": [[bool]],
           "optimizer_metrics": [{key: float}],
           "gpu_flops": [float | null],  (optimizer_metrics: OptimizerMonitor's keys after DecoupledAdamW steps)
           "fsdp_mixed_precision": [{"param_dtype", "reduce_dtype", "buffer_dtype": str | null} | {"error": str}]}
"""
import json
import sys
import types
import warnings

from composer.core.time import Time, Timestamp
from composer.optim import scheduler as composer_schedulers


def time_string(text):
    try:
        t = Time.from_timestring(text)
    except Exception as e:  # noqa: BLE001 - every refusal is an answer
        return {'error': f'{type(e).__name__}: {e}'}
    return {'value': repr(float(t.value)), 'unit': t.unit.value}  # a string: JSON has no inf


def scheduler_factors(spec):
    cls = getattr(composer_schedulers, spec['class'])
    kwargs = dict(spec['kwargs'])
    sched = cls(**kwargs)
    length = spec['dataloader_len']
    state = types.SimpleNamespace(max_duration=Time.from_timestring(spec['max_duration']), dataloader_len=length)
    factors = []
    try:
        for batch in spec['batches']:
            state.timestamp = Timestamp(epoch=batch // length, batch=batch, batch_in_epoch=batch % length)
            with warnings.catch_warnings():
                warnings.simplefilter('ignore')
                factors.append(float(sched(state, spec['ssr'])))
    except Exception as e:  # noqa: BLE001
        return {'error': f'{type(e).__name__}: {e}'}
    return {'factors': factors}


def clipped_gradients(spec):
    import torch
    from composer.algorithms.gradient_clipping import apply_gradient_clipping

    params = torch.nn.ParameterList()
    for p in spec['params']:
        param = torch.nn.Parameter(torch.tensor(p['weight'], dtype=torch.float64).reshape(p['shape']))
        if p['grad'] is not None:
            param.grad = torch.tensor(p['grad'], dtype=torch.float64).reshape(p['shape'])
        params.append(param)
    apply_gradient_clipping(params, spec['clipping_type'], spec['clipping_threshold'], fsdp_enabled=False)
    return {'grads': [None if p.grad is None else p.grad.flatten().tolist() for p in params]}


def seq_length_warmup(spec):
    """Composer's SeqLengthWarmup at AFTER_DATALOADER on a token batch, after its activation pass."""
    import torch
    from composer.algorithms import SeqLengthWarmup
    from composer.core import Event

    algo = SeqLengthWarmup(**spec['kwargs'])
    algo._activated = True  # the activation pass only reserves memory
    batch = {k: torch.tensor(v, dtype=torch.long) for k, v in spec['batch'].items()}
    logged = {}
    state = types.SimpleNamespace(batch=batch, dataloader=object(), dataloader_len=spec['dataloader_len'],
                                  max_duration=Time.from_timestring(spec['max_duration']),
                                  timestamp=Timestamp(batch=spec['batch_index']))
    logger = types.SimpleNamespace(log_metrics=logged.update)
    try:
        algo.apply(Event.AFTER_DATALOADER, state, logger)
    except Exception as e:  # noqa: BLE001
        return {'error': f'{type(e).__name__}: {e}'}
    return {'batch': {k: v.tolist() for k, v in state.batch.items()}, 'logged': logged}


def ema(spec):
    """Composer's EMA smoothing from its arguments, then one compute_ema on EMAParameters of a second module."""
    import torch
    from composer.algorithms import EMA
    from composer.algorithms.ema.ema import EMAParameters, compute_ema

    try:
        algo = EMA(**spec['kwargs'])
    except Exception as e:  # noqa: BLE001
        return {'error': f'{type(e).__name__}: {e}'}

    def module(which):
        m = torch.nn.Module()
        for t in spec['tensors']:
            dtype = torch.int64 if t['dtype'] == 'int64' else torch.float64
            value = torch.tensor(t[which], dtype=dtype).reshape(t['shape'])
            if t['buffer']:
                m.register_buffer(t['name'], value)
            else:
                m.register_parameter(t['name'], torch.nn.Parameter(value))
        return m

    model, averaged = module('model'), EMAParameters(module('ema'))
    compute_ema(model, averaged, smoothing=algo.smoothing)
    out = {name: t.flatten().tolist() for name, t in averaged.named_parameters_dict.items()}
    out.update({name: t.flatten().tolist() for name, t in averaged.named_buffers_dict.items()})
    return {'smoothing': algo.smoothing, 'ema': out}


def freeze_layers(spec):
    """Composer's freeze_layers on Linear(3,3), Sequential(Linear(3,3), ReLU, Linear(3,3)), ReLU, Linear(3,2)."""
    import torch
    from composer.algorithms.layer_freezing import freeze_layers as composer_freeze_layers

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 3),
                                torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.ReLU(), torch.nn.Linear(3, 3)),
                                torch.nn.ReLU(), torch.nn.Linear(3, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    depth, percentage = composer_freeze_layers(model, optimizer, spec['current_duration'], spec['freeze_start'],
                                               spec['freeze_level'])
    return {'depth': depth, 'percentage': percentage,
            'requires_grad': [p.requires_grad for p in model.parameters()],
            'in_optimizer': sum(len(g['params']) for g in optimizer.param_groups)}


def alibi(spec):
    """Composer's ALiBi slopes and the bias buffer register_alibi puts on a module.

    The surgery package imports transformers on import; its utils module (torch only) is loaded from its file."""
    import importlib.util
    import os

    import composer
    import torch

    path = os.path.join(os.path.dirname(composer.__file__), 'algorithms', 'alibi', 'attention_surgery_functions',
                        'utils.py')
    loader = importlib.util.spec_from_file_location('composer_alibi_utils', path)
    utils = importlib.util.module_from_spec(loader)
    loader.loader.exec_module(utils)
    holder = torch.nn.Linear(1, 1)
    utils.register_alibi(holder, spec['n_heads'], spec['max_len'], spec['causal'])
    return {'slopes': [float(x) for x in utils._get_alibi_head_slopes(spec['n_heads'])],
            'shape': list(holder.alibi.shape), 'bias': holder.alibi.flatten().tolist()}


def sam(spec):
    """Composer's SAMOptimizer around torch.optim.SGD on Linear(3, 2) with the given weights, MSE on fixed data."""
    import torch
    from composer.algorithms.sam import SAMOptimizer

    model = torch.nn.Linear(3, 2)
    with torch.no_grad():
        model.weight.copy_(torch.tensor(spec['weight']))
        model.bias.copy_(torch.tensor(spec['bias']))
    x, y = torch.tensor(spec['x']), torch.tensor(spec['y'])
    base = torch.optim.SGD(model.parameters(), lr=spec['lr'], momentum=spec['momentum'])
    optimizer = SAMOptimizer(base, rho=spec['rho'], epsilon=spec['epsilon'], interval=spec['interval'])
    losses = []

    def closure(**kwargs):
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        return loss.item()

    for _ in range(spec['steps']):
        losses.append(optimizer.step(closure))
    return {'weight': model.weight.detach().flatten().tolist(), 'bias': model.bias.detach().tolist(),
            'losses': losses}


def swalr(spec):
    """torch.optim.swa_utils.SWALR's learning rates: the rate after construction, then after each step."""
    import torch

    param = torch.nn.Parameter(torch.zeros(1))
    optimizer = torch.optim.SGD([param], lr=spec['lr'])
    scheduler = torch.optim.swa_utils.SWALR(optimizer, swa_lr=spec['swa_lr'], anneal_epochs=spec['anneal_epochs'],
                                            anneal_strategy=spec['strategy'])
    lrs = [optimizer.param_groups[0]['lr']]
    for _ in range(spec['steps']):
        scheduler.step()
        lrs.append(optimizer.param_groups[0]['lr'])
    return lrs


def averaged_model(spec):
    """torch.optim.swa_utils.AveragedModel's parameters after update_parameters with each given weight vector."""
    import torch

    model = torch.nn.Linear(len(spec['weights'][0]), 1, bias=False)
    model.register_buffer('running', torch.zeros(len(spec['weights'][0])))
    averaged = torch.optim.swa_utils.AveragedModel(model, device=torch.device('cpu'))
    for w in spec['weights']:
        with torch.no_grad():
            model.weight.copy_(torch.tensor([w]))
            model.running.copy_(torch.tensor(w) * 10)  # a buffer that moves as BatchNorm's running stats do
        averaged.update_parameters(model)
    return {'weight': averaged.module.weight.detach().flatten().tolist(), 'n_averaged': int(averaged.n_averaged),
            'running': averaged.module.running.tolist()}


def should_selective_backprop(spec):
    from composer.algorithms.selective_backprop import should_selective_backprop as composer_should

    return [bool(composer_should(c['current_duration'], c['batch_idx'], c['start'], c['end'], c['interrupt']))
            for c in spec]


def gated_ff(spec):
    """Composer's BERTGatedFFOutput (GELU gate) on given weights: layernorm(wo(gate * value) + residual).

    The package imports transformers on import; the layer's module (torch only) is loaded from its file."""
    import importlib.util
    import os

    import composer
    import torch

    path = os.path.join(os.path.dirname(composer.__file__), 'algorithms', 'gated_linear_units',
                        'gated_linear_unit_layers.py')
    loader = importlib.util.spec_from_file_location('composer_glu_layers', path)
    layers = importlib.util.module_from_spec(loader)
    loader.loader.exec_module(layers)
    d, f = spec['d'], spec['f']
    layer = layers.BERTGatedFFOutput(d_embed=d, d_ff=f, dropout_rate=0.0, act_fn=torch.nn.GELU(),
                                     layernorm_eps=1e-12, gated_layer_bias=spec['gated_bias'],
                                     non_gated_layer_bias=spec['non_gated_bias'])
    state = {k: torch.tensor(v) for k, v in spec['weights'].items()}
    state['layernorm.weight'] = torch.ones(d)
    state['layernorm.bias'] = torch.zeros(d)
    layer.load_state_dict(state)
    x, residual = torch.tensor(spec['x']), torch.tensor(spec['residual'])
    with torch.no_grad():
        return layer(x, residual).flatten().tolist()


def early_stopper(spec):
    """Composer's EarlyStopper at EVAL_END on a sequence of (epoch, batch, value): whether each check stops training."""
    import torch
    from composer.callbacks import EarlyStopper

    stopper = EarlyStopper(spec['monitor'], 'eval', comp=spec['comp'], min_delta=spec['min_delta'],
                           patience=spec['patience'])
    stops = []
    for epoch, batch, value in spec['checks']:
        stopped = []
        metric = types.SimpleNamespace(compute=lambda v=value: torch.tensor(v))
        state = types.SimpleNamespace(dataloader_label='eval', train_metrics=None,
                                      timestamp=Timestamp(epoch=int(epoch), batch=int(batch)),
                                      eval_metrics={'eval': {spec['monitor']: metric}},
                                      stop_training=lambda: stopped.append(True))
        stopper.eval_end(state, None)
        stops.append(bool(stopped))
    return stops


def optimizer_metrics(spec):
    """Composer's DecoupledAdamW stepped on the given gradients, then its OptimizerMonitor at BATCH_END."""
    import torch
    from composer.callbacks import OptimizerMonitor
    from composer.optim import DecoupledAdamW

    model = torch.nn.Module()
    for p in spec['params']:
        model.register_parameter(p['name'], torch.nn.Parameter(
            torch.tensor(p['weight'], dtype=torch.float64).reshape(p['shape'])))
    opt = DecoupledAdamW(model.parameters(), lr=spec['lr'], betas=tuple(spec['betas']), eps=spec['eps'],
                         weight_decay=spec['weight_decay'])
    for step in spec['grads']:
        for (name, param), grad in zip(model.named_parameters(), step):
            param.grad = torch.tensor(grad, dtype=torch.float64).reshape(param.shape)
        opt.step()
    logged = {}
    logger = types.SimpleNamespace(log_metrics=logged.update)
    state = types.SimpleNamespace(timestamp=Timestamp(batch=len(spec['grads'])), model=model, optimizers=[opt],
                                  fsdp_enabled=False)
    OptimizerMonitor(batch_log_interval=1).batch_end(state, logger)
    return {k: float(v) for k, v in logged.items()}


def gpu_flops(specs):
    """Composer's get_gpu_flops_available for device names torch.cuda.get_device_name() could return."""
    from unittest import mock

    import torch
    from composer.callbacks import speed_monitor
    from composer.core import Precision

    out = []
    for spec in specs:
        state = types.SimpleNamespace(precision=Precision(spec['precision']))
        with mock.patch.object(torch.cuda, 'is_available', return_value=True), \
                mock.patch.object(torch.cuda, 'get_device_name', return_value=spec['device_name']), \
                warnings.catch_warnings():
            warnings.simplefilter('ignore')
            value = speed_monitor.get_gpu_flops_available(state)
        out.append(value if value else None)
    return out


def fsdp_mixed_precision(spec):
    """Composer's get_mixed_precision: the dtypes a preset or a dict resolves to for a precision."""
    from composer.core import Precision
    from composer.distributed.mosaic_parallelism import get_mixed_precision

    try:
        _, param, reduce, buffer = get_mixed_precision(Precision(spec['precision']), spec['mixed_precision'])
    except ValueError as e:
        return {'error': str(e)}
    name = lambda d: None if d is None else str(d).replace('torch.', '')
    return {'param_dtype': name(param), 'reduce_dtype': name(reduce), 'buffer_dtype': name(buffer)}


def main():
    with open(sys.argv[1]) as f:
        requests = json.load(f)
    answers = {
        'time_strings': [time_string(s) for s in requests.get('time_strings', [])],
        'schedulers': [scheduler_factors(s) for s in requests.get('schedulers', [])],
        'gradient_clipping': [clipped_gradients(s) for s in requests.get('gradient_clipping', [])],
        'seq_length_warmup': [seq_length_warmup(s) for s in requests.get('seq_length_warmup', [])],
        'ema': [ema(s) for s in requests.get('ema', [])],
        'freeze_layers': [freeze_layers(s) for s in requests.get('freeze_layers', [])],
        'alibi': [alibi(s) for s in requests.get('alibi', [])],
        'sam': [sam(s) for s in requests.get('sam', [])],
        'swalr': [swalr(s) for s in requests.get('swalr', [])],
        'averaged_model': [averaged_model(s) for s in requests.get('averaged_model', [])],
        'should_selective_backprop': should_selective_backprop(requests.get('should_selective_backprop', [])),
        'gated_ff': [gated_ff(s) for s in requests.get('gated_ff', [])],
        'early_stopper': [early_stopper(s) for s in requests.get('early_stopper', [])],
        'optimizer_metrics': [optimizer_metrics(s) for s in requests.get('optimizer_metrics', [])],
        'gpu_flops': gpu_flops(requests.get('gpu_flops', [])),
        'fsdp_mixed_precision': [fsdp_mixed_precision(s) for s in requests.get('fsdp_mixed_precision', [])],
    }
    with open(sys.argv[2], 'w') as f:
        json.dump(answers, f)


if __name__ == '__main__':
    main()
