#!/usr/bin/env python
"""Write a small synthetic dataset in ADE20K's official layout (the demo's and tests' data)."""
import argparse

from vit5seg.datasets import make_synthetic_ade20k


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument('out_dir', help='writes OUT_DIR/ADEChallengeData2016/{images,annotations}/...')
    parser.add_argument('--num-train', type=int, default=64, help='training images (default: %(default)s)')
    parser.add_argument('--num-val', type=int, default=16, help='validation images (default: %(default)s)')
    parser.add_argument('--size', type=int, default=128, help='image height; width is 1.25x (default: %(default)s)')
    parser.add_argument('--seed', type=int, default=0, help='random seed (default: %(default)s)')
    args = parser.parse_args()
    root = make_synthetic_ade20k(args.out_dir, args.num_train, args.num_val, args.size, args.seed)
    print(f'wrote {args.num_train} training and {args.num_val} validation pairs under {root}')


if __name__ == '__main__':
    main()
