"""COCO panoptic training data as EoMT keeps it: every image with a segment, thing or stuff.

mmdet's ``CocoPanopticDataset`` with ``filter_cfg.filter_empty_gt=True`` keeps only images
with a non-crowd thing; without a filter it keeps images with no segment at all. EoMT's
dataset (tue-mps/eomt ``datasets/dataset.py`` lines 126-130, at 7bd19dd) skips an image only
where its annotation names no segment. mmdet has no filter for that rule, so this subclass
adds it; every other behaviour, ``filter_empty_gt`` and ``min_size`` included, is mmdet's.
"""
from typing import List

from mmdet.datasets import CocoPanopticDataset
from mmdet.registry import DATASETS


@DATASETS.register_module()
class EoMTCocoPanopticDataset(CocoPanopticDataset):
    """mmdet's ``CocoPanopticDataset`` whose training split drops the images without any
    segment (EoMT's rule). mmdet's parser already leaves out segments of no area, so an image
    whose every segment is degenerate is dropped too."""

    def filter_data(self) -> List[dict]:
        kept = super().filter_data()
        if self.test_mode:
            return kept
        return [info for info in kept if info['segments_info']]


__all__ = ['EoMTCocoPanopticDataset']
