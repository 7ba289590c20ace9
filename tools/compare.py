#!/usr/bin/env python
"""The ViT-5 vs DeiT-III table: pair runs by size, compare with the paper's +2.7 mIoU.

python tools/compare.py WORK_DIR [WORK_DIR ...] --out DIR [--tolerance 1.0]
Each WORK_DIR is a training or test work dir (tools/test.py --work-dir); writes
DIR/comparison.md and DIR/comparison.csv. Missing and unfinished runs are listed as such.
"""
import argparse
import csv
import sys
from pathlib import Path

import vit5seg  # noqa: F401  (config lookups without pkg_resources)
from vit5seg.analysis.compare import compare, read_run, to_markdown


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('work_dirs', nargs='+', help='work dirs of the ViT-5 and DeiT-III runs, any order')
    parser.add_argument('--out', required=True, help='folder for comparison.md and comparison.csv')
    parser.add_argument('--tolerance', type=float, default=1.0,
                        help='largest |delta - paper delta| in mIoU that counts as reproduced (default 1.0)')
    args = parser.parse_args(argv)
    runs = [read_run(w) for w in args.work_dirs]
    rows = compare(runs, args.tolerance)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    markdown = to_markdown(rows, runs, args.tolerance)
    (out / 'comparison.md').write_text(markdown)
    with open(out / 'comparison.csv', 'w', newline='') as f:
        fields = list(rows[0]) if rows else ['size']
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        writer.writerows({k: ('' if v is None else v) for k, v in row.items()} for row in rows)
    print(markdown)
    return 0


if __name__ == '__main__':
    sys.exit(main())
