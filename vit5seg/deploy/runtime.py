"""Run an exported segmentor with ONNX Runtime: whole image, or sliding window as mmseg's
``slide`` test mode does it (same windows, logits averaged where they overlap).

    from vit5seg.deploy import OnnxSession
    session = OnnxSession('model.onnx')                  # CPU, or providers=[...CUDA...]
    logits, labels = session.run(batch)                  # (N, 3, H, W) float32 BGR 0-255
    logits, labels = session.slide(image, crop=(512, 512), stride=(341, 341))  # (H, W, 3) BGR
    logits, labels = session.predict(photo)              # as the config tests: resize, mode, photo size
    out = session.detect(photo)                          # a panoptic or instance export: its outputs by name
"""
import json
from typing import Dict, Optional, Sequence, Tuple

import cv2
import numpy as np

from ..paths import tool_command

# a detector export's outputs that hold what mmdet's fusion head is given (vit5seg.deploy.detector)
LOGIT_OUTPUTS = ('class_logits', 'mask_logits')


def slide_windows(hw: Tuple[int, int], crop: Tuple[int, int], stride: Tuple[int, int]):
    """mmseg's windows: a grid at ``stride``, the last window of a row or column moved back
    to end at the border, windows cut to the image where it is smaller than the crop."""
    (h, w), (ch, cw), (sh, sw) = hw, crop, stride
    rows = max(h - ch + sh - 1, 0) // sh + 1
    cols = max(w - cw + sw - 1, 0) // sw + 1
    for r in range(rows):
        for c in range(cols):
            y2, x2 = min(r * sh + ch, h), min(c * sw + cw, w)
            yield max(y2 - ch, 0), y2, max(x2 - cw, 0), x2


class OnnxSession:
    def __init__(self, path, providers: Optional[Sequence[str]] = None, threads: Optional[int] = None):
        import onnxruntime as ort
        options = ort.SessionOptions()
        if threads:
            options.intra_op_num_threads = threads
        self.session = ort.InferenceSession(str(path), options, providers=list(providers or ['CPUExecutionProvider']))
        shape = self.session.get_inputs()[0].shape
        # a fixed-size export states its H and W; a dynamic one names them
        self.fixed_hw = tuple(shape[2:]) if all(isinstance(s, int) for s in shape[2:]) else None
        stored = self.session.get_modelmeta().custom_metadata_map.get('vit5seg.inference')
        self.settings = json.loads(stored) if stored else None  # deploy.export.inference_settings

    def run(self, batch: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
        """(N, 3, H, W) float32 BGR 0-255 -> logits (N, C, H, W), labels (N, H, W)."""
        batch = np.ascontiguousarray(batch, dtype=np.float32)
        if self.fixed_hw is not None and tuple(batch.shape[2:]) != self.fixed_hw:
            raise ValueError(f'this model was exported for {self.fixed_hw[0]}x{self.fixed_hw[1]} inputs, got '
                             f'{batch.shape[2]}x{batch.shape[3]}: export with --dynamic for other sizes')
        logits, labels = self.session.run(None, {'image': batch})
        return logits, labels

    def slide(self, image: np.ndarray, crop: Tuple[int, int], stride: Tuple[int, int]
              ) -> Tuple[np.ndarray, np.ndarray]:
        """One (H, W, 3) BGR image by sliding windows -> logits (C, H, W), labels (H, W)."""
        h, w = image.shape[:2]
        if self.fixed_hw is not None and (h < crop[0] or w < crop[1] or tuple(crop) != self.fixed_hw):
            raise ValueError(f'sliding windows of {crop[0]}x{crop[1]} over a {h}x{w} image need a model '
                             f'exported for exactly the crop size (this one: {self.fixed_hw}) and an image '
                             'at least that large; export with --dynamic otherwise')
        chw = np.ascontiguousarray(image.transpose(2, 0, 1), dtype=np.float32)
        total, count = None, np.zeros((1, h, w), np.float32)
        for y1, y2, x1, x2 in slide_windows((h, w), crop, stride):
            logits, _ = self.run(chw[None, :, y1:y2, x1:x2])
            if total is None:
                total = np.zeros((logits.shape[1], h, w), np.float32)
            total[:, y1:y2, x1:x2] += logits[0]
            count[:, y1:y2, x1:x2] += 1
        logits = total / count
        return logits, logits.argmax(axis=0)

    def detect(self, image: np.ndarray, logits: bool = False) -> Dict[str, np.ndarray]:
        """One (H, W, 3) BGR photo through a panoptic or instance export (photo in; the resize,
        network and mmdet's post-processing are in the graph: vit5seg.deploy.detector) -> its
        outputs by name: ``panoptic``, ``segment_ids``, ``labels``, ``scores``; or ``masks``,
        ``labels``, ``scores``; with ``logits`` also ``class_logits`` and ``mask_logits`` (an export
        made before they were outputs has none)."""
        task = (self.settings or {}).get('task')
        if task not in ('panoptic', 'instance'):
            raise ValueError('this is no panoptic or instance export: use predict() or run() for a semantic one')
        if self.fixed_hw is not None and image.shape[:2] != self.fixed_hw:
            raise ValueError(f'this model was exported for {self.fixed_hw[0]}x{self.fixed_hw[1]} photos, got '
                             f'{image.shape[0]}x{image.shape[1]}: export with --dynamic for other sizes')
        batch = np.ascontiguousarray(image.transpose(2, 0, 1)[None], dtype=np.float32)
        names = [o.name for o in self.session.get_outputs() if logits or o.name not in LOGIT_OUTPUTS]
        return dict(zip(names, self.session.run(names, {'image': batch})))

    def predict(self, image: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
        """One (H, W, 3) BGR photo as the exported config tests it: its test ``Resize``
        (mmcv's own resizing), whole or sliding-window inference, the logits resized back
        to the photo (bilinear) -> logits (C, H, W), labels (H, W), as ``inference_model``."""
        import mmcv
        if self.settings is None:
            raise ValueError('this model holds no test settings (exported before they were stored): export it '
                             f'again with {tool_command("export_onnx.py")}')
        if 'task' in self.settings:
            raise ValueError(f'this is a {self.settings["task"]} export: use detect()')
        h, w = image.shape[:2]
        resize = self.settings['resize']
        if resize is not None:
            rescale = mmcv.imrescale if resize['keep_ratio'] else mmcv.imresize
            # an export made before the backend was stored resized with mmcv's default, cv2
            image = rescale(image, tuple(resize['scale']), interpolation='bilinear',
                            backend=resize.get('backend', 'cv2'))
        if self.settings['mode'] == 'slide':
            logits, _ = self.slide(image, tuple(self.settings['crop_size']), tuple(self.settings['stride']))
        else:
            if self.fixed_hw is not None and image.shape[:2] != self.fixed_hw:
                raise ValueError(f'the config tests this photo at {image.shape[0]}x{image.shape[1]}, but the model '
                                 f'was exported for {self.fixed_hw[0]}x{self.fixed_hw[1]} only: export with --dynamic')
            logits = self.run(image.transpose(2, 0, 1)[None])[0][0]
        if self.settings['align_corners']:
            raise ValueError('the config resizes with align_corners=True, which predict() does not reproduce')
        logits = resize_channels(logits, (h, w))
        return logits, logits.argmax(axis=0)


def resize_channels(maps: np.ndarray, hw: Tuple[int, int]) -> np.ndarray:
    """(C, h, w) -> (C, H, W), bilinear with half-pixel centres (torch's align_corners=False,
    what mmseg resizes logits with); cv2 takes at most 128 channels at a time."""
    if tuple(maps.shape[1:]) == tuple(hw):
        return maps
    hwc = np.ascontiguousarray(maps.transpose(1, 2, 0), dtype=np.float32)
    parts = [cv2.resize(hwc[..., i:i + 128], (hw[1], hw[0]), interpolation=cv2.INTER_LINEAR)
             for i in range(0, hwc.shape[2], 128)]
    parts = [p[..., None] if p.ndim == 2 else p for p in parts]
    return np.concatenate(parts, axis=2).transpose(2, 0, 1)
