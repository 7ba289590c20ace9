"""What ``tools/infer.py`` writes for panoptic and instance models (mmdet's ``DetDataSample``).

Panoptic: ``panoptic/<name>.png`` in COCO's panoptic format (segment id = R + 256 G + 256^2 B,
0 void) and one ``panoptic.json`` with each image's ``segments_info`` (id, category_id,
isthing, area, bbox) and the categories; instance: ``instances.json`` in COCO's results
format (RLE masks, boxes, scores). Category ids are the model's class index + 1, named in the
JSON's ``categories``: a converted model knows its class names, not a dataset's own ids.
Overlays (``tools/infer.py`` writes them as ``overlays/<name>.jpg``): each segment or instance
in its class colour with its outline and its class (and score) written on it.
"""
import json
from pathlib import Path
from typing import List

import cv2
import numpy as np
from mmdet.evaluation.functional import INSTANCE_OFFSET  # panoptic ids: class + instance x it

from ..utils.image import mask_box, mask_rle, panoptic_rgb


def categories(meta: dict) -> List[dict]:
    things = set(meta.get('thing_classes', meta['classes']))
    return [dict(id=i + 1, name=name, isthing=int(name in things)) for i, name in enumerate(meta['classes'])]


def _colour(palette, label: int, k: int):
    base = np.asarray(palette[label % len(palette)], np.float32)[::-1]   # RGB palette -> BGR
    return tuple(int(v) for v in np.clip(base * (1 - 0.12 * (k % 4)) + 20 * (k % 3), 0, 255))


def _draw(view: np.ndarray, mask: np.ndarray, colour, text: str, opacity: float) -> None:
    view[mask] = (view[mask] * (1 - opacity) + np.asarray(colour) * opacity).round().astype(np.uint8)
    contours, _ = cv2.findContours(mask.astype(np.uint8), cv2.RETR_EXTERNAL, cv2.CHAIN_APPROX_SIMPLE)
    cv2.drawContours(view, contours, -1, colour, 1, cv2.LINE_AA)
    ys, xs = np.nonzero(mask)
    x, y = int(xs.mean()) - 4 * len(text) // 2, int(ys.mean())
    cv2.putText(view, text, (max(x, 0), y), cv2.FONT_HERSHEY_SIMPLEX, 0.4, (255, 255, 255), 2, cv2.LINE_AA)
    cv2.putText(view, text, (max(x, 0), y), cv2.FONT_HERSHEY_SIMPLEX, 0.4, (0, 0, 0), 1, cv2.LINE_AA)


class DetectionWriter:
    """Collects one image at a time; :meth:`close` writes the JSON files."""

    def __init__(self, out_dir, meta: dict, opacity: float = 0.5):
        self.out_dir, self.meta, self.opacity = Path(out_dir), meta, opacity
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self.panoptic, self.instances = [], []

    def add(self, name: str, img: np.ndarray, result) -> np.ndarray:
        """Record ``result`` (a DetDataSample) of the BGR ``img``; returns its overlay, which the
        caller writes (``tools/infer.py``: ``overlays/<name>.jpg``)."""
        view = img.copy()
        if 'pred_panoptic_seg' in result:
            self._panoptic(name, view, result.pred_panoptic_seg.sem_seg[0].cpu().numpy())
        if 'pred_instances' in result:
            self._instances(name, view, result.pred_instances)
        return view

    def _panoptic(self, name: str, view: np.ndarray, pan: np.ndarray) -> None:
        classes, palette = self.meta['classes'], self.meta.get('palette') or [(220, 20, 60)]
        ids = np.zeros(pan.shape, np.int64)
        segments = []
        for k, value in enumerate(v for v in np.unique(pan) if v % INSTANCE_OFFSET < len(classes)):
            mask = pan == value
            label = int(value % INSTANCE_OFFSET)
            ids[mask] = k + 1
            segments.append(dict(id=k + 1, category_id=label + 1, isthing=int(value >= INSTANCE_OFFSET),
                                 area=int(mask.sum()), bbox=mask_box(mask)))
            _draw(view, mask, _colour(palette, label, k), str(classes[label]), self.opacity)
        folder = self.out_dir / 'panoptic'
        folder.mkdir(exist_ok=True)
        cv2.imwrite(str(folder / f'{name}.png'), panoptic_rgb(ids)[..., ::-1])
        self.panoptic.append(dict(file_name=f'{name}.png', image_name=name, segments_info=segments))

    def _instances(self, name: str, view: np.ndarray, found) -> None:
        classes, palette = self.meta['classes'], self.meta.get('palette') or [(220, 20, 60)]
        order = found.scores.argsort(descending=True).tolist()
        for k, i in enumerate(order):
            mask = found.masks[i].cpu().numpy().astype(bool)
            if not mask.any():
                continue
            label, score = int(found.labels[i]), float(found.scores[i])
            rle = mask_rle(mask)
            x1, y1, x2, y2 = (float(v) for v in found.bboxes[i])
            self.instances.append(dict(image_name=name, category_id=label + 1, score=score, segmentation=rle,
                                       bbox=[x1, y1, x2 - x1, y2 - y1]))
            if score >= 0.3:  # the overlay shows the confident ones; the JSON keeps all
                _draw(view, mask, _colour(palette, label, k), f'{classes[label]} {score:.2f}', self.opacity)

    def close(self) -> None:
        cats = categories(self.meta)
        if self.panoptic:
            (self.out_dir / 'panoptic.json').write_text(json.dumps(dict(annotations=self.panoptic, categories=cats)))
        if self.instances or not self.panoptic:
            (self.out_dir / 'instances.json').write_text(json.dumps(self.instances))
            (self.out_dir / 'categories.json').write_text(json.dumps(cats))
