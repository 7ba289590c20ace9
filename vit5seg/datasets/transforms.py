"""Per-sample checks: every problem with one sample becomes one error naming its files,
or, in training with ``skip_corrupt=True``, a skipped and counted sample.

mmcv's loaders leave these to fail later, far from the cause: a truncated JPEG decodes
to a half-grey image without complaint, an undecodable one ends in an AssertionError,
a label with class ids out of range only shows up as a CUDA assert (or a silently
wrong loss on CPU) inside the loss, and an image/label size mismatch fails in a crop.
"""
import multiprocessing
import os
import os.path as osp
from concurrent.futures import ThreadPoolExecutor
from typing import List, Optional

import numpy as np
from mmcv.transforms import BaseTransform, Compose
from mmengine.logging import print_log
from mmseg.registry import TRANSFORMS

from ..errors import ToolError


class SampleError(ValueError, ToolError):
    """One dataset sample that cannot be used, with the files it comes from."""


# A complete JPEG ends with the EOI marker, a complete PNG with its IEND chunk (a few
# bytes of padding after them are tolerated). The format comes from the file's first
# bytes, not its name: PNGs saved as .jpg are common.
_TAIL_BYTES = 64
_FORMATS = ((b'\xff\xd8', b'\xff\xd9', 'JPEG EOI'), (b'\x89PNG', b'IEND', 'PNG IEND'))


def truncation_problem(path: str) -> Optional[str]:
    if not osp.isfile(path):
        return None  # remote storage: left to the decoder
    size = osp.getsize(path)
    if size == 0:
        return 'is empty (0 bytes)'
    with open(path, 'rb') as f:
        head = f.read(8)
        f.seek(max(0, size - _TAIL_BYTES))
        tail = f.read()
    for magic, end, name in _FORMATS:
        if head.startswith(magic) and end not in tail:
            return f'is truncated ({size} bytes, no {name} marker at the end)'
    return None


def panoptic_png_problem(path: str) -> Optional[str]:
    """What is wrong with a panoptic PNG (COCO's RGB-encoded segment ids), or None: missing,
    truncated, or not decodable."""
    import cv2
    if not osp.isfile(path):
        return 'does not exist'
    problem = truncation_problem(path)
    if problem:
        return problem
    if cv2.imread(path, cv2.IMREAD_COLOR) is None:
        return 'cannot be decoded as an image'
    return None


def panoptic_png_problems(paths: List[str]) -> List[Optional[str]]:
    """:func:`panoptic_png_problem` of each path, decoded in threads (cv2 decodes without the GIL:
    COCO's 118k PNGs in minutes)."""
    with ThreadPoolExecutor(max_workers=min(16, os.cpu_count() or 1)) as pool:
        return list(pool.map(panoptic_png_problem, paths))


def _wrap_panoptic_loading(load):
    def load_checked(self, results: dict) -> None:
        path = results.get('seg_map_path')
        if path is not None and '://' not in str(path):
            problem = truncation_problem(path) if osp.exists(path) else 'does not exist'
            if problem:
                raise SampleError(f'panoptic label {path} {problem} (image {results.get("img_path")})')
        try:
            return load(self, results)
        except Exception as e:  # mmcv decodes a broken PNG to None; cv2 or numpy fails further on
            raise SampleError(f'panoptic label {path} cannot be decoded (image {results.get("img_path")}): '
                              f'{type(e).__name__}: {str(e).strip().splitlines()[-1][:200]}') from None
    load_checked.__wrapped__ = load
    return load_checked


def check_panoptic_loading() -> None:
    """mmdet's ``LoadPanopticAnnotations`` with one error naming a missing, truncated or
    undecodable PNG (mmdet's own: ``cv2.error ... !_src.empty()`` without the file)."""
    from mmdet.datasets.transforms import LoadPanopticAnnotations
    load = LoadPanopticAnnotations._load_masks_and_semantic_segs
    if not hasattr(load, '__wrapped__'):
        LoadPanopticAnnotations._load_masks_and_semantic_segs = _wrap_panoptic_loading(load)


def _check_files(results: dict) -> None:
    for key, what in (('img_path', 'image'), ('seg_map_path', 'label')):
        path = results.get(key)
        if path is None or '://' in str(path):
            continue
        if not osp.exists(path):
            raise SampleError(f'{what} {path} does not exist')
        problem = truncation_problem(path)
        if problem:
            raise SampleError(f'{what} {path} {problem}')


@TRANSFORMS.register_module()
class CheckSegSample(BaseTransform):
    """Check a loaded sample; goes right after ``LoadAnnotations`` (val/test pipelines).

    Checked: the files are whole; the image has 3 channels; the label map is
    single-channel, the image's size, and holds only class ids ``0..num_classes-1`` or
    ``ignore_index`` (after ``reduce_zero_label``, whose effect the message spells out).
    Without a label (inference) only the image is checked. Keeps the pipeline flat, so
    mmseg's ``inference_model`` can still swap ``test_pipeline[0]`` and drop
    ``LoadAnnotations``; training pipelines use :class:`CheckedLoading`, which can also
    catch decoding errors.
    """

    def __init__(self, num_classes: int, ignore_index: int = 255):
        if not isinstance(num_classes, int) or isinstance(num_classes, bool) or num_classes < 1:
            raise ValueError(f'num_classes must be a positive int, got {num_classes!r}')
        self.num_classes = num_classes
        self.ignore_index = ignore_index

    def transform(self, results: dict) -> dict:
        _check_files(results)
        return self.check_loaded(results)

    def check_loaded(self, results: dict) -> dict:
        img_path = results.get('img_path', '<array input>')
        img = results['img']
        channels = 1 if img.ndim == 2 else img.shape[2]
        if channels != 3:
            raise SampleError(f'image {img_path} has {channels} channel(s) after loading, the model takes 3: '
                              "load with LoadImageFromFile color_type='color' (the default), which converts "
                              'grayscale and RGBA to 3 channels')
        seg = results.get('gt_seg_map')
        if seg is not None:
            # test pipelines resize the image before loading the label at full size
            size = tuple(results.get('ori_shape') or img.shape[:2])
            self._check_label(seg, size, img_path, results.get('seg_map_path'),
                              bool(results.get('reduce_zero_label', False)))
        return results

    def _check_label(self, seg: np.ndarray, size: tuple, img_path, seg_path, reduce_zero_label: bool) -> None:
        if seg.ndim != 2:
            raise SampleError(f'label {seg_path} has shape {seg.shape}: expected a single-channel map of class '
                              'ids (a color-coded palette image must be converted to ids first)')
        if seg.shape != size:
            raise SampleError(f'label {seg_path} is {seg.shape[1]}x{seg.shape[0]} but its image {img_path} is '
                              f'{size[1]}x{size[0]} (width x height)')
        values = np.unique(seg)
        bad = values[(values >= self.num_classes) & (values != self.ignore_index)]
        if bad.size:
            if reduce_zero_label:
                stored = [int(v) + 1 for v in bad[:5]]
                rule = (f'file values {stored} are out of range: with reduce_zero_label=True a label file holds '
                        f'0 (ignored) and 1..{self.num_classes} (classes 0..{self.num_classes - 1})')
            else:
                rule = (f'values {[int(v) for v in bad[:5]]} are out of range: with reduce_zero_label=False a label '
                        f'file holds 0..{self.num_classes - 1} and {self.ignore_index} (ignored); ADE20K-style '
                        'files (0 = other) need reduce_zero_label=True')
            raise SampleError(f'label {seg_path}: {rule}')

    def __repr__(self) -> str:
        return f'{self.__class__.__name__}(num_classes={self.num_classes}, ignore_index={self.ignore_index})'


@TRANSFORMS.register_module()
class CheckedLoading(BaseTransform):
    """The loading ``transforms`` (image, labels) followed by :class:`CheckSegSample`,
    with decoding errors caught too; the training pipelines' first step.

    Args:
        transforms: the loading transforms it wraps (``LoadImageFromFile``,
            ``LoadAnnotations``).
        num_classes, ignore_index: as for :class:`CheckSegSample`.
        skip_corrupt: a bad sample is logged, counted (``SkippedSampleHook`` logs the
            count) and replaced by another (mmengine's refetch in training datasets)
            instead of stopping the run. Only for training: val/test datasets stop on
            the first bad sample, their metrics would be over a different set otherwise.
    """

    def __init__(self, transforms: List[dict], num_classes: int, ignore_index: int = 255,
                 skip_corrupt: bool = False):
        self.loading = Compose(transforms)
        self.check = CheckSegSample(num_classes, ignore_index)
        self.skip_corrupt = skip_corrupt
        # Shared with forked/spawned dataloader workers, read by SkippedSampleHook.
        self.skipped = multiprocessing.Value('i', 0) if skip_corrupt else None

    def transform(self, results: dict) -> Optional[dict]:
        try:
            return self._load_and_check(results)
        except SampleError as e:
            if not self.skip_corrupt:
                raise
            with self.skipped.get_lock():
                self.skipped.value += 1
            print_log(f'skipping corrupt training sample: {e}', logger='current', level=30)
            return None  # mmengine's BaseDataset fetches another sample

    def _load_and_check(self, results: dict) -> dict:
        _check_files(results)  # before decoding: a truncated JPEG decodes without complaint
        img_path, seg_path = results.get('img_path'), results.get('seg_map_path')
        try:
            loaded = self.loading(results)
        except Exception as e:
            raise SampleError(f'cannot decode {img_path} / {seg_path}: {type(e).__name__}: {e}') from None
        if loaded is None:
            raise SampleError(f'the loading transforms returned nothing for {img_path}')
        return self.check.check_loaded(loaded)

    def __repr__(self) -> str:
        return f'{self.__class__.__name__}(loading={self.loading}, check={self.check}, skip_corrupt={self.skip_corrupt})'


def skipped_samples(dataset) -> int:
    """How many samples the ``CheckedLoading`` transforms of ``dataset`` skipped."""
    total = 0
    for ds in _datasets(dataset):
        for t in getattr(getattr(ds, 'pipeline', None), 'transforms', []):
            if isinstance(t, CheckedLoading) and t.skipped is not None:
                total += t.skipped.value
    return total


def _datasets(dataset):
    # ConcatDataset / RepeatDataset wrappers hold theirs in .datasets / .dataset
    if hasattr(dataset, 'datasets'):
        for ds in dataset.datasets:
            yield from _datasets(ds)
    elif hasattr(dataset, 'dataset') and not hasattr(dataset, 'pipeline'):
        yield from _datasets(dataset.dataset)
    else:
        yield dataset
