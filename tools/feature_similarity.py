#!/usr/bin/env python
"""Backbone features at larger inputs vs the pretraining size, no dataset needed.

python tools/feature_similarity.py BACKBONE CKPT [BACKBONE CKPT ...] --images FOLDER
    --sizes 224 320 448 512 --out DIR [--rope-ref-grid authors integer] [--pos-embed-mode ...]
BACKBONE is an arch preset (vit5-base, deit3-base, ...) or a config file (its model.backbone);
CKPT an authors' ViT-5, a DeiT-III (either layout) or a trained segmentor checkpoint.
For every image: cosine similarity between the features at the pretraining size and at each
size (cls token; patch tokens average-pooled onto the pretraining grid), next to the same
similarity between two different images at the pretraining size (the "unrelated" level).
Writes DIR/features.csv and DIR/features.png.
"""
import argparse
import sys
from pathlib import Path

import vit5seg  # noqa: F401
from vit5seg.analysis.resolution import (FEATURE_FIELDS, backbone_config, build_backbone, feature_similarity,
                                         load_images, model_label, parse_rope_grid, plot_features, policies,
                                         uses_rope)
from vit5seg.engine.launch import run_tool
from vit5seg.utils.tables import write_csv


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('pairs', nargs='+', metavar='BACKBONE CKPT', help='backbone and checkpoint, repeated')
    parser.add_argument('--images', required=True, help='folder of images (at least 2)')
    parser.add_argument('--max-images', type=int, default=32, help='use at most this many (default 32)')
    parser.add_argument('--sizes', type=int, nargs='+', required=True, help='input sides in pixels')
    parser.add_argument('--out', required=True, help='folder for features.csv and features.png')
    parser.add_argument('--names', nargs='+', help='a label per backbone (default: its config\'s file name without .py, or the arch)')
    parser.add_argument('--rope-ref-grid', nargs='+', default=['authors'], metavar='POLICY',
                        help="'authors', 'integer' or a grid side; several give one line each")
    parser.add_argument('--pos-embed-mode', nargs='+', default=['bicubic'],
                        choices=['bicubic', 'bilinear', 'nearest', 'area'])
    parser.add_argument('--device', help='cuda:0, cpu, ... (default: first GPU if any)')
    parser.add_argument('--allow-unsafe', action='store_true', help='allow full unpickling of trusted checkpoints')
    args = parser.parse_args(argv)
    if len(args.pairs) % 2:
        parser.error('give a BACKBONE and a CKPT for every model')
    pairs = list(zip(args.pairs[0::2], args.pairs[1::2]))
    if args.names and len(args.names) != len(pairs):
        parser.error(f'--names has {len(args.names)} labels for {len(pairs)} backbones')
    try:
        grids = [parse_rope_grid(g) for g in args.rope_ref_grid]
        images = load_images(args.images, args.max_images)
        backbone_cfgs = [backbone_config(spec) for spec, _ in pairs]
    except (ValueError, FileNotFoundError) as e:
        parser.error(str(e))
    rows = []
    for (spec, ckpt), backbone_cfg, name in zip(pairs, backbone_cfgs, args.names or [None] * len(pairs)):
        name = name or model_label(spec)
        run_policies = policies(grids, args.pos_embed_mode, uses_rope(backbone_cfg))
        for policy in run_policies:
            backbone = build_backbone(backbone_cfg, ckpt, policy, args.device, args.allow_unsafe)
            label = name if len(run_policies) == 1 else f'{name} [{policy.label()}]'
            for row in feature_similarity(backbone, images, args.sizes):
                rows.append(dict(model=label, rope_ref_grid=policy.rope_ref_grid, pos_embed=policy.pos_embed,
                                 **{k: round(v, 4) if isinstance(v, float) else v for k, v in row.items()}))
    out = Path(args.out)
    write_csv(out / 'features.csv', FEATURE_FIELDS, rows)
    plot_features(rows, out / 'features.png')
    for r in rows:
        print(f"{r['model']}  {r['size']:>5}  patch {r['patch_cos']:.4f} (unrelated {r['unrelated_patch_cos']:.4f})"
              f"  cls {r['cls_cos']:.4f} (unrelated {r['unrelated_cls_cos']:.4f})")
    print(f'wrote {out / "features.csv"} and {out / "features.png"}')
    return 0


if __name__ == '__main__':
    sys.exit(run_tool(main))
