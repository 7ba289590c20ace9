"""Check a dataset split completely: images and labels pair up, and (optionally) every
label map holds only the class ids its config expects, at its image's size; a COCO-format
split (mmdet's panoptic and instance datasets): every image its annotation file names is
there, and every panoptic PNG decodes.

``check_split`` works from a dataset config (any mmseg folder dataset: plain folders,
subfolders like Cityscapes' cities, or split lists like Pascal Context's), so
``check_config`` covers every loader of a config and ``check_ade20k`` is the ADE20K
release's two splits. Unlike ``validation.check_dataset_config`` (the quick check at
training start, which stops at the first problem) it lists every problem.
"""
import os
import os.path as osp
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import List, Optional, Sequence

import cv2
import numpy as np

from .transforms import panoptic_png_problems
from .validation import DatasetError, _default, _listing, check_folders, dataset_leaves, read_split_list

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
