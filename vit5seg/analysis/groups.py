"""One group of runs (one family and size, or one ablation variant): each training counted
once, and the cells the reports share."""
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

from .runs import METRICS, RunResult
from .stats import Interval

SCALES = (('ss', 'single'), ('ms', 'multi'))


@dataclass
class Group:
    """The runs of one group after merging each training's dirs: a value per run."""
    values: Dict[Tuple[str, str], List[float]]  # (metric, scale) -> one value per training
    seeds: List[Optional[int]]
    notes: List[str]
    used: List[RunResult]                       # the dirs the values come from


def merge_group(runs: Sequence[RunResult]) -> Group:
    """One value per training and metric: a test's over a validation's, the last dir given
    that has it. Several dirs of the same seed for the same scale, or two trainings with
    one seed, are noted, never silently dropped."""
    by_training: Dict[object, List[RunResult]] = {}
    for r in runs:
        if r.single or r.multi:
            by_training.setdefault(r.training, []).append(r)
    values: Dict[Tuple[str, str], List[float]] = {}
    seeds, notes, used = [], [], []
    for training, members in by_training.items():
        seed = next((m.seed for m in members if m.seed is not None), None)
        seeds.append(seed)
        for scale, attr in SCALES:
            having = [m for m in members if getattr(m, attr)]
            tested = [m for m in having if attr == 'multi' or m.single_from_test]
            source = (tested or having)[-1] if having else None
            if len(tested) > 1:
                notes.append(f"seed {seed}: {len(tested)} {'multi' if attr == 'multi' else 'single'}-scale tests of "
                             f"one training ({', '.join(m.work_dir for m in tested)}); the last one given is used")
            if source is None:
                continue
            used.append(source)
            for metric in METRICS:
                if metric in getattr(source, attr):
                    values.setdefault((metric, scale), []).append(getattr(source, attr)[metric])
    for seed in sorted({s for s in seeds if s is not None}):
        if seeds.count(seed) > 1:
            notes.append(f'seed {seed} appears in {seeds.count(seed)} different trainings: each is counted; '
                         f'check that they are not the same run twice')
    used = [r for i, r in enumerate(used) if all(r is not u for u in used[:i])]
    return Group(values, seeds, notes, used)


def interval_cells(interval: Optional[Interval]) -> Tuple[Optional[float], Optional[float]]:
    if interval is None or interval.low is None:
        return None, None
    return round(interval.low, 2), round(interval.high, 2)


def interval_text(interval: Optional[Interval]) -> str:
    if interval is None:
        return '—'
    if interval.low is None:
        return interval.note
    return f'[{interval.low:+.2f}, {interval.high:+.2f}]'


def fmt_cell(value) -> str:
    if value is None:
        return '—'
    return f'{value:.2f}' if isinstance(value, float) else str(value)


def csv_rows(rows: List[dict]) -> List[dict]:
    return [{k: ('' if v is None else v) for k, v in row.items() if not k.startswith('_')} for row in rows]
