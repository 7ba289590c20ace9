"""Clips in VSPW's layout (``make_synthetic_data('vspw', ROOT)``): YouTube-VIS's synthetic clips
(:mod:`.ytvis_synthetic`: shapes that move and hide one another) labelled per pixel, the background as
VSPW's ``wall``, each shape as its class (person, dog, cat, car), a frame's border rows as VSPW's 0 (not
scored), in ``data/<video>/{origin,mask}/`` with ``train.txt`` and ``val.txt`` (:mod:`.vspw`)."""
from pathlib import Path

import numpy as np

from .synthetic import write_image
from .ytvis_synthetic import _clip

SHAPE_CLASSES = {'person': 'person', 'dog': 'dog', 'cat': 'cat', 'sedan': 'car'}   # a synthetic shape's VSPW class


def make_synthetic_vspw(root: Path, counts: dict, size: int, rng, frames: int = 10) -> None:
    """Write ``counts[split]`` clips of ``frames`` frames a split (10: VC8 has windows)."""
    from .vspw import VSPW_CLASSES   # mmdet's (the [mask2former] extra), as the dataset is
    h, w = size, int(round(size * 16 / 9))
    raw = {name: VSPW_CLASSES.index(name) + 1 for name in ('wall', *SHAPE_CLASSES.values())}   # VSPW masks: class + 1
    for split, count in counts.items():
        names = [f'{split}{v:04d}' for v in range(count)]
        for name in names:
            images, objects = _clip(frames, h, w, rng)
            for t, img in enumerate(images):
                mask = np.full((h, w), raw['wall'], np.uint8)
                for class_name, visible in objects:
                    mask[visible[t]] = raw[SHAPE_CLASSES[class_name]]
                mask[:2] = 0
                write_image(root / 'data' / name / 'origin' / f'{t:08d}.jpg', img)
                write_image(root / 'data' / name / 'mask' / f'{t:08d}.png', mask)
        (root / f'{split}.txt').write_text(''.join(f'{n}\n' for n in names))
