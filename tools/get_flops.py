#!/usr/bin/env python
"""Parameters and GFLOPs (multiply-accumulates, mmseg's convention) of a config."""
import argparse

from mmengine.config import DictAction

import vit5seg  # noqa: F401
from vit5seg.analysis import model_complexity


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument('config', help='config file path')
    parser.add_argument('--shape', type=int, nargs='+', default=[512, 512], help='input H [W] (default: 512 512)')
    parser.add_argument('--cfg-options', nargs='+', action=DictAction, help='override config values, key=value')
    args = parser.parse_args()
    shape = args.shape * 2 if len(args.shape) == 1 else args.shape
    result = model_complexity(args.config, shape, args.cfg_options)
    print(f'{args.config}\ninput shape: {shape[0]}x{shape[1]}\n'
          f'params: {result["params"] / 1e6:.2f} M\nflops: {result["gflops"]:.1f} GFLOPs '
          f'({result["gflops_no_attn"]:.1f} without the attention matmuls, as mmcv counts)')


if __name__ == '__main__':
    main()
