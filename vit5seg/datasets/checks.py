"""Every dataset check, from the quickest to the most thorough; each problem is one error that
says what and where.

- The config's folders, before the Runner is built (:func:`check_data`,
  :func:`check_dataset_config`). mmseg lists the image folder and derives each label path
  without looking, so a wrong ``data_root`` builds an empty dataset (the error comes from the
  sampler, about length 0), and an image without a label fails mid-epoch. These only list
  folders, and stop at the first problem.
- Each sample as it loads (:class:`CheckedLoading`, :class:`CheckSegSample`): every problem
  with one sample becomes one error naming its files, or, in training with
  ``skip_corrupt=True``, a skipped and counted sample. mmcv's loaders leave these to fail
  later, far from the cause: a truncated JPEG decodes to a half-grey image without complaint,
  an undecodable one ends in an AssertionError, a label with class ids out of range only shows
  up as a CUDA assert (or a silently wrong loss on CPU) inside the loss, and an image/label
  size mismatch fails in a crop. Panoptic PNGs likewise (:func:`panoptic_png_problems`,
  through mmdet's own loader: :func:`check_panoptic_loading`).
- A whole split (:func:`check_split`, :func:`check_config`, :func:`check_ade20k`;
  ``tools/check_data.py``): images and labels pair up, and (optionally) every label map holds
  only the class ids its config expects, at its image's size; a COCO-format split (mmdet's
  panoptic and instance datasets): every image its annotation file names is there, and every
  panoptic PNG decodes. It works from a dataset config (any mmseg folder dataset: plain
  folders, subfolders like Cityscapes' cities, or split lists like Pascal Context's) and lists
  every problem.
"""
import inspect
import multiprocessing
import os
import os.path as osp
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, List, NamedTuple, Optional, Sequence, Tuple

import cv2
import numpy as np
from mmcv.transforms import BaseTransform, Compose
from mmengine.fileio import list_dir_or_file
from mmengine.logging import print_log
from mmseg.registry import TRANSFORMS

from ..errors import ToolError
from ..paths import repository_root


# --- the config's folders, before the Runner is built ----------------------------------------

class DatasetError(ValueError, ToolError):
    """A dataset in the config whose folders are missing, empty or do not pair up."""


def _default(cls, name: str):
    for klass in cls.__mro__:
        param = inspect.signature(klass.__init__).parameters.get(name)
        if param is not None and param.default is not inspect.Parameter.empty:
            return param.default
    return None


def _listing(folder: str, suffix: str) -> dict:
    return {name[:-len(suffix)]: name
            for name in list_dir_or_file(folder, list_dir=False, suffix=suffix, recursive=True)}


def _show(names, limit: int = 3) -> str:
    names = sorted(names)
    return ', '.join(names[:limit]) + (f' and {len(names) - limit} more' if len(names) > limit else '')


class SplitFolders(NamedTuple):
    """Where a folder dataset's files are and how they are named (config or class default)."""
    cls: type
    img_dir: str
    seg_dir: str
    img_suffix: str
    seg_suffix: str


def dataset_leaves(dataset_cfg: dict, where: str) -> Iterator[Tuple[str, dict]]:
    """``(config path, dataset config)`` of each dataset inside the wrappers
    (``ConcatDataset``'s ``datasets``, ``RepeatDataset``'s ``dataset``)."""
    if 'datasets' in dataset_cfg:
        for i, d in enumerate(dataset_cfg['datasets']):
            yield from dataset_leaves(d, f'{where}.datasets[{i}]')
    elif 'dataset' in dataset_cfg:
        yield from dataset_leaves(dataset_cfg['dataset'], f'{where}.dataset')
    else:
        yield where, dataset_cfg


def check_folders(dataset_cfg: dict, where: str) -> Optional[SplitFolders]:
    """The :class:`SplitFolders` of a folder dataset whose folders exist
    (:class:`DatasetError` otherwise); ``None`` for what is not checked: datasets that are
    not mmseg folder datasets, remote roots."""
    from mmseg.datasets import BaseSegDataset
    from mmseg.registry import DATASETS

    cls = DATASETS.get(dataset_cfg.get('type'))
    if cls is None or not (inspect.isclass(cls) and issubclass(cls, BaseSegDataset)):
        return None
    data_root = dataset_cfg.get('data_root') or ''
    if '://' in data_root:
        return None
    if data_root and not osp.isdir(data_root):
        origin = ''
        if not osp.isabs(data_root):
            repo = repository_root()
            origin = f' (relative paths are from the working directory, {osp.abspath(".")}' + (
                f"; the repository's configs name theirs from the repository root, {repo})" if repo else ')')
        raise DatasetError(f'{where}.data_root: {data_root!r} does not exist{origin}; set data_root in the config '
                           f'or with --cfg-options {where}.data_root=PATH')
    prefix = dataset_cfg.get('data_prefix') or {}
    img_dir = osp.join(data_root, prefix.get('img_path', ''))
    seg_dir = osp.join(data_root, prefix.get('seg_map_path', ''))
    for folder, key in ((img_dir, 'img_path'), (seg_dir, 'seg_map_path')):
        if not osp.isdir(folder):
            raise DatasetError(f'{where}: folder {folder} does not exist ({where}.data_prefix.{key} = '
                               f'{prefix.get(key)!r} under data_root {data_root!r})')
    return SplitFolders(cls, img_dir, seg_dir, dataset_cfg.get('img_suffix', _default(cls, 'img_suffix')),
                        dataset_cfg.get('seg_map_suffix', _default(cls, 'seg_map_suffix')))


def read_split_list(dataset_cfg: dict, where: str) -> List[str]:
    """The names in a dataset's ``ann_file`` (relative to ``data_root``, as mmseg joins it);
    mmseg itself only asserts that the file exists."""
    ann_file = dataset_cfg['ann_file']
    data_root = dataset_cfg.get('data_root') or ''
    path = ann_file if osp.isabs(ann_file) or not data_root else osp.join(data_root, ann_file)
    if not osp.isfile(path):
        raise DatasetError(f'{where}.ann_file: split list {path} does not exist ({ann_file!r} under data_root '
                           f'{data_root!r})')
    with open(path) as f:
        names = [line.strip() for line in f if line.strip()]
    if not names:
        raise DatasetError(f'{where}.ann_file: split list {path} is empty')
    return names


def check_dataset_config(dataset_cfg: dict, where: str) -> Optional[int]:
    """Raise :class:`DatasetError` for a missing/empty/unpaired split; return its size.

    ``where`` is the config path of ``dataset_cfg`` (``train_dataloader.dataset``), used
    in the messages. Wrappers (``ConcatDataset``, ``RepeatDataset``) are followed;
    datasets that are not mmseg folder datasets, and remote roots, are not checked.
    """
    sizes = [_check_split_folders(d, w) for w, d in dataset_leaves(dataset_cfg, where)]
    return sizes[0] if len(sizes) == 1 else sum(s or 0 for s in sizes)


def _check_split_folders(dataset_cfg: dict, where: str) -> Optional[int]:
    folders = check_folders(dataset_cfg, where)
    if folders is None:
        return None
    _, img_dir, seg_dir, img_suffix, seg_suffix = folders
    if dataset_cfg.get('ann_file'):  # names come from a split list (Pascal Context)
        return len(read_split_list(dataset_cfg, where))
    images, labels = _listing(img_dir, img_suffix), _listing(seg_dir, seg_suffix)
    if not images:
        raise DatasetError(f'{where}: no *{img_suffix} images in {img_dir}: the split is empty')
    unlabeled = images.keys() - labels.keys()
    if unlabeled:
        raise DatasetError(f'{where}: {len(unlabeled)} of {len(images)} images in {img_dir} have no '
                           f'{seg_suffix} label in {seg_dir}: {_show(images[k] for k in unlabeled)}')
    orphans = labels.keys() - images.keys()
    if orphans:
        raise DatasetError(f'{where}: {len(orphans)} labels in {seg_dir} have no {img_suffix} image in '
                           f'{img_dir} (a mixed-up split?): {_show(labels[k] for k in orphans)}')
    return len(images)


def check_data(cfg, phases) -> None:
    """Check the dataset of each ``<phase>_dataloader`` in ``cfg`` (phases: train/val/test)."""
    for phase in phases:
        loader = cfg.get(f'{phase}_dataloader')
        if loader:
            check_dataset_config(loader['dataset'], f'{phase}_dataloader.dataset')


# --- each sample as it loads ------------------------------------------------------------------

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


# --- a whole split ------------------------------------------------------------------------------

ADE20K_SPLITS = {'training': 20210, 'validation': 2000}  # the official ADEChallengeData2016 counts
IGNORE_INDEX = 255
# mmdet's datasets that read a COCO-format annotation file (and, panoptic, a PNG per image)
COCO_FORMAT = ('CocoDataset', 'CocoPanopticDataset', 'EoMTCocoPanopticDataset', 'ADE20KPanopticDataset')


@dataclass
class SplitReport:
    split: str
    images: int = 0
    labels: int = 0
    images_without_label: List[str] = field(default_factory=list)
    labels_without_image: List[str] = field(default_factory=list)
    listed_but_missing: List[str] = field(default_factory=list)  # split-list names without an image
    bad_labels: List[str] = field(default_factory=list)
    error: str = ''                     # the split cannot be read at all (missing folder, list file)
    expected: Optional[int] = None      # a release's known count, shown when it differs
    folder: str = ''
    classes_never_seen: List[str] = field(default_factory=list)  # only when label values were read

    @property
    def ok(self) -> bool:
        return not (self.error or self.images_without_label or self.labels_without_image
                    or self.listed_but_missing or self.bad_labels) and self.images > 0


@dataclass(frozen=True)
class LabelRule:
    """What a split's label files may hold: class ids ``0..K-1`` and ``ignore_index``, read
    after ``reduce_zero_label`` (file 0 -> ignored, file k -> class k - 1, file 255 stays
    ignored), as mmseg's ``LoadAnnotations`` reads them.

    ``classes`` are the classes the files are written in; ``kept`` the config's own when it
    names a subset of its dataset's classes (mmseg's ``label_map`` then maps the rest to
    ignored, so every id of the full set is valid in the files)."""
    dataset: str
    classes: tuple
    reduce_zero_label: bool
    ignore_index: int = IGNORE_INDEX
    kept: Optional[tuple] = None

    def problem(self, values: np.ndarray) -> Optional[str]:
        """``values``: the sorted distinct values of one label file."""
        k = len(self.classes)
        if self.reduce_zero_label:
            bad, limit = values[(values > k) & (values != IGNORE_INDEX)], k
            rule = f'{self.dataset} label files hold 0 = ignored, 1..{k}'
        else:
            bad, limit = values[(values >= k) & (values != self.ignore_index)], k - 1
            rule = f'{self.dataset} label files hold 0..{k - 1}, {self.ignore_index} = ignored'
        if not bad.size:
            return None
        shown = ', '.join(str(int(v)) for v in bad[:5]) + (' ...' if bad.size > 5 else '')
        return f'{"values" if bad.size > 1 else "value"} {shown} > {limit} ({rule})'

    def class_ids(self, values: np.ndarray) -> np.ndarray:
        """The ids (in ``classes``) of the classes present, given a file's distinct values."""
        ids = values.astype(np.int64) - (1 if self.reduce_zero_label else 0)
        return ids[(ids >= 0) & (ids < len(self.classes))]

    def never_seen(self, seen: np.ndarray) -> List[str]:
        """The trained classes that no file holds; ``seen``: a flag per id of ``classes``."""
        kept = set(self.kept or self.classes)
        return [c for c, s in zip(self.classes, seen) if not s and c in kept]


def label_rule(dataset_cfg: dict, cls: type, where: str) -> LabelRule:
    classes = (dataset_cfg.get('metainfo') or {}).get('classes')
    try:
        subset = cls.get_label_map(classes) is not None  # mmseg's own rule for when it remaps
    except ValueError as e:  # classes that are not the dataset's: mmseg fails the same way
        raise DatasetError(f'{where}.metainfo.classes: {e}') from None
    file_classes = cls.METAINFO.get('classes') if subset or not classes else classes
    if not file_classes:
        raise DatasetError(f'{where}: {cls.__name__} has no classes of its own: '
                           'set metainfo=dict(classes=(...)) in the dataset config')
    reduce = dataset_cfg.get('reduce_zero_label', _default(cls, 'reduce_zero_label'))
    ignore = dataset_cfg.get('ignore_index', _default(cls, 'ignore_index'))
    return LabelRule(cls.__name__, tuple(file_classes), bool(reduce), IGNORE_INDEX if ignore is None else ignore,
                     tuple(classes) if subset else None)


def _pairs(dataset_cfg: dict, name: str, rep: SplitReport):
    """The split's dataset class, ``{key: image path}`` and ``{key: label path}``, filling
    the unpaired lists."""
    folders = check_folders(dataset_cfg, name)
    if folders is None:
        raise DatasetError(f'{name}: {dataset_cfg.get("type")!r} with data_root {dataset_cfg.get("data_root")!r} '
                           'is not a local mmseg folder dataset; nothing to check')
    cls, img_dir, seg_dir, img_suffix, seg_suffix = folders
    rep.folder = img_dir
    if dataset_cfg.get('ann_file'):  # a split list: each name listed needs both files
        names = read_split_list(dataset_cfg, name)
        images = {n: osp.join(img_dir, n + img_suffix) for n in names}
        rep.listed_but_missing = sorted(p for p in images.values() if not osp.isfile(p))
        images = {n: p for n, p in images.items() if osp.isfile(p)}
        labels = {n: osp.join(seg_dir, n + seg_suffix) for n in names}
        labels = {n: p for n, p in labels.items() if osp.isfile(p)}
    else:
        images = {k: osp.join(img_dir, v) for k, v in _listing(img_dir, img_suffix).items()}
        labels = {k: osp.join(seg_dir, v) for k, v in _listing(seg_dir, seg_suffix).items()}
        rep.labels_without_image = sorted(labels[k] for k in labels.keys() - images.keys())
    rep.images_without_label = sorted(images[k] for k in images.keys() - labels.keys())
    rep.images, rep.labels = len(images), len(labels)
    return cls, images, labels


def check_coco_split(dataset_cfg: dict, name: str) -> SplitReport:
    """A COCO-format split (mmdet's ``CocoDataset``, ``CocoPanopticDataset``,
    ``ADE20KPanopticDataset``): the annotation file reads, every image it names is there, and
    every panoptic PNG is there, whole and decodable (each one decoded)."""
    import json
    rep = SplitReport(name)
    root = dataset_cfg.get('data_root') or ''
    ann_file = osp.join(root, dataset_cfg['ann_file'])
    prefix = dataset_cfg.get('data_prefix') or {}
    rep.folder = osp.join(root, prefix.get('img', ''))
    try:
        with open(ann_file) as f:
            ann = json.load(f)
        images = [osp.join(rep.folder, i['file_name']) for i in ann['images']]
    except (OSError, ValueError, KeyError, TypeError) as e:
        rep.error = f'{name}: the annotation file {ann_file} cannot be read ({type(e).__name__}: {e})'
        return rep
    rep.listed_but_missing = [p for p in images if not osp.isfile(p)]
    rep.images = len(images) - len(rep.listed_but_missing)
    if 'seg' in prefix:  # panoptic: one PNG per image
        pngs = [osp.join(root, prefix['seg'], a['file_name']) for a in ann.get('annotations', [])]
        problems = panoptic_png_problems(pngs)
        rep.bad_labels = [f'{p} {problem}' for p, problem in zip(pngs, problems) if problem]
        rep.labels = len(pngs) - len(rep.bad_labels)
    if not images:
        rep.error = f'{name}: {ann_file} names no images: the split is empty'
    return rep


def check_split(dataset_cfg: dict, name: str, check_values: bool = False,
                expected: Optional[int] = None) -> SplitReport:
    """The report of one dataset config (``train_dataloader.dataset``); never raises for
    what it finds: a split that cannot be read has ``error`` set."""
    if dataset_cfg.get('type') in COCO_FORMAT:
        return check_coco_split(dataset_cfg, name)
    rep = SplitReport(name, expected=expected)
    try:
        cls, images, labels = _pairs(dataset_cfg, name, rep)
        rule = label_rule(dataset_cfg, cls, name)
    except DatasetError as e:
        rep.error = str(e)
        return rep
    if rep.images == 0:
        rep.error = f'{name}: no images in {rep.folder}: the split is empty'
    if check_values:
        keys = sorted(images.keys() & labels.keys())
        # cv2 decodes without the GIL: threads make the 22k files of ADE20K a minute's work
        with ThreadPoolExecutor(max_workers=min(16, os.cpu_count() or 1)) as pool:
            results = list(pool.map(lambda k: _read_label(labels[k], images[k], rule), keys))
        rep.bad_labels = [f'{labels[k]}: {problem}' for k, (problem, _) in zip(keys, results) if problem]
        seen = np.zeros(len(rule.classes), bool)
        for _, present in results:
            seen[present] = True
        rep.classes_never_seen = rule.never_seen(seen) if keys else []
    return rep


def _read_label(label_path: str, image_path: str, rule: LabelRule):
    label = cv2.imread(label_path, cv2.IMREAD_UNCHANGED)
    if label is None:
        return 'unreadable', []
    if label.ndim != 2:
        return f'has {label.shape[2]} channels, expected a single-channel class-id map', []
    values = np.unique(label)
    problem = rule.problem(values)
    if problem:
        return problem, []
    img = cv2.imread(image_path, cv2.IMREAD_UNCHANGED)
    if img is None:
        return f'its image {image_path} is unreadable', []
    if img.shape[:2] != label.shape:
        return (f'size {label.shape[1]}x{label.shape[0]} differs from its image {img.shape[1]}x{img.shape[0]}',
                [])
    return None, rule.class_ids(values)


def check_config(cfg, phases: Sequence[str] = ('train', 'val', 'test'),
                 check_values: bool = False) -> List[SplitReport]:
    """One report per distinct dataset of the config's ``<phase>_dataloader``s (a test set
    that is the val set is checked once); wrappers (Concat/RepeatDataset) are followed."""
    reports, done = [], []
    for phase in phases:
        loader = cfg.get(f'{phase}_dataloader')
        if not loader:
            continue
        for where, dataset_cfg in dataset_leaves(loader['dataset'], f'{phase}_dataloader.dataset'):
            if dataset_cfg in done:
                continue
            done.append(dataset_cfg)
            reports.append(check_split(dataset_cfg, where, check_values))
    return reports


def check_ade20k(root, check_values: bool = False) -> List[SplitReport]:
    """``root`` is the ``ADEChallengeData2016`` folder (or the folder above it)."""
    root = Path(root)
    if not (root / 'images').is_dir() and (root / 'ADEChallengeData2016').is_dir():
        root = root / 'ADEChallengeData2016'
    if not (root / 'images').is_dir():
        raise FileNotFoundError(f'{root} is not an ADE20K folder: expected {root}/images/{{training,validation}} '
                                f'and {root}/annotations/{{training,validation}}')
    return [check_split(dict(type='ADE20KDataset', data_root=str(root),
                             data_prefix=dict(img_path=f'images/{split}', seg_map_path=f'annotations/{split}')),
                        split, check_values, expected) for split, expected in ADE20K_SPLITS.items()]


def format_report(reports: List[SplitReport], show: int = 5) -> str:
    lines = []
    for rep in reports:
        if rep.error:
            lines.append(rep.error)  # names its split already
            continue
        note = '' if rep.expected in (None, rep.images) else f' (the official release has {rep.expected})'
        lines.append(f'{rep.split}: {rep.images} images, {rep.labels} labels{note}')
        for title, items in (('images without label', rep.images_without_label),
                             ('labels without image', rep.labels_without_image),
                             ('listed but missing', rep.listed_but_missing), ('bad labels', rep.bad_labels),
                             ('classes never seen (not an error)', rep.classes_never_seen)):
            if items:
                more = ' ...' if len(items) > show else ''
                lines.append(f'  {len(items)} {title}: ' + ', '.join(items[:show]) + more)
    lines.append('OK' if all(r.ok for r in reports) else 'PROBLEMS FOUND')
    return '\n'.join(lines)
