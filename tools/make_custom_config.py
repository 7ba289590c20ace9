#!/usr/bin/env python
"""Check a folder of images and masks (DIR/images/{train,val}, DIR/annotations/{train,val},
mask ids 0..K-1, 255 ignored) and write a config that trains ViT-5 (or DeiT-III) + UperNet on
it from the official pretrained weights; prints the train and test commands."""
import argparse
import sys
from pathlib import Path

import vit5seg  # noqa: F401  (compat fixes before configs are read)
from vit5seg.datasets import DatasetError
from vit5seg.datasets.custom import ARCH_CONFIGS, check_custom_folder, commands, write_custom_config


def _colour(text: str):
    try:
        rgb = [int(v) for v in text.split(',')]
    except ValueError:
        rgb = []
    if len(rgb) != 3:
        raise argparse.ArgumentTypeError(f'{text!r} is not R,G,B (e.g. 255,0,0)')
    return rgb


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument('--data-root', required=True, help='the folder holding images/ and annotations/')
    parser.add_argument('--classes', nargs='+', required=True, help='class names, in mask id order (0, 1, ...)')
    parser.add_argument('--palette', nargs='+', type=_colour,
                        help='R,G,B per class for pictures (default: ADE20K colours)')
    choice = parser.add_mutually_exclusive_group()
    choice.add_argument('--arch', default='vit5-base', choices=sorted(ARCH_CONFIGS),
                        help='backbone, with its official ImageNet-1k weights (default: %(default)s)')
    choice.add_argument('--base', help='inherit this config instead of the --arch one (e.g. a tiny CPU config)')
    parser.add_argument('--crop', nargs=2, type=int, default=(512, 512), metavar=('H', 'W'),
                        help='training crop (default: 512 512)')
    parser.add_argument('--scale', nargs=2, type=int, metavar=('LONG', 'SHORT'),
                        help='resize images to fit LONG x SHORT before cropping (default: 4 x the crop, the crop)')
    parser.add_argument('--iters', type=int, default=40000, help='training iterations (default: %(default)s)')
    parser.add_argument('--gpus', type=int, default=8, help='GPUs in the printed dist_train command')
    parser.add_argument('--out', required=True, help='the config file to write, e.g. configs/custom/leaves.py')
    args = parser.parse_args(argv)
    try:
        found = check_custom_folder(args.data_root, args.classes)
        out = write_custom_config(found, args.out, base=args.base, arch=args.arch, crop=args.crop,
                                  scale=args.scale, iters=args.iters, palette=args.palette)
    except DatasetError as e:
        print(f'error: {e}', file=sys.stderr)
        return 1
    for split in ('train', 'val'):
        print(f'{split}: {found.counts[split]} images with masks')
        if found.never_seen[split]:
            print(f'  classes with no pixel in {split} (their IoU will be nan or 0): '
                  + ', '.join(found.never_seen[split]))
    print(f'wrote {out}\n\nlook at some samples (pictures and class shares), then train and test:')
    for line in commands(Path(args.out), args.iters, args.gpus):
        print(f'  {line}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
