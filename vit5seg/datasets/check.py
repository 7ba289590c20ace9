"""Check that an ADE20K folder is complete: images and labels pair up in each split."""
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import List, Optional

import cv2

SPLITS = ('training', 'validation')
EXPECTED = {'training': 20210, 'validation': 2000}  # the official ADEChallengeData2016 counts
NUM_CLASSES = 150


@dataclass
class SplitReport:
    split: str
    images: int = 0
    labels: int = 0
    images_without_label: List[str] = field(default_factory=list)
    labels_without_image: List[str] = field(default_factory=list)
    bad_labels: List[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.images_without_label or self.labels_without_image or self.bad_labels) and self.images > 0


def check_ade20k(root, check_values: bool = False) -> List[SplitReport]:
    """``root`` is the ``ADEChallengeData2016`` folder (or the folder above it)."""
    root = Path(root)
    if not (root / 'images').is_dir() and (root / 'ADEChallengeData2016').is_dir():
        root = root / 'ADEChallengeData2016'
    if not (root / 'images').is_dir():
        raise FileNotFoundError(f'{root} is not an ADE20K folder: expected {root}/images/{{training,validation}} '
                                f'and {root}/annotations/{{training,validation}}')
    reports = []
    for split in SPLITS:
        rep = SplitReport(split)
        images = {p.stem: p for p in (root / 'images' / split).glob('*.jpg')}
        labels = {p.stem: p for p in (root / 'annotations' / split).glob('*.png')}
        rep.images, rep.labels = len(images), len(labels)
        rep.images_without_label = sorted(str(images[k]) for k in images.keys() - labels.keys())
        rep.labels_without_image = sorted(str(labels[k]) for k in labels.keys() - images.keys())
        if check_values:
            keys = sorted(images.keys() & labels.keys())
            # cv2 decodes without the GIL: threads make the 22k files of the release a minute's work
            with ThreadPoolExecutor(max_workers=min(16, os.cpu_count() or 1)) as pool:
                problems = pool.map(lambda k: _label_problem(labels[k], images[k]), keys)
                rep.bad_labels = [f'{labels[k]}: {p}' for k, p in zip(keys, problems) if p]
        reports.append(rep)
    return reports


def _label_problem(label_path: Path, image_path: Path) -> Optional[str]:
    label = cv2.imread(str(label_path), cv2.IMREAD_UNCHANGED)
    if label is None:
        return 'unreadable'
    if label.ndim != 2:
        return f'has {label.shape[2]} channels, expected a single-channel class-id map'
    high = int(label.max())
    if high > NUM_CLASSES:
        return f'value {high} > {NUM_CLASSES} (ADE20K ids are 0 = other, 1..150)'
    img = cv2.imread(str(image_path), cv2.IMREAD_UNCHANGED)
    if img is None:
        return f'its image {image_path} is unreadable'
    if img.shape[:2] != label.shape:
        return f'size {label.shape[1]}x{label.shape[0]} differs from its image {img.shape[1]}x{img.shape[0]}'
    return None


def format_report(reports: List[SplitReport], show: int = 5) -> str:
    lines = []
    for rep in reports:
        expected = EXPECTED[rep.split]
        note = '' if rep.images == expected else f' (the official release has {expected})'
        lines.append(f'{rep.split}: {rep.images} images, {rep.labels} labels{note}')
        for title, items in (('images without label', rep.images_without_label),
                             ('labels without image', rep.labels_without_image), ('bad labels', rep.bad_labels)):
            if items:
                lines.append(f'  {len(items)} {title}: ' + ', '.join(items[:show]) + (' ...' if len(items) > show else ''))
    lines.append('OK' if all(r.ok for r in reports) else 'PROBLEMS FOUND')
    return '\n'.join(lines)
