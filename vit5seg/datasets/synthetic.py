"""Pictures a short training can learn, and ADE20K's official layout filled with them.

Each class used has its own colour, texture (stripe frequency and direction) and, for
objects, its own shape, so pixels carry the class in local appearance and in shape. A
thin frame is labelled 0 ("other", ignored under ``reduce_zero_label``). ``layouts.py``
relabels these pictures for the other datasets' layouts.
"""
import math
from pathlib import Path

import cv2
import numpy as np

# ADE20K ids (1-based, 0 = other): stuff classes fill the background, objects are drawn on top.
STUFF_IDS = (1, 3, 4, 7)        # wall, sky, floor, road
OBJECT_IDS = (13, 16, 20, 21)   # person, table, chair, car
SHAPES = ('circle', 'rectangle', 'triangle', 'ellipse')


def _class_colour(class_id: int) -> np.ndarray:
    hue = (class_id * 37) % 180
    hsv = np.uint8([[[hue, 200, 90 + (class_id * 53) % 150]]])
    return cv2.cvtColor(hsv, cv2.COLOR_HSV2BGR)[0, 0].astype(np.float32)


def _texture(class_id: int, h: int, w: int) -> np.ndarray:
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    angle = (class_id * 0.7) % math.pi
    period = 4 + (class_id % 5) * 3
    return 25 * np.sin((xx * math.cos(angle) + yy * math.sin(angle)) * 2 * math.pi / period)


def _paint(img, mask, class_id, rng):
    colour = _class_colour(class_id) + rng.normal(0, 8, 3)
    tex = _texture(class_id, *mask.shape)
    img[mask] = colour + tex[mask][:, None]


def _draw_shape(shape: str, h: int, w: int, rng) -> np.ndarray:
    mask = np.zeros((h, w), np.uint8)
    cy, cx = int(rng.integers(h // 5, 4 * h // 5)), int(rng.integers(w // 5, 4 * w // 5))
    r = int(rng.integers(min(h, w) // 8, min(h, w) // 4))
    if shape == 'circle':
        cv2.circle(mask, (cx, cy), r, 1, -1)
    elif shape == 'rectangle':
        cv2.rectangle(mask, (cx - r, cy - r // 2), (cx + r, cy + r // 2), 1, -1)
    elif shape == 'triangle':
        pts = np.array([[cx, cy - r], [cx - r, cy + r], [cx + r, cy + r]], np.int32)
        cv2.fillPoly(mask, [pts], 1)
    else:
        cv2.ellipse(mask, (cx, cy), (r, r // 2), 30, 0, 360, 1, -1)
    return mask.astype(bool)


def synthetic_sample(size: int, rng: np.random.Generator, aspect: float = 1.25):
    """One (BGR uint8 image, ADE20K uint8 label) pair of size x round(aspect * size): two
    stuff regions (top, bottom) and one to three objects."""
    h, w = size, int(round(size * aspect))
    img = np.zeros((h, w, 3), np.float32)
    label = np.zeros((h, w), np.uint8)
    split = int(rng.integers(h // 3, 2 * h // 3))  # two stuff regions: top and bottom
    for region, class_id in ((slice(0, split), rng.choice(STUFF_IDS)), (slice(split, h), rng.choice(STUFF_IDS))):
        mask = np.zeros((h, w), bool)
        mask[region] = True
        _paint(img, mask, int(class_id), rng)
        label[mask] = class_id
    for _ in range(int(rng.integers(1, 4))):
        k = int(rng.integers(len(OBJECT_IDS)))
        mask = _draw_shape(SHAPES[k], h, w, rng)
        _paint(img, mask, OBJECT_IDS[k], rng)
        label[mask] = OBJECT_IDS[k]
    label[:2], label[-2:], label[:, :2], label[:, -2:] = 0, 0, 0, 0
    img += rng.normal(0, 6, img.shape)
    return np.clip(img, 0, 255).astype(np.uint8), label


def write_image(path: Path, array: np.ndarray) -> None:
    """A JPEG at quality 95 or a lossless PNG (label maps), by ``path``'s suffix."""
    path.parent.mkdir(parents=True, exist_ok=True)
    params = [cv2.IMWRITE_JPEG_QUALITY, 95] if path.suffix == '.jpg' else []
    if not cv2.imwrite(str(path), array, params):
        raise OSError(f'could not write {path}')


def make_synthetic_ade20k(out_dir, num_train: int = 64, num_val: int = 16, size: int = 128, seed: int = 0) -> Path:
    """Write ``out_dir/ADEChallengeData2016/{images,annotations}/{training,validation}``;
    returns the ``ADEChallengeData2016`` folder."""
    root = Path(out_dir) / 'ADEChallengeData2016'
    rng = np.random.default_rng(seed)
    for split, count, tag in (('training', num_train, 'train'), ('validation', num_val, 'val')):
        img_dir, ann_dir = root / 'images' / split, root / 'annotations' / split
        img_dir.mkdir(parents=True, exist_ok=True)
        ann_dir.mkdir(parents=True, exist_ok=True)
        for i in range(count):
            img, label = synthetic_sample(size, rng)
            name = f'ADE_{tag}_{i + 1:08d}'
            write_image(img_dir / f'{name}.jpg', img)
            write_image(ann_dir / f'{name}.png', label)
    return root
