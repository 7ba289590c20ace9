"""Small learnable datasets in each benchmark's official layout (``make_synthetic_data``).

Each writer puts synthetic.py's pictures where mmseg's dataset class for that benchmark
finds them, in that benchmark's label encoding:

- ADE20K: ``ade/ADEChallengeData2016``, 0 = other (ignored), 1..150;
- Cityscapes: ``cityscapes/{leftImg8bit,gtFine}/{train,val}/<city>/``, the official
  ``*_gtFine_labelIds.png`` (ids 0..33) and the ``*_gtFine_labelTrainIds.png`` (0..18,
  255 ignored) that mmseg's converter derives from them and the configs read;
- Pascal Context 59: ``VOCdevkit/VOC2010`` with ``JPEGImages``, the converted
  ``SegmentationClassContext`` masks (0 = background, ignored; 1..59) and the
  ``ImageSets/SegmentationContext/{train,val}.txt`` lists;
- COCO-Stuff 164k: ``coco_stuff164k/{images,annotations}/{train2017,val2017}``, the
  stuffthingmaps ``*.png`` (ids 0..181, 255 unlabeled) and the converter's
  ``*_labelTrainIds.png`` (0..170, 255);
- custom: ``custom/{images,annotations}/{train,val}``, the folder
  ``tools/make_custom_config.py`` takes: ids 0..7 (``CUSTOM_CLASSES``), 255 ignored;
- COCO panoptic (mmdet): ``coco``, COCO 2017's panoptic and instance layouts
  (coco_synthetic.py).
"""
import shutil
from pathlib import Path
from typing import Callable, Dict

import numpy as np

from .coco_synthetic import make_synthetic_coco_panoptic
from .synthetic import OBJECT_IDS, STUFF_IDS, make_synthetic_ade20k, synthetic_sample, write_image
from .vipseg_synthetic import make_synthetic_vipseg
from .vspw_synthetic import make_synthetic_vspw
from .ytvis_synthetic import make_synthetic_ytvis

DATASETS = ('ade20k', 'cityscapes', 'pascal_context', 'coco_stuff', 'custom', 'coco_panoptic', 'ytvis', 'vspw',
            'vipseg')
# where each writer puts its data under ROOT: the configs' data_root relative to ROOT
DATA_ROOTS = {'ade20k': 'ade/ADEChallengeData2016', 'cityscapes': 'cityscapes',
              'pascal_context': 'VOCdevkit/VOC2010', 'coco_stuff': 'coco_stuff164k', 'custom': 'custom',
              'coco_panoptic': 'coco', 'ytvis': 'youtube_vis_2019',
              'vspw': 'VSPW_480p', 'vipseg': 'VIPSeg/VIPSeg_720P'}
# the custom folder's classes: four backgrounds, then one per shape of synthetic.SHAPES
CUSTOM_CLASSES = ('sky', 'grass', 'sand', 'water', 'ball', 'box', 'cone', 'disc')
MARKER = '.vit5seg-synthetic'  # lets a second run rewrite its own data, and nothing else

# Cityscapes labelId (0..33) -> trainId, the table of cityscapesscripts' labels.py (255: not evaluated)
CITYSCAPES_TRAIN_IDS = (255, 255, 255, 255, 255, 255, 255, 0, 1, 255, 255, 2, 3, 4, 255, 255, 255, 5, 255,
                        6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 255, 255, 16, 17, 18)
# COCO-Stuff stuffthingmaps ids (category id - 1) that no annotation uses: the 11 COCO thing
# ids missing from the 2017 release. The other 171, in order, are the train ids.
COCO_STUFF_UNUSED_IDS = (11, 25, 28, 29, 44, 65, 67, 68, 70, 82, 90)
COCO_STUFF_RAW_IDS = tuple(i for i in range(182) if i not in COCO_STUFF_UNUSED_IDS)


def _class_ids(dataset_type: str, names, offset: int = 0) -> tuple:
    from mmseg.registry import DATASETS as MMSEG_DATASETS
    classes = MMSEG_DATASETS.get(dataset_type).METAINFO['classes']
    return tuple(classes.index(n) + offset for n in names)


def _samples(count: int, size: int, rng, aspect: float, stuff, objects, frame_id: int):
    """``(i, (image, label))`` with synthetic.py's ADE20K pictures relabelled: its four stuff
    and four object classes become ``stuff`` and ``objects``, its frame ``frame_id``. The
    pictures keep ADE20K's colours and textures, which short trainings tell apart."""
    relabel = np.full(256, frame_id, np.uint8)
    relabel[list(STUFF_IDS)], relabel[list(OBJECT_IDS)] = stuff, objects
    for i in range(count):
        img, label = synthetic_sample(size, rng, aspect)
        yield i, (img, relabel[label])


def _cityscapes(root: Path, counts: dict, size: int, rng) -> None:
    train_ids = _class_ids('CityscapesDataset', ('road', 'building', 'vegetation', 'sky',
                                                 'person', 'car', 'traffic sign', 'bus'))
    label_ids = tuple(CITYSCAPES_TRAIN_IDS.index(t) for t in train_ids)
    to_train = np.array(CITYSCAPES_TRAIN_IDS + (255,) * (256 - len(CITYSCAPES_TRAIN_IDS)), np.uint8)
    cities = {'train': ('aachen', 'bochum'), 'val': ('frankfurt', 'lindau')}
    for split, count in counts.items():
        for i, (img, label_id) in _samples(count, size, rng, 2.0, label_ids[:4], label_ids[4:], 0):
            city = cities[split][i % 2]
            stem = f'{city}_{i // 2:06d}_000019'
            write_image(root / 'leftImg8bit' / split / city / f'{stem}_leftImg8bit.png', img)
            gt = root / 'gtFine' / split / city
            write_image(gt / f'{stem}_gtFine_labelIds.png', label_id)
            write_image(gt / f'{stem}_gtFine_labelTrainIds.png', to_train[label_id])


def _pascal_context(root: Path, counts: dict, size: int, rng) -> None:
    # converted masks: 0 = background, class k of PascalContextDataset59 stored as k + 1
    ids = _class_ids('PascalContextDataset59', ('sky', 'grass', 'wall', 'road', 'person', 'car', 'dog', 'chair'),
                     offset=1)
    lists = root / 'ImageSets' / 'SegmentationContext'
    lists.mkdir(parents=True, exist_ok=True)
    for split, year in (('train', 2008), ('val', 2010)):
        names = []
        for i, (img, label) in _samples(counts[split], size, rng, 4 / 3, ids[:4], ids[4:], 0):
            names.append(f'{year}_{i + 1:06d}')
            write_image(root / 'JPEGImages' / f'{names[-1]}.jpg', img)
            write_image(root / 'SegmentationClassContext' / f'{names[-1]}.png', label)
        (lists / f'{split}.txt').write_text(''.join(n + '\n' for n in names))


def _coco_stuff(root: Path, counts: dict, size: int, rng) -> None:
    train_ids = _class_ids('COCOStuffDataset', ('sky-other', 'grass', 'wall-concrete', 'road',
                                                'person', 'car', 'dog', 'chair'))
    to_raw = np.full(256, 255, np.uint8)
    to_raw[:len(COCO_STUFF_RAW_IDS)] = COCO_STUFF_RAW_IDS
    for split, offset in (('train', 0), ('val', 500000)):
        for i, (img, train_id) in _samples(counts[split], size, rng, 4 / 3, train_ids[:4], train_ids[4:], 255):
            stem = f'{offset + 9 + i:012d}'
            write_image(root / 'images' / f'{split}2017' / f'{stem}.jpg', img)
            write_image(root / 'annotations' / f'{split}2017' / f'{stem}.png', to_raw[train_id])
            write_image(root / 'annotations' / f'{split}2017' / f'{stem}_labelTrainIds.png', train_id)


def _custom(root: Path, counts: dict, size: int, rng) -> None:
    ids = tuple(range(len(CUSTOM_CLASSES)))
    for split, count in counts.items():
        for i, (img, label) in _samples(count, size, rng, 4 / 3, ids[:4], ids[4:], 255):
            write_image(root / 'images' / split / f'{split}_{i:04d}.jpg', img)
            write_image(root / 'annotations' / split / f'{split}_{i:04d}.png', label)


_WRITERS: Dict[str, Callable] = {'cityscapes': _cityscapes, 'pascal_context': _pascal_context,
                                 'coco_stuff': _coco_stuff, 'custom': _custom,
                                 'coco_panoptic': make_synthetic_coco_panoptic, 'ytvis': make_synthetic_ytvis,
                                 'vspw': make_synthetic_vspw, 'vipseg': make_synthetic_vipseg}


def make_synthetic_data(dataset: str, root, num_train: int = 64, num_val: int = 16, size: int = 128,
                        seed: int = 0) -> Path:
    """Write ``dataset``'s layout under ``root``; returns its data root (``DATA_ROOTS``).

    ``size`` is the image height (widths: ADE20K 1.25x, Cityscapes 2x, YouTube-VIS 16/9x, the others
    4/3x); for YouTube-VIS the counts are clips of 5 frames, for VSPW and VIPSeg of 10.
    A folder that exists, is not empty and was not written by this function is left
    alone (``FileExistsError``): real data is never mixed with synthetic samples. One
    this function wrote is replaced whole, so no sample of an earlier run is left.
    """
    if dataset not in DATASETS:
        raise ValueError(f'unknown dataset {dataset!r}: choose one of {", ".join(DATASETS)}')
    data_root = Path(root) / DATA_ROOTS[dataset]
    if data_root.is_dir() and any(data_root.iterdir()) and not (data_root / MARKER).exists():
        raise FileExistsError(f'{data_root} already holds files that this tool did not write (a real dataset?); '
                              'synthetic data goes into a new or empty folder: choose another ROOT')
    if (data_root / MARKER).exists():
        shutil.rmtree(data_root)
    data_root.mkdir(parents=True, exist_ok=True)
    (data_root / MARKER).write_text('synthetic data written by vit5seg (tools/make_synthetic_data.py)\n')
    if dataset == 'ade20k':
        make_synthetic_ade20k(data_root.parent, num_train, num_val, size, seed)
    else:
        _WRITERS[dataset](data_root, {'train': num_train, 'val': num_val}, size, np.random.default_rng(seed))
    return data_root
