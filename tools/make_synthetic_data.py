#!/usr/bin/env python
"""Write a small learnable dataset in a benchmark's official layout under ROOT, where the
configs read it when ROOT is ``data`` (the tiny configs read ``data/synthetic``); ``custom``
is the folder layout of tools/make_custom_config.py."""
import argparse
import sys

from vit5seg.datasets import CUSTOM_CLASSES, DATASETS, make_synthetic_data


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument('dataset', choices=DATASETS)
    parser.add_argument('root', help='e.g. data/synthetic: writes data/synthetic/cityscapes, ...')
    parser.add_argument('--num-train', type=int, default=64, help='training images (default: %(default)s)')
    parser.add_argument('--num-val', type=int, default=16, help='validation images (default: %(default)s)')
    parser.add_argument('--size', type=int, default=128, help='image height (default: %(default)s)')
    parser.add_argument('--seed', type=int, default=0, help='random seed (default: %(default)s)')
    args = parser.parse_args(argv)
    try:
        data_root = make_synthetic_data(args.dataset, args.root, args.num_train, args.num_val, args.size, args.seed)
    except FileExistsError as e:
        sys.exit(f'error: {e}')
    print(f'wrote {args.num_train} training and {args.num_val} validation samples of {args.dataset} under {data_root}')
    if args.dataset == 'custom':
        print('classes (mask ids 0..7): ' + ' '.join(CUSTOM_CLASSES))


if __name__ == '__main__':
    main()
