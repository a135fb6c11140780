"""Composer's cyclic_schedule over a grid of arguments, as lines "<args>: <action per batch>" for the C++ test."""
import itertools
from types import SimpleNamespace

from composer.profiler import cyclic_schedule

for skip_first, wait, warmup, active, repeat, resumed, length in itertools.product(
    (0, 2), (0, 1), (0, 1), (1, 3), (0, 1, 2), (0, 3), (None, 7)
):
    schedule = cyclic_schedule(skip_first=skip_first, wait=wait, warmup=warmup, active=active, repeat=repeat)
    actions = []
    for batch in range(16):
        state = SimpleNamespace(
            timestamp=SimpleNamespace(batch_in_epoch=batch),
            profiler=SimpleNamespace(resumption_batch_idx=resumed),
            dataloader_len=length,
        )
        actions.append(schedule(state).value)
    print(f"{skip_first} {wait} {warmup} {active} {repeat} {resumed} {length}: {' '.join(actions)}")
