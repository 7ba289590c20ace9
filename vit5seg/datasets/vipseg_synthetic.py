"""Clips in VIPSeg's layout (``make_synthetic_data('vipseg', ROOT)``): YouTube-VIS's synthetic clips
(:mod:`.ytvis_synthetic`) as panoptic tubes: the background as VIPSeg's stuff ``wall`` (``floor`` in the
bottom quarter), each shape a thing of its class (person, dog, cat, car) with one id over its clip, a frame's
top two rows void, in ``images/``, ``panomasksRGB/`` and ``panoptic_gt_VIPSeg_{train,val}.json``
(:mod:`.vipseg`)."""
import json
from pathlib import Path

import numpy as np

from .synthetic import write_image
from .vspw_synthetic import SHAPE_CLASSES
from .ytvis_synthetic import _clip


def make_synthetic_vipseg(root: Path, counts: dict, size: int, rng, frames: int = 10) -> None:
    """Write ``counts[split]`` clips of ``frames`` frames a split (10: VPQ has 8-frame windows)."""
    from .vspw import VSPW_CLASSES, VSPW_PALETTE   # mmdet's (the [mask2former] extra), as the dataset is
    from .vipseg import VIPSEG_THINGS
    h, w = size, int(round(size * 16 / 9))
    category = {name: VSPW_CLASSES.index(name) for name in ('wall', 'floor', *SHAPE_CLASSES.values())}
    categories = [dict(id=i, name=n, isthing=int(i in VIPSEG_THINGS), color=list(c))
                  for i, (n, c) in enumerate(zip(VSPW_CLASSES, VSPW_PALETTE))]
    for split, count in counts.items():
        videos, annotations = [], []
        for v in range(count):
            name = f'{split}{v:04d}'
            images, objects = _clip(frames, h, w, rng)
            frames_info, frame_annotations = [], []
            for t, img in enumerate(images):
                ids = np.full((h, w), (category['wall'] + 1) * 100, np.int64)   # VIPSeg-like: (class + 1) x 100 + k
                ids[3 * h // 4:] = (category['floor'] + 1) * 100
                for k, (class_name, visible) in enumerate(objects):
                    ids[visible[t]] = (category[SHAPE_CLASSES[class_name]] + 1) * 100 + k + 1
                ids[:2] = 0
                write_image(root / 'images' / name / f'{t:08d}.jpg', img)
                rgb = np.stack([ids % 256, ids // 256 % 256, ids // 65536], -1).astype(np.uint8)
                write_image(root / 'panomasksRGB' / name / f'{t:08d}.png', rgb[..., ::-1])   # cv2 writes BGR
                segments = [dict(id=int(i), category_id=int(i) // 100 - 1, iscrowd=0, area=int((ids == i).sum()))
                            for i in np.unique(ids) if i]
                frames_info.append(dict(id=f'{name}_{t:08d}', file_name=f'{t:08d}.jpg', width=w, height=h))
                frame_annotations.append(dict(image_id=f'{name}_{t:08d}', file_name=f'{t:08d}.png',
                                              segments_info=segments))
            videos.append(dict(video_id=name, images=frames_info))
            annotations.append(dict(video_id=name, annotations=frame_annotations))
        (root / f'panoptic_gt_VIPSeg_{split}.json').write_text(
            json.dumps(dict(videos=videos, annotations=annotations, categories=categories)))
