"""EoMT's training augmentation (tue-mps/eomt ``datasets/transforms.py``) as mmseg
transforms: its colour jitter, and its geometry (scale jitter of the long side, pad,
random crop, a redraw of crops with no labelled pixel); and the photometric distortion of
Meta's linear probe (:class:`DINOv3PhotoMetricDistortion`).

mmseg's ADE20K ``RandomResize((2048, 512), ratio 0.5-2.0)`` scales the *short* side and
``RandomCrop(cat_max_ratio=0.75)`` re-crops where one class dominates; EoMT uses
torchvision's ``ScaleJitter``, which fits the image into the target box (the *long* side)
times a uniform scale, then pads to the box and crops. mmseg's ``PhotoMetricDistortion``
adds its brightness, scales contrast without a pivot and shifts hue by up to 36 degrees;
EoMT's torchvision adjustments multiply brightness, blend contrast and saturation with
grey and shift hue by up to 18 degrees. No mmseg or mmcv transform does either, so both are
written here; the pixel work itself is torchvision's kernels, as EoMT's, so an augmented
image is one EoMT could train on.
"""
from typing import Sequence, Tuple

import numpy as np
import torch
from mmcv.transforms import BaseTransform
from mmseg.datasets.transforms import PhotoMetricDistortion
from mmseg.registry import TRANSFORMS
from torchvision.transforms.v2 import InterpolationMode
from torchvision.transforms.v2 import functional as tvF



def jitter_size(height: int, width: int, target: Tuple[int, int], scale: float) -> Tuple[int, int]:
    """(new_height, new_width): the image fitted into ``target`` (h, w), times ``scale``,
    truncated. In float32, as torchvision's ``ScaleJitter`` computes it (a size that
    lands on an integer in float64 can fall one pixel short there, and the other way)."""
    ratio = min(target[0] / height, target[1] / width) * torch.tensor([scale], dtype=torch.float32)
    return int(height * ratio), int(width * ratio)


def _resize(array: np.ndarray, size: Tuple[int, int], interpolation: InterpolationMode) -> np.ndarray:
    """(H, W) or (H, W, C) array -> ``size`` with torchvision's kernel (bilinear with
    antialiasing, or nearest)."""
    chw = torch.from_numpy(np.ascontiguousarray(array))
    chw = chw[None] if chw.ndim == 2 else chw.permute(2, 0, 1)
    out = tvF.resize(chw, list(size), interpolation=interpolation, antialias=True)
    return (out[0] if array.ndim == 2 else out.permute(1, 2, 0)).numpy()


def _factor(spread: float, centre: float = 1.0) -> float:
    return torch.empty(1).uniform_(centre - spread, centre + spread).item()


@TRANSFORMS.register_module()
class EoMTColorJitter(BaseTransform):
    """EoMT's colour jitter of the 0-255 image, each step with probability 1/2: brightness
    times 1 +- ``brightness_delta`` / 255; then contrast and (saturation, hue) in a random
    order: contrast blended with the image's mean grey by 1 +- ``contrast``, saturation
    blended with its grey image by 1 +- ``saturation``, hue turned by +- ``hue_delta``
    degrees. Goes before the geometry, as in EoMT (contrast reads the whole image's mean).

    Draws from torch's generator in EoMT's order, so a seeded draw is EoMT's draw. The
    image is mmcv's BGR array; the adjustments see it as RGB.
    """

    def __init__(self, brightness_delta: float = 32, contrast: float = 0.5, saturation: float = 0.5,
                 hue_delta: float = 18):
        for name, value, top in (('brightness_delta', brightness_delta, 255), ('contrast', contrast, 1),
                                 ('saturation', saturation, 1), ('hue_delta', hue_delta, 180)):
            if not 0 <= value <= top:
                raise ValueError(f'EoMTColorJitter: {name} must be within [0, {top}], got {value!r}')
        self.brightness = brightness_delta / 255
        self.contrast, self.saturation, self.hue = contrast, saturation, hue_delta / 360
        self.args = (brightness_delta, contrast, saturation, hue_delta)

    def _contrast(self, rgb: torch.Tensor) -> torch.Tensor:
        return tvF.adjust_contrast(rgb, _factor(self.contrast)) if torch.rand(()) < 0.5 else rgb

    def _saturation_and_hue(self, rgb: torch.Tensor) -> torch.Tensor:
        if torch.rand(()) < 0.5:
            rgb = tvF.adjust_saturation(rgb, _factor(self.saturation))
        if torch.rand(()) < 0.5:
            rgb = tvF.adjust_hue(rgb, _factor(self.hue, centre=0.0))
        return rgb

    def transform(self, results: dict) -> dict:
        rgb = torch.from_numpy(np.ascontiguousarray(results['img'][..., ::-1])).permute(2, 0, 1)
        if torch.rand(()) < 0.5:
            rgb = tvF.adjust_brightness(rgb, _factor(self.brightness))
        if torch.rand(()) < 0.5:
            rgb = self._saturation_and_hue(self._contrast(rgb))
        else:
            rgb = self._contrast(self._saturation_and_hue(rgb))
        results['img'] = np.ascontiguousarray(rgb.permute(1, 2, 0).numpy()[..., ::-1])
        return results

    def __repr__(self) -> str:
        b, c, s, h = self.args
        return f'{self.__class__.__name__}(brightness_delta={b}, contrast={c}, saturation={s}, hue_delta={h})'


def _pad_crop(array: np.ndarray, top: int, left: int, crop: Tuple[int, int], pad_val) -> np.ndarray:
    """The ``crop`` window at (top, left) of ``array`` padded at the bottom and right."""
    ch, cw = crop
    out = np.full((ch, cw) + array.shape[2:], pad_val, dtype=array.dtype)
    window = array[top:top + ch, left:left + cw]
    out[:window.shape[0], :window.shape[1]] = window
    return out


@TRANSFORMS.register_module()
class ScaleJitterCrop(BaseTransform):
    """Resize so that the image fits ``crop_size`` times a scale drawn uniformly from
    ``scale_range`` (for a square crop: the long side becomes ``crop * s``), pad the
    bottom and right up to ``crop_size`` (image ``img_pad_val``, labels ``seg_pad_val``),
    and take a uniformly placed ``crop_size`` window. A window without a single labelled
    pixel (all ``ignore_index``) is drawn again from the original image, as EoMT does,
    while the image has labelled pixels at all, up to ``max_draws`` draws in all (then
    the last draw is kept: an unlabelled crop trains every query toward "no object").

    Replaces ``RandomResize`` + ``RandomCrop`` in a train pipeline; EoMT flips and jitters
    colours first (a redraw here keeps them; they are independent of the window, so the
    distribution is EoMT's). Records ``scale_jitter = dict(scale, size, crop, draws)`` in the
    results, for the curious and for tests.

    Args:
        crop_size: (h, w) of the output, EoMT's 512x512 for ADE20K.
        scale_range: (low, high) of the scale, EoMT's (0.5, 2.0).
        img_pad_val: the padded image value (EoMT pads the 0-255 image with 0).
        seg_pad_val, ignore_index: the padded label value, and the label that counts as
            "no target" when checking a crop (ADE20K with ``reduce_zero_label``: 255).
        max_draws: how many windows at most before an unlabelled one is kept.
    """

    def __init__(self, crop_size: Sequence[int] = (512, 512), scale_range: Sequence[float] = (0.5, 2.0),
                 img_pad_val: float = 0, seg_pad_val: int = 255, ignore_index: int = 255, max_draws: int = 100):
        crop_size = tuple(crop_size)
        if len(crop_size) != 2 or not all(isinstance(s, int) and s > 0 for s in crop_size):
            raise ValueError(f'ScaleJitterCrop: crop_size must be two positive ints (h, w), got {crop_size!r}')
        scale_range = tuple(scale_range)
        if len(scale_range) != 2 or not 0 < scale_range[0] <= scale_range[1]:
            raise ValueError(f'ScaleJitterCrop: scale_range must be (low, high) with 0 < low <= high, '
                             f'got {scale_range!r}')
        if max_draws < 1:
            raise ValueError(f'ScaleJitterCrop: max_draws must be at least 1, got {max_draws}')
        self.crop_size, self.scale_range = crop_size, scale_range
        self.img_pad_val, self.seg_pad_val, self.ignore_index = img_pad_val, seg_pad_val, ignore_index
        self.max_draws = max_draws

    def _draw(self, shape: Tuple[int, int]) -> Tuple[float, Tuple[int, int], Tuple[int, int]]:
        """A scale, the resized (h, w) and the window's (top, left)."""
        low, high = self.scale_range
        scale = low + np.random.random() * (high - low)
        size = jitter_size(*shape, self.crop_size, scale)
        # the padded image is at least the crop: a window fits anywhere in the rest
        top = np.random.randint(0, max(size[0], self.crop_size[0]) - self.crop_size[0] + 1)
        left = np.random.randint(0, max(size[1], self.crop_size[1]) - self.crop_size[1] + 1)
        return scale, size, (top, left)

    def transform(self, results: dict) -> dict:
        img = results['img']
        seg_keys = list(results.get('seg_fields', []))
        if 'gt_seg_map' in results and 'gt_seg_map' not in seg_keys:
            seg_keys.append('gt_seg_map')
        height, width = img.shape[:2]
        labels = results.get('gt_seg_map')
        labelled = labels is not None and bool((labels != self.ignore_index).any())
        for draws in range(1, self.max_draws + 1):
            scale, size, (top, left) = self._draw((height, width))
            segs = {key: _pad_crop(_resize(results[key], size, InterpolationMode.NEAREST), top, left,
                                   self.crop_size, self.seg_pad_val) for key in seg_keys}
            if not labelled or (segs['gt_seg_map'] != self.ignore_index).any():
                break
        results['img'] = _pad_crop(_resize(img, size, InterpolationMode.BILINEAR), top, left, self.crop_size,
                                   self.img_pad_val)
        results.update(segs)
        results['img_shape'] = self.crop_size
        results['scale_factor'] = (size[1] / width, size[0] / height)
        results['scale_jitter'] = dict(scale=scale, size=size, crop=(top, left), draws=draws)
        return results

    def __repr__(self) -> str:
        return (f'{self.__class__.__name__}(crop_size={self.crop_size}, scale_range={self.scale_range}, '
                f'img_pad_val={self.img_pad_val}, seg_pad_val={self.seg_pad_val}, '
                f'ignore_index={self.ignore_index}, max_draws={self.max_draws})')


@TRANSFORMS.register_module()
class DINOv3PhotoMetricDistortion(PhotoMetricDistortion):
    """The photometric distortion of Meta's linear probe (facebookresearch/dinov3
    dinov3/eval/segmentation/transforms.py ``PhotoMetricDistortion``, lines 21-100): mmseg's, whose
    brightness, contrast, order and draws (numpy's generator, each step with p 0.5) it shares, with
    saturation and hue as torchvision's kernels compute them there: saturation blended with the grey
    image by a factor in ``saturation_range``, hue turned by a fraction of the wheel in ``hue_range``.
    mmseg's scales HSV's S channel and shifts hue in whole steps of 2 degrees: on a photo 22-32 grey
    levels apart on average at factors 1.5 and 0.5, so not Meta's distortion. The image is mmcv's BGR
    array; the kernels see it as RGB."""

    def __init__(self, brightness_delta: int = 32, contrast_range: Sequence[float] = (0.5, 1.5),
                 saturation_range: Sequence[float] = (0.5, 1.5), hue_range: Sequence[float] = (-0.5, 0.5)):
        super().__init__(brightness_delta=brightness_delta, contrast_range=contrast_range,
                         saturation_range=saturation_range)
        if not -0.5 <= hue_range[0] <= hue_range[1] <= 0.5:
            raise ValueError(f'DINOv3PhotoMetricDistortion: hue_range must lie within [-0.5, 0.5] of the wheel, '
                             f'got {tuple(hue_range)}')
        self.hue_lower, self.hue_upper = hue_range

    @staticmethod
    def _in_rgb(img: np.ndarray, kernel) -> np.ndarray:
        rgb = torch.from_numpy(np.ascontiguousarray(img[..., ::-1].astype(np.uint8))).permute(2, 0, 1)
        return np.ascontiguousarray(kernel(rgb).permute(1, 2, 0).numpy()[..., ::-1])

    def saturation(self, img: np.ndarray) -> np.ndarray:
        if np.random.randint(2):
            factor = np.random.uniform(self.saturation_lower, self.saturation_upper)
            img = self._in_rgb(img, lambda rgb: tvF.adjust_saturation(rgb, factor))
        return img

    def hue(self, img: np.ndarray) -> np.ndarray:
        if np.random.randint(2):
            factor = np.random.uniform(self.hue_lower, self.hue_upper)
            img = self._in_rgb(img, lambda rgb: tvF.adjust_hue(rgb, factor))
        return img


__all__ = ['DINOv3PhotoMetricDistortion', 'EoMTColorJitter', 'ScaleJitterCrop', 'jitter_size']

