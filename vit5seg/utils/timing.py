"""Timing on CPU and GPU: steps run interleaved (A, B, C, A, B, C, ...) after warm-up,
so the machine's drift hits every step alike; quartiles of per-round ratios."""
import statistics
import time
from typing import Callable, Dict, List

import torch


def quartiles(values: List[float]) -> List[float]:
    """[q1, q3] (both the value itself for one sample)."""
    if len(values) < 2:
        return [values[0], values[0]]
    q = statistics.quantiles(values, n=4, method='inclusive')
    return [q[0], q[2]]


def sync_device(device):
    if torch.device(device).type == 'cuda':
        torch.cuda.synchronize()


def time_interleaved(steps: Dict[str, Callable[[], None]], device, warmup: int = 1,
                     repeats: int = 5) -> Dict[str, List[float]]:
    times = {name: [] for name in steps}
    for r in range(warmup + repeats):
        for name, step in steps.items():
            sync_device(device)
            start = time.perf_counter()
            step()
            sync_device(device)
            if r >= warmup:
                times[name].append(time.perf_counter() - start)
    return times


def measure_cells(result: dict, key: str, target=None) -> str:
    """A benchmark row's last three cells: the value, its per-round quartiles (``{key}_quartiles``,
    where measured) and, for a ``target`` ``(op, bound)``, whether it is met."""
    value, spread = result[key], result.get(f'{key}_quartiles')
    verdict = ''
    if target:
        op, bound = target
        verdict = f'{op} {bound} {"met" if (value <= bound if op == "<=" else value >= bound) else "NOT met"}'
    spread = f'{spread[0]:.3f} - {spread[1]:.3f}' if spread else ''
    return f'| {value:.3f} | {spread} | {verdict} |'
