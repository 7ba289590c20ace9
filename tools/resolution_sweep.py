#!/usr/bin/env python
"""mIoU at several test resolutions, whole-image and sliding-window, one line per model.

python tools/resolution_sweep.py CONFIG CKPT [CONFIG CKPT ...] --sizes 256 512 768 1024 --out DIR
    [--modes whole slide] [--rope-ref-grid authors integer] [--pos-embed-mode bicubic bilinear] [--amp]
Writes DIR/sweep.csv (model, size, mode, mIoU, mAcc, aAcc, policy, scale, ...) and DIR/sweep.png.
A size is the test short side (the long side capped in the config's own proportion, 4x for
ADE20K's 2048x512). Each --rope-ref-grid / --pos-embed-mode combination is its own line, so
the position policies show side by side. For the backbone-only check without a dataset see
tools/feature_similarity.py.
"""
import argparse
import sys
from pathlib import Path

import vit5seg  # noqa: F401
from vit5seg.analysis.resolution import CSV_FIELDS, SweepRun, parse_rope_grid, plot_sweep, sweep
from vit5seg.utils.amp import add_amp_arguments
from vit5seg.engine.launch import run_tool
from vit5seg.utils.tables import write_csv


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('pairs', nargs='+', metavar='CONFIG CKPT', help='config and checkpoint, repeated')
    parser.add_argument('--sizes', type=int, nargs='+', required=True, help='test short sides in pixels')
    parser.add_argument('--out', required=True, help='folder for sweep.csv and sweep.png')
    parser.add_argument('--modes', nargs='+', choices=['whole', 'slide'], default=['whole', 'slide'])
    parser.add_argument('--names', nargs='+', help='a label per model (default: the config name)')
    parser.add_argument('--rope-ref-grid', nargs='+', default=['authors'], metavar='POLICY',
                        help="RoPE positions at a new grid: 'authors' (squeezed into the pretraining grid), "
                             "'integer' (extrapolated), or a grid side; several give one line each")
    parser.add_argument('--pos-embed-mode', nargs='+', default=['bicubic'],
                        choices=['bicubic', 'bilinear', 'nearest', 'area'],
                        help='how pos_embed is resized to a new grid; several give one line each')
    parser.add_argument('--stride', type=int, nargs=2, metavar=('H', 'W'),
                        help='sliding-window stride (default 2/3 of the training crop)')
    parser.add_argument('--device', help='cuda:0, cpu, ... (default: first GPU if any)')
    parser.add_argument('--no-progress', action='store_true')
    add_amp_arguments(parser)
    args = parser.parse_args(argv)
    if len(args.pairs) % 2:
        parser.error('give a CONFIG and a CKPT for every model')
    if args.names and len(args.names) != len(args.pairs) // 2:
        parser.error(f'--names has {len(args.names)} labels for {len(args.pairs) // 2} models')
    if any(s < 16 for s in args.sizes):
        parser.error('--sizes must be at least one 16-pixel patch')
    try:
        args.rope_ref_grid = [parse_rope_grid(g) for g in args.rope_ref_grid]
    except ValueError as e:
        parser.error(str(e))
    for path in args.pairs:
        if not Path(path).is_file():
            parser.error(f'{path}: no such file')
    return args


def main(argv=None):
    args = parse_args(argv)
    pairs = list(zip(args.pairs[0::2], args.pairs[1::2]))
    names = args.names or [None] * len(pairs)
    runs = [SweepRun(config, ckpt, name) for (config, ckpt), name in zip(pairs, names)]
    rows = sweep(runs, args.sizes, args.modes, args.rope_ref_grid, args.pos_embed_mode, device=args.device,
                 stride=args.stride, progress=not args.no_progress, amp=args.amp_dtype if args.amp else None)
    out = Path(args.out)
    write_csv(out / 'sweep.csv', CSV_FIELDS, rows)
    plot_sweep(rows, out / 'sweep.png')
    width = max(len(r['model']) for r in rows)
    for r in rows:
        print(f"{r['model']:<{width}}  {r['mode']:<5}  {r['size']:>5}  mIoU {r['mIoU']:6.2f}  mAcc {r['mAcc']:6.2f}")
    print(f'wrote {out / "sweep.csv"} and {out / "sweep.png"}')
    return 0


if __name__ == '__main__':
    sys.exit(run_tool(main))
