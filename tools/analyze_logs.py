#!/usr/bin/env python
"""Loss and mIoU curves of one or more runs (mmengine scalars.json) and their loss spikes.

python tools/analyze_logs.py WORK_DIR [WORK_DIR ...] --out DIR [--names A B] [--spike-window 10] [--spike-ratio 1.5]
writes DIR/loss.png, DIR/miou.png (when the runs were evaluated), DIR/curves.csv and
DIR/summary.txt (also printed).
"""
import argparse
import sys
from pathlib import Path

from vit5seg.analysis.logs import plot_runs, read_run, summarize, write_curves_csv


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
        runs = [read_run(w, n) for w, n in zip(args.work_dirs, args.names or [None] * len(args.work_dirs))]
    except (FileNotFoundError, ValueError) as e:
        print(f'error: {e}', file=sys.stderr)
        return 1
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    plots = plot_runs(runs, out)
    write_curves_csv(runs, out / 'curves.csv')
    summary = summarize(runs, args.spike_window, args.spike_ratio)
    (out / 'summary.txt').write_text(summary + '\n')
    print(summary)
    print('wrote ' + ', '.join(str(p) for p in [*plots, out / 'curves.csv', out / 'summary.txt']))
    return 0


if __name__ == '__main__':
    sys.exit(main())
