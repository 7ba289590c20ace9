"""Build ViT-5 + UperNet from a config, segment a generated image, print the shapes.

    python -m vit5seg.demo [--config CFG] [--arch vit5-small] [--size H W]
"""
import argparse
import logging
import time
from pathlib import Path

import numpy as np
import torch

import vit5seg  # noqa: F401  (registers ViT5, applies the compat fixes)

REPO_CONFIGS = Path(__file__).resolve().parents[1] / 'configs'
DEFAULT_CONFIG = REPO_CONFIGS / '_base_' / 'models' / 'upernet_vit5.py'


def build_segmentor(config, arch: str = 'vit5-small', cfg_options=None):
    """The segmentor of ``config`` with its backbone swapped for ``arch`` (widths follow)."""
    from mmengine.config import Config
    from mmengine.logging import MMLogger
    from mmengine.model.utils import revert_sync_batchnorm
    from mmseg.registry import MODELS
    from mmseg.utils import register_all_modules

    from .models.backbones.vit5 import resolve_arch

    register_all_modules(init_default_scope=True)
    cfg = Config.fromfile(str(config))
    width = resolve_arch(arch)['embed_dims']
    cfg.merge_from_dict({'model.backbone.arch': arch, 'model.neck.embed_dim': width,
                         'model.decode_head.in_channels': [width] * 4,
                         'model.auxiliary_head.in_channels': width})
    if cfg_options:
        cfg.merge_from_dict(cfg_options)
    model = revert_sync_batchnorm(MODELS.build(cfg.model))  # no process group on one CPU
    logger = MMLogger.get_current_instance()
    level = logger.level
    logger.setLevel(logging.WARNING)  # init_weights logs one line per parameter
    try:
        model.init_weights()
    finally:
        logger.setLevel(level)
    return model.eval()


def demo_image(height: int, width: int) -> np.ndarray:
    """A deterministic BGR test picture: gradients and a few shapes."""
    yy, xx = np.mgrid[0:height, 0:width]
    img = np.stack([xx * 255 // max(width - 1, 1), yy * 255 // max(height - 1, 1),
                    ((xx // 32 + yy // 32) % 2) * 255], axis=-1).astype(np.uint8)
    img[height // 4: height // 2, width // 4: width // 2] = (0, 0, 255)
    return img


def run(config=DEFAULT_CONFIG, arch='vit5-small', size=(512, 683)):
    from mmseg.apis import inference_model
    from mmengine.config import Config

    model = build_segmentor(config, arch)
    model.cfg = Config(dict(test_pipeline=[dict(type='LoadImageFromNDArray'),
                                           dict(type='PackSegInputs')]))
    img = demo_image(*size)
    lines = [f'config: {config}', f'backbone: {arch}, input image {img.shape[0]}x{img.shape[1]}']
    with torch.no_grad():
        x = torch.from_numpy(img[..., ::-1].copy()).permute(2, 0, 1)[None].float()
        taps = model.backbone(x)
        pyramid = model.neck(taps)
        lines.append('backbone taps: ' + ', '.join(str(tuple(t.shape)) for t in taps))
        lines.append('neck pyramid: ' + ', '.join(str(tuple(t.shape)) for t in pyramid))
        start = time.perf_counter()
        result = inference_model(model, img)
        elapsed = time.perf_counter() - start
    logits, pred = result.seg_logits.data, result.pred_sem_seg.data
    lines.append(f'seg logits: {tuple(logits.shape)}, label map: {tuple(pred.shape)}, '
                 f'{len(pred.unique())} classes predicted (random weights), {elapsed:.2f} s')
    return lines


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--config', default=str(DEFAULT_CONFIG), help='segmentor config (default: %(default)s)')
    parser.add_argument('--arch', default='vit5-small', help='backbone preset (default: %(default)s)')
    parser.add_argument('--size', type=int, nargs=2, default=(512, 683), metavar=('H', 'W'),
                        help='generated image size (default: 512 683)')
    args = parser.parse_args(argv)
    for line in run(args.config, args.arch, tuple(args.size)):
        print(line)


if __name__ == '__main__':
    main()
