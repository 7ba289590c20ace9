"""Image files and label drawing: the extensions the tools read, RGB reading, colour
overlays, legends, palette PNGs."""
from pathlib import Path
from typing import List, Optional

import cv2
import numpy as np
import torch
from PIL import Image

IMAGE_EXTS = ('.jpg', '.jpeg', '.png', '.bmp', '.tif', '.tiff', '.webp')


def read_rgb(path) -> Optional[torch.Tensor]:
    """An image file as RGB float (3, H, W) in [0, 255], or None if it cannot be decoded."""
    img = cv2.imread(str(path), cv2.IMREAD_COLOR)
    if img is None:
        return None
    return torch.from_numpy(img[..., ::-1].copy()).permute(2, 0, 1).float()


def colorize(label: np.ndarray, palette: np.ndarray) -> np.ndarray:
    """BGR colours of a label-id map."""
    return palette[label][..., ::-1]


def overlay(img: np.ndarray, label: np.ndarray, palette: np.ndarray, opacity: float) -> np.ndarray:
    return (img.astype(np.float32) * (1 - opacity) + colorize(label, palette) * opacity).round().astype(np.uint8)


def draw_legend(image: np.ndarray, label: np.ndarray, classes, palette: np.ndarray) -> np.ndarray:
    """A strip under the image with a swatch and the name of each class present."""
    present = [int(c) for c in np.unique(label) if c < len(classes)]
    row_h, swatch = 20, 14
    per_row = max(1, image.shape[1] // 160)
    rows = (len(present) + per_row - 1) // per_row
    strip = np.full((rows * row_h + 4, image.shape[1], 3), 255, np.uint8)
    for i, c in enumerate(present):
        x, y = (i % per_row) * 160 + 4, (i // per_row) * row_h + 4
        cv2.rectangle(strip, (x, y), (x + swatch, y + swatch), tuple(int(v) for v in palette[c][::-1]), -1)
        cv2.putText(strip, str(classes[c])[:18], (x + swatch + 4, y + swatch - 2), cv2.FONT_HERSHEY_SIMPLEX, 0.4,
                    (0, 0, 0), 1, cv2.LINE_AA)
    return np.concatenate([image, strip], axis=0)


def save_label_png(path: Path, label: np.ndarray, palette: np.ndarray) -> None:
    """Label ids as a palette PNG: PIL/mmcv read the ids, image viewers show colours."""
    img = Image.fromarray(label.astype(np.uint8), mode='P')
    flat = np.zeros((256, 3), np.uint8)
    flat[:len(palette)] = palette[:256]
    img.putpalette(flat.flatten().tolist())
    img.save(path)


def panoptic_rgb(ids: np.ndarray) -> np.ndarray:
    """Segment ids (H, W) -> COCO panoptic's PNG colours (H, W, 3) RGB: id = R + 256 G + 256^2 B."""
    return np.stack([ids % 256, ids // 256 % 256, ids // 65536], axis=-1).astype(np.uint8)


def mask_rle(mask: np.ndarray) -> dict:
    """COCO's RLE of an (H, W) mask, its counts as text (what a JSON file holds)."""
    from pycocotools import mask as mask_utils
    rle = mask_utils.encode(np.asfortranarray(mask.astype(np.uint8)))
    return dict(size=rle['size'], counts=rle['counts'].decode())


def mask_box(mask: np.ndarray) -> List[int]:
    """COCO's box [x, y, width, height] of a non-empty (H, W) mask."""
    ys, xs = np.nonzero(mask)
    return [int(xs.min()), int(ys.min()), int(xs.max() - xs.min() + 1), int(ys.max() - ys.min() + 1)]
