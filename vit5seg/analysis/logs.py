"""Read mmengine ``scalars.json`` files of one or more runs: curves, loss spikes, plots.

A run's work dir holds one ``<timestamp>/vis_data/scalars.json`` per launch; a resumed
run has several, and later launches win for the iterations they repeat.
"""
import json
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional


@dataclass
class RunLog:
    name: str
    loss: Dict[int, float] = field(default_factory=dict)   # iteration -> logged (smoothed) loss
    metrics: Dict[int, Dict[str, float]] = field(default_factory=dict)  # iteration -> mIoU/mAcc/aAcc


@dataclass
class Spike:
    iteration: int
    loss: float
    baseline: float  # median of the preceding window

    @property
    def ratio(self) -> float:
        return self.loss / self.baseline


def read_run(work_dir, name: Optional[str] = None) -> RunLog:
    work_dir = Path(work_dir)
    files = sorted(work_dir.glob('*/vis_data/scalars.json'))
    if not files:
        raise FileNotFoundError(f'{work_dir}: no */vis_data/scalars.json (is this an mmengine work dir?)')
    run = RunLog(name or work_dir.name)
    for path in files:  # timestamps sort in launch order
        lines = path.read_text().splitlines()
        for n, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                if n == len(lines):
                    continue  # the last line of a killed run can be cut off
                raise ValueError(f'{path}:{n}: not a JSON line') from None
            if 'loss' in record and 'iter' in record:
                run.loss[int(record['iter'])] = float(record['loss'])
            elif 'mIoU' in record:
                run.metrics[int(record['step'])] = {k: float(record[k]) for k in ('mIoU', 'mAcc', 'aAcc')
                                                    if k in record}
    return run


def find_spikes(loss: Dict[int, float], window: int = 10, ratio: float = 1.5) -> List[Spike]:
    """Logged points whose loss exceeds ``ratio`` x the median of the ``window`` points
    before them. mmengine logs a moving mean of the loss, so a one-iteration spike shows
    up damped and spread over the following points; only the first of a run of
    consecutive flagged points is reported."""
    iters = sorted(loss)
    spikes: List[Spike] = []
    previous_flagged = False
    for i in range(window, len(iters)):
        baseline = statistics.median(loss[it] for it in iters[i - window:i])
        value = loss[iters[i]]
        flagged = baseline > 0 and value > ratio * baseline
        if flagged and not previous_flagged:
            spikes.append(Spike(iters[i], value, baseline))
        previous_flagged = flagged
    return spikes


def plot_runs(runs: List[RunLog], out_dir) -> List[Path]:
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt

    out_dir = Path(out_dir)
    written = []
    for kind, ylabel in (('loss', 'training loss (logged mean)'), ('mIoU', 'validation mIoU (%)')):
        series = [(r.name, r.loss if kind == 'loss' else {k: v['mIoU'] for k, v in r.metrics.items()})
                  for r in runs]
        series = [(name, s) for name, s in series if s]
        if not series:
            continue
        fig, ax = plt.subplots(figsize=(7, 4), dpi=100)
        for name, s in series:
            its = sorted(s)
            ax.plot(its, [s[i] for i in its], marker='o' if kind == 'mIoU' else None, label=name)
        ax.set_xlabel('iteration')
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
        ax.legend()
        fig.tight_layout()
        path = out_dir / f'{kind.lower()}.png'
        fig.savefig(path)
        plt.close(fig)
        written.append(path)
    return written


def summarize(runs: List[RunLog], window: int, ratio: float) -> str:
    lines = [f'loss spikes: a logged loss above {ratio} x the median of the {window} points before it']
    for run in runs:
        its = sorted(run.loss)
        lines.append(f'{run.name}: {len(its)} logged iterations'
                     + (f' ({its[0]}..{its[-1]}), final loss {run.loss[its[-1]]:.4f}' if its else ''))
        if run.metrics:
            best = max(run.metrics, key=lambda k: run.metrics[k]['mIoU'])
            last = max(run.metrics)
            lines.append(f'  mIoU: best {run.metrics[best]["mIoU"]:.2f} at iteration {best}, '
                         f'last {run.metrics[last]["mIoU"]:.2f} at iteration {last}')
        else:
            lines.append('  mIoU: no evaluation in the logs')
        if len(its) <= window:
            lines.append(f'  spikes: too few points to judge (need more than {window})')
            continue
        spikes = find_spikes(run.loss, window, ratio)
        lines.append(f'  spikes: {len(spikes)}')
        lines += [f'    iteration {s.iteration}: loss {s.loss:.4f} = {s.ratio:.2f} x {s.baseline:.4f}' for s in spikes]
    return '\n'.join(lines)


def write_curves_csv(runs: List[RunLog], path) -> None:
    import csv
    with open(path, 'w', newline='') as f:
        writer = csv.writer(f)
        writer.writerow(['run', 'iter', 'loss', 'mIoU', 'mAcc', 'aAcc'])
        for run in runs:
            for it in sorted(set(run.loss) | set(run.metrics)):
                m = run.metrics.get(it, {})
                writer.writerow([run.name, it, run.loss.get(it, ''), m.get('mIoU', ''), m.get('mAcc', ''),
                                 m.get('aAcc', '')])
