"""Learnable panoptic scenes in COCO 2017's layouts (``make_synthetic_data('coco_panoptic', ROOT)``),
for the panoptic and instance configs (configs/tiny/vit5_eomt_coco_panoptic_synthetic.py).

Under ``ROOT/coco``: ``{train,val}2017/*.jpg``; the panoptic annotations
``annotations/panoptic_{split}2017.json`` with their PNGs ``annotations/panoptic_{split}2017/``
(segment id = R + 256 G + 256^2 B, 0 void); the instance annotations
``annotations/instances_{split}2017.json`` (RLE masks, boxes, areas). Categories are COCO's 133
panoptic ones by name, in mmdet's order, numbered 1..133 (things 1..80): mmdet maps categories by
name, so the ids need not be COCO's.

A scene: two stuff regions (top, bottom) of synthetic.py's textures and two to five thing
instances of four classes, each class with its own colour, texture and shape; one pair of
instances of one class touches side by side in some scenes, and every fourth scene has a
crowd region (``iscrowd``: not a training target, not a false positive). A 2-pixel frame is void.
"""
import json
from pathlib import Path

import cv2
import numpy as np

from ..utils.image import mask_box, mask_rle, panoptic_rgb
from .synthetic import SHAPES, _paint, write_image

STUFF = ('sky-other-merged', 'grass-merged', 'wall-other-merged', 'road')
THINGS = ('person', 'car', 'dog', 'chair')   # each its own shape: synthetic.SHAPES, in order
_TEXTURE_IDS = {'sky-other-merged': 3, 'grass-merged': 10, 'wall-other-merged': 1, 'road': 7,
                'person': 13, 'car': 21, 'dog': 16, 'chair': 20}   # synthetic.py's colour/texture per class


def _categories():
    from mmdet.datasets import CocoPanopticDataset
    meta = CocoPanopticDataset.METAINFO
    things = set(meta['thing_classes'])
    return [dict(id=i + 1, name=name, supercategory='synthetic', isthing=int(name in things))
            for i, name in enumerate(meta['classes'])]


def _shape(kind: str, h: int, w: int, cx: int, cy: int, r: int) -> np.ndarray:
    mask = np.zeros((h, w), np.uint8)
    if kind == 'circle':
        cv2.circle(mask, (cx, cy), r, 1, -1)
    elif kind == 'rectangle':
        cv2.rectangle(mask, (cx - r, cy - r // 2), (cx + r, cy + r // 2), 1, -1)
    elif kind == 'triangle':
        cv2.fillPoly(mask, [np.array([[cx, cy - r], [cx - r, cy + r], [cx + r, cy + r]], np.int32)], 1)
    else:
        cv2.ellipse(mask, (cx, cy), (r, r // 2), 0, 0, 360, 1, -1)
    return mask.astype(bool)


def _scene(h: int, w: int, rng, crowd: bool):
    """(BGR image, per-pixel segment index (-1 void), [(class name, iscrowd)] per segment)."""
    img = np.zeros((h, w, 3), np.float32)
    seg = np.full((h, w), -1, np.int32)
    segments = []
    split = int(rng.integers(h // 3, 2 * h // 3))
    for rows, name in ((slice(0, split), STUFF[rng.integers(2)]), (slice(split, h), STUFF[2 + rng.integers(2)])):
        mask = np.zeros((h, w), bool)
        mask[rows] = True
        _paint(img, mask, _TEXTURE_IDS[name], rng)
        seg[mask] = len(segments)
        segments.append((name, 0))
    placed = []
    n = int(rng.integers(2, 6))
    for i in range(n):
        k = int(rng.integers(len(THINGS)))
        r = int(rng.integers(min(h, w) // 10, min(h, w) // 6))
        if i == 1 and rng.random() < 0.5:   # touching its predecessor: same class, side by side
            k, (cx, cy, r) = placed[0][0], placed[0][1]
            cx = min(cx + 2 * r, w - r - 3)
        else:
            cx, cy = int(rng.integers(r + 3, w - r - 3)), int(rng.integers(r + 3, h - r - 3))
        placed.append((k, (cx, cy, r)))
        mask = _shape(SHAPES[k], h, w, cx, cy, r)
        _paint(img, mask, _TEXTURE_IDS[THINGS[k]], rng)
        seg[mask] = len(segments)
        segments.append((THINGS[k], int(crowd and i == n - 1)))
    seg[:2], seg[-2:], seg[:, :2], seg[:, -2:] = -1, -1, -1, -1
    img += rng.normal(0, 6, img.shape)
    return np.clip(img, 0, 255).astype(np.uint8), seg, segments


def make_synthetic_coco_panoptic(root: Path, counts: dict, size: int, rng) -> None:
    """Write the scenes of :func:`_scene` in COCO's panoptic and instance layouts under ``root``."""
    categories = _categories()
    by_name = {c['name']: c['id'] for c in categories}
    h, w = size, int(round(size * 4 / 3))
    ann_dir = root / 'annotations'
    for split, count in counts.items():
        images, panoptic, instances = [], [], []
        for i in range(count):
            image_id = 1 + i + (0 if split == 'train' else 500000)
            stem = f'{image_id:012d}'
            img, seg, segments = _scene(h, w, rng, crowd=i % 4 == 3)
            write_image(root / f'{split}2017' / f'{stem}.jpg', img)
            images.append(dict(id=image_id, file_name=f'{stem}.jpg', height=h, width=w))
            ids = np.zeros((h, w), np.int64)
            infos = []
            for s, (name, crowd) in enumerate(segments):
                mask = seg == s
                if not mask.any():   # covered by later instances
                    continue
                segment_id = 1 + s * 37   # arbitrary, unique in the image
                ids[mask] = segment_id
                bbox = mask_box(mask)
                infos.append(dict(id=segment_id, category_id=by_name[name], iscrowd=crowd, bbox=bbox,
                                  area=int(mask.sum())))
                if name in THINGS:
                    instances.append(dict(id=len(instances) + 1, image_id=image_id, category_id=by_name[name],
                                          segmentation=mask_rle(mask), area=int(mask.sum()), bbox=bbox, iscrowd=crowd))
            write_image(ann_dir / f'panoptic_{split}2017' / f'{stem}.png', panoptic_rgb(ids)[..., ::-1])
            panoptic.append(dict(image_id=image_id, file_name=f'{stem}.png', segments_info=infos))
        (ann_dir / f'panoptic_{split}2017.json').write_text(json.dumps(
            dict(images=images, annotations=panoptic, categories=categories)))
        (ann_dir / f'instances_{split}2017.json').write_text(json.dumps(
            dict(images=images, annotations=instances, categories=[c for c in categories if c['isthing']])))
