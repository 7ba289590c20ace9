"""Read mmengine ``scalars.json`` files of one or more runs: curves, loss spikes, plots
(``tools/analyze_logs.py``).

A run's work dir holds one ``<timestamp>/vis_data/scalars.json`` per launch; a resumed
run has several, and later launches win for the iterations they repeat. This module is
the one reader of those files (the comparison and the tests use it too).

    python tools/analyze_logs.py WORK_DIR [WORK_DIR ...] --out DIR [--names A B] [--spike-window 10] [--spike-ratio 1.5]

writes DIR/loss.png, DIR/miou.png (when the runs were evaluated), DIR/curves.csv and
DIR/summary.txt (also printed).
"""
import argparse
import json
import sys
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


def scalar_files(work_dir) -> List[Path]:
    """The ``scalars.json`` of each launch in ``work_dir``, oldest first (timestamps sort)."""
    return sorted(Path(work_dir).glob('*/vis_data/scalars.json'))


def read_scalars(path) -> List[dict]:
    """The records of one ``scalars.json`` (one JSON object a line). The last line of a
    killed run can be cut off and is left out; a bad line elsewhere is an error."""
    path = Path(path)
    lines = path.read_text().splitlines()
    records = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            if n == len(lines):
                continue
            raise ValueError(f'{path}:{n}: not a JSON line') from None
    return records


def read_log(work_dir, name: Optional[str] = None) -> RunLog:
    """The logged loss and validation metrics of every launch of a run (later launches win)."""
    work_dir = Path(work_dir)
    files = scalar_files(work_dir)
    if not files:
        raise FileNotFoundError(f'{work_dir}: no */vis_data/scalars.json (is this an mmengine work dir?)')
    run = RunLog(name or work_dir.name)
    for path in files:
        for record in read_scalars(path):
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


def runs_report(runs: List[RunLog], window: int, ratio: float) -> str:
    """The text report: per run, logged iterations, final loss, best and last mIoU, spikes."""
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


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('work_dirs', nargs='+', help='mmengine work dirs (W, holding W/<timestamp>/vis_data/)')
    parser.add_argument('--out', required=True, help='folder for the plots, curves.csv and summary.txt')
    parser.add_argument('--names', nargs='+', help='legend names, one per work dir (default: folder names)')
    parser.add_argument('--spike-window', type=int, default=10, help='logged points in the baseline median')
    parser.add_argument('--spike-ratio', type=float, default=1.5, help='loss / baseline that counts as a spike')
    args = parser.parse_args(argv)
    if args.names and len(args.names) != len(args.work_dirs):
        parser.error(f'--names gives {len(args.names)} names for {len(args.work_dirs)} work dirs')
    if args.spike_window < 1 or args.spike_ratio <= 1:
        parser.error('--spike-window must be >= 1 and --spike-ratio > 1')
    try:
        runs = [read_log(w, n) for w, n in zip(args.work_dirs, args.names or [None] * len(args.work_dirs))]
    except (FileNotFoundError, ValueError) as e:
        print(f'error: {e}', file=sys.stderr)
        return 1
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    plots = plot_runs(runs, out)
    write_curves_csv(runs, out / 'curves.csv')
    summary = runs_report(runs, args.spike_window, args.spike_ratio)
    (out / 'summary.txt').write_text(summary + '\n')
    print(summary)
    print('wrote ' + ', '.join(str(p) for p in [*plots, out / 'curves.csv', out / 'summary.txt']))
    return 0
