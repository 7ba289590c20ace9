"""Learnable clips in YouTube-VIS 2019's layout (``make_synthetic_data('ytvis', ROOT)``): shapes that move,
occlude one another and leave the frame, each with one identity over its clip.

Under ``ROOT/youtube_vis_2019``, for the splits ``train`` and ``valid``:

- the official layout: ``{split}/JPEGImages/<video>/<frame>.jpg`` and ``{split}.json`` (``videos`` with
  their ``file_names``; ``annotations``, one per identity, with a ``segmentations``/``bboxes``/``areas`` entry
  per frame, None where it is not seen; the 40 ``categories``). The synthetic ``valid.json`` keeps its
  annotations, which the real one withholds, so that a test can score it;
- what mmdet's converter (``tools/dataset_converters/youtubevis2coco.py``) makes of it and mmdet's
  ``YouTubeVISDataset`` reads: ``annotations/youtube_vis_2019_{split}.json`` (CocoVID: ``videos``, ``images``
  with ``frame_id``, one annotation per seen object and frame with its ``instance_id``).

A clip: a textured background and two to three objects of four classes (each class its own colour,
texture and shape, as :mod:`.synthetic`), each moving at its own constant velocity; later objects are
drawn over earlier ones, and a mask is what is left visible.
"""
import json
from pathlib import Path

import numpy as np

from ..utils.image import mask_box, mask_rle
from .coco_synthetic import _shape
from .synthetic import SHAPES, _paint, write_image

CLASSES = ('person', 'dog', 'cat', 'sedan')   # YouTube-VIS 2019 classes, each its own shape: SHAPES in order
_TEXTURE_IDS = {'person': 13, 'dog': 16, 'cat': 21, 'sedan': 20}   # synthetic.py's colour/texture per class
BACKGROUND_TEXTURE = 3


def ytvis_categories() -> list:
    from mmdet.datasets import YouTubeVISDataset
    YouTubeVISDataset.set_dataset_classes('2019')
    return [dict(id=i + 1, name=name, supercategory='object')
            for i, name in enumerate(YouTubeVISDataset.METAINFO['classes'])]


def _clip(frames: int, h: int, w: int, rng):
    """([BGR frame], [(class name, [visible mask per frame])])."""
    objects = []
    for _ in range(int(rng.integers(2, 4))):
        k = int(rng.integers(len(CLASSES)))
        r = int(rng.integers(min(h, w) // 8, min(h, w) // 5))
        start = np.array([rng.integers(r, w - r), rng.integers(r, h - r)], float)
        velocity = rng.uniform(-0.12, 0.12, 2) * (w, h)
        objects.append((k, r, start, velocity))
    images, masks = [], [[] for _ in objects]
    for t in range(frames):
        img = np.zeros((h, w, 3), np.float32)
        _paint(img, np.ones((h, w), bool), BACKGROUND_TEXTURE, rng)
        drawn = [_shape(SHAPES[k], h, w, *np.round(start + t * velocity).astype(int), r)
                 for k, r, start, velocity in objects]
        for i, mask in enumerate(drawn):
            _paint(img, mask, _TEXTURE_IDS[CLASSES[objects[i][0]]], rng)
            visible = mask & ~np.any(drawn[i + 1:], axis=0) if i + 1 < len(drawn) else mask
            masks[i].append(visible)
        img += rng.normal(0, 6, img.shape)
        images.append(np.clip(img, 0, 255).astype(np.uint8))
    return images, [(CLASSES[k], m) for (k, *_), m in zip(objects, masks)]


def _box_area(mask: np.ndarray):
    if not mask.any():
        return None, None, None
    return mask_rle(mask), mask_box(mask), int(mask.sum())


def make_synthetic_ytvis(root: Path, counts: dict, size: int, rng, frames: int = 5) -> None:
    """Write clips of :func:`_clip` under ``root`` in both layouts (module docstring)."""
    categories = ytvis_categories()
    by_name = {c['name']: c['id'] for c in categories}
    h, w = size, int(round(size * 16 / 9))
    for split, count in counts.items():
        split = {'val': 'valid'}.get(split, split)   # YouTube-VIS's name of its validation split
        official = dict(videos=[], annotations=[], categories=categories)
        coco_vid = dict(videos=[], images=[], annotations=[], categories=categories)
        next_instance = 1   # over the split, as mmdet's global_instance_id
        for v in range(count):
            video_id, name = v + 1, f'{split}{v:04d}'
            images, objects = _clip(frames, h, w, rng)
            file_names = [f'{name}/{t:05d}.jpg' for t in range(frames)]
            for file_name, img in zip(file_names, images):
                write_image(root / split / 'JPEGImages' / file_name, img)
            official['videos'].append(dict(id=video_id, width=w, height=h, length=frames, file_names=file_names))
            coco_vid['videos'].append(dict(id=video_id, name=name, width=w, height=h))
            first_image = len(coco_vid['images']) + 1
            for t, file_name in enumerate(file_names):
                coco_vid['images'].append(dict(file_name=file_name, height=h, width=w, id=first_image + t,
                                               frame_id=t, video_id=video_id))
            for class_name, masks in objects:
                per_frame = [_box_area(m) for m in masks]
                if all(rle is None for rle, _, _ in per_frame):
                    continue
                track_id = len(official['annotations']) + 1
                official['annotations'].append(dict(
                    id=track_id, video_id=video_id, category_id=by_name[class_name], iscrowd=0, width=w, height=h,
                    length=1, segmentations=[p[0] for p in per_frame], bboxes=[p[1] for p in per_frame],
                    areas=[p[2] for p in per_frame]))
            # as mmdet's converter numbers them: frame by frame, an identity when it is first seen
            tracks, instance_ids = [a for a in official['annotations'] if a['video_id'] == video_id], {}
            for t in range(frames):
                for track in (a for a in tracks if a['bboxes'][t] is not None):
                    if track['id'] not in instance_ids:
                        instance_ids[track['id']], next_instance = next_instance, next_instance + 1
                    instance = instance_ids[track['id']]
                    coco_vid['annotations'].append(dict(
                        id=len(coco_vid['annotations']) + 1, video_id=video_id, image_id=first_image + t,
                        category_id=track['category_id'], instance_id=instance, bbox=track['bboxes'][t],
                        segmentation=track['segmentations'][t], area=track['areas'][t], iscrowd=0))
        (root / f'{split}.json').write_text(json.dumps(official))
        (root / 'annotations').mkdir(parents=True, exist_ok=True)
        (root / 'annotations' / f'youtube_vis_2019_{split}.json').write_text(json.dumps(coco_vid))
