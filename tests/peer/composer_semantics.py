"""Answers questions about Composer's semantics for tests/peer/semantics_test.cpp.

Usage: composer_semantics.py REQUESTS.json ANSWERS.json
REQUESTS: {"time_strings": [str], "schedulers": [{"class": str, "kwargs": {...}, "max_duration": str,
           "dataloader_len": int, "ssr": float, "batches": [int]}],
           "gradient_clipping": [{"clipping_type": str, "clipping_threshold": float,
                                  "params": [{"shape": [int], "weight": [float], "grad": [float] | null}]}]}
ANSWERS:  {"time_strings": [{"value": float, "unit": str} | {"error": str}],
           "schedulers": [{"factors": [float]} | {"error": str}],
           "gradient_clipping": [{"grads": [[float] | null]}]}  (float64, flattened)
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


def main():
    with open(sys.argv[1]) as f:
        requests = json.load(f)
    answers = {
        'time_strings': [time_string(s) for s in requests.get('time_strings', [])],
        'schedulers': [scheduler_factors(s) for s in requests.get('schedulers', [])],
        'gradient_clipping': [clipped_gradients(s) for s in requests.get('gradient_clipping', [])],
        'seq_length_warmup': [seq_length_warmup(s) for s in requests.get('seq_length_warmup', [])],
    }
    with open(sys.argv[2], 'w') as f:
        json.dump(answers, f)


if __name__ == '__main__':
    main()
