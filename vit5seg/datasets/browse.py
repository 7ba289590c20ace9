"""Paint a config's samples as its dataset loads them: each image beside its label map
laid over it in the class colours, with a legend, and the pixel share of each class.

For seeing, before training, that masks line up with their images and that ids, names
and colours mean what they should (a colour-coded mask read as ids, a wrong
``reduce_zero_label``, a class list in the wrong order). By default only the loading
steps of the pipeline run (file ids after ``reduce_zero_label`` and mmseg's
``label_map``, at the file's size); ``augmented`` runs the whole training pipeline and
shows the crops the model is trained on. mmseg's ``browse_dataset.py`` shows only the
latter, needs compiled mmcv ops to import, and a visualizer name our configs leave unset.
"""
import argparse
import copy
import os.path as osp
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List

import cv2
import numpy as np
from mmengine.config import Config, DictAction

from ..utils.image import draw_legend, overlay
from .checks import DatasetError, check_dataset_config, dataset_leaves

LOADING_STEPS = ('CheckedLoading', 'CheckSegSample')  # ours; plus every mmseg/mmcv 'Load*' step


@dataclass
class BrowseSummary:
    written: List[Path] = field(default_factory=list)
    pixels: Dict[str, int] = field(default_factory=dict)  # class name (or 'ignored') -> pixel count

    def shares(self) -> str:
        total = sum(self.pixels.values()) or 1
        ranked = sorted(self.pixels.items(), key=lambda kv: -kv[1])
        return ', '.join(f'{name} {100 * n / total:.1f}%' for name, n in ranked)


def loading_only(pipeline: list) -> list:
    """The steps that read the files, then ``PackSegInputs``: image and label at the file's size."""
    steps = [t for t in pipeline if t['type'] in LOADING_STEPS or t['type'].startswith('Load')]
    return steps + [dict(type='PackSegInputs')]


def paint(img: np.ndarray, label: np.ndarray, palette: np.ndarray, opacity: float) -> np.ndarray:
    """``img`` (BGR) with the colour of each labelled pixel's class blended in; ignored
    pixels (ids beyond the palette, e.g. 255) are left as they are."""
    out = img.copy()
    known = label < len(palette)
    out[known] = overlay(img[known], label[known], palette, opacity)
    return out


def browse_dataset(cfg, out_dir, phase: str = 'train', num: int = 8, augmented: bool = False,
                   opacity: float = 0.5) -> BrowseSummary:
    """Write ``num`` samples spread evenly over the ``phase`` dataset to ``out_dir`` as
    ``<index>_<image name>.png``: the image, the painted copy, a legend below."""
    from mmseg.registry import DATASETS
    from mmseg.utils import register_all_modules

    loader = cfg.get(f'{phase}_dataloader')
    if not loader:
        raise DatasetError(f'the config has no {phase}_dataloader')
    if augmented and phase != 'train':
        raise DatasetError(f'augmented shows the training pipeline; the {phase} pipeline resizes images '
                           'but not labels: leave it out for --phase ' + phase)
    dataset_cfg = copy.deepcopy(loader['dataset'])
    check_dataset_config(dataset_cfg, f'{phase}_dataloader.dataset')
    if not augmented:
        for _, leaf in dataset_leaves(dataset_cfg, ''):
            leaf['pipeline'] = loading_only(leaf['pipeline'])
    register_all_modules(init_default_scope=True)
    dataset = DATASETS.build(dataset_cfg)
    classes = dataset.metainfo['classes']
    palette = np.asarray(dataset.metainfo['palette'], np.uint8)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    summary = BrowseSummary()
    indices = np.unique(np.linspace(0, len(dataset) - 1, min(num, len(dataset))).round().astype(int))
    for index in indices:
        sample = dataset[int(index)]
        img = np.ascontiguousarray(sample['inputs'].permute(1, 2, 0).numpy())  # BGR, as loaded
        label = sample['data_samples'].gt_sem_seg.data[0].numpy()
        view = draw_legend(np.concatenate([img, paint(img, label, palette, opacity)], axis=1), label, classes,
                           palette)
        stem = osp.splitext(osp.basename(sample['data_samples'].img_path))[0]
        path = out_dir / f'{index:05d}_{stem}.png'
        if not cv2.imwrite(str(path), view):
            raise OSError(f'could not write {path}')
        summary.written.append(path)
        ids, counts = np.unique(label, return_counts=True)
        for i, n in zip(ids.tolist(), counts.tolist()):
            name = classes[i] if i < len(classes) else 'ignored'
            summary.pixels[name] = summary.pixels.get(name, 0) + n
    return summary


def main(argv=None) -> BrowseSummary:
    parser = argparse.ArgumentParser(description='Paint samples of a config\'s dataset: image, label over it, '
                                                 'legend; and each class\'s share of the pixels.')
    parser.add_argument('config')
    parser.add_argument('--out', required=True, help='folder for the pictures')
    parser.add_argument('--phase', choices=['train', 'val', 'test'], default='train')
    parser.add_argument('--num', type=int, default=8, help='samples, spread evenly over the split (default 8)')
    parser.add_argument('--augmented', action='store_true',
                        help='run the whole training pipeline (crops, flips, colour changes) instead of loading only')
    parser.add_argument('--opacity', type=float, default=0.5, help='label colour opacity in [0, 1] (default 0.5)')
    parser.add_argument('--cfg-options', nargs='+', action=DictAction, help='override config keys, as train.py')
    args = parser.parse_args(argv)
    if args.num < 1:
        parser.error(f'--num must be >= 1, got {args.num}')
    if not 0 <= args.opacity <= 1:
        parser.error(f'--opacity must be in [0, 1], got {args.opacity}')
    cfg = Config.fromfile(args.config)
    if args.cfg_options:
        cfg.merge_from_dict(args.cfg_options)
    summary = browse_dataset(cfg, args.out, args.phase, args.num, args.augmented, args.opacity)
    print(f'wrote {len(summary.written)} pictures to {args.out}')
    print(f'pixels in them: {summary.shares()}')
    return summary
