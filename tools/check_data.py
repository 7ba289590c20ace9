#!/usr/bin/env python
"""Check a config's train/val/test datasets: images and labels pair up (or the split list's
names exist), and with --values every label map holds only the config's class ids, at its
image's size. Prints counts and every problem; exit status 1 on any problem."""
import argparse
import sys

import vit5seg  # noqa: F401  (compat fixes before mmseg:: bases are read)
from mmengine.config import Config, DictAction

from vit5seg.datasets import DatasetError, check_config, format_report


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument('config')
    parser.add_argument('--values', action='store_true',
                        help='also read every label: single channel, ids within the classes, same size as its image')
    parser.add_argument('--phases', nargs='+', default=['train', 'val', 'test'], choices=['train', 'val', 'test'])
    parser.add_argument('--cfg-options', nargs='+', action=DictAction, help='override config keys, as train.py')
    args = parser.parse_args(argv)
    try:
        cfg = Config.fromfile(args.config)
    except FileNotFoundError as e:
        sys.exit(f'error: {e}')
    if args.cfg_options:
        cfg.merge_from_dict(args.cfg_options)
    try:
        reports = check_config(cfg, args.phases, check_values=args.values)
    except DatasetError as e:
        sys.exit(f'error: {e}')
    print(format_report(reports))
    return 0 if all(r.ok for r in reports) else 1


if __name__ == '__main__':
    sys.exit(main())
