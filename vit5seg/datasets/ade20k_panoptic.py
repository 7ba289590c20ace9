"""ADE20K panoptic in mmdet's terms: the panoptic annotations mmdet reads
(``ade20k_panoptic_{train,val}.json`` and PNGs), made from ADEChallengeData2016's semantic
maps and ADE20K's instance annotations (``annotations_instance/``) as mmdet's
``tools/dataset_converters/ade20k2coco.py`` makes them, in mmdet's class order against ADE's
(:mod:`vit5seg.utils.class_orders`).

Written here rather than run from mmdet because its converter is a script outside mmdet's
package (not importable), draws segment colours at random, writes in place (a killed run
looks complete) and computes thing boxes from the wrong column.
"""
import json
import os
import shutil
from pathlib import Path
from typing import Dict, List, Tuple

import numpy as np

from ..utils.class_orders import ade_to_panoptic, panoptic_classes
from ..utils.image import mask_box, panoptic_rgb
from .checks import DatasetError

SPLITS = (('train', 'training'), ('val', 'validation'))


def panoptic_annotation(semantic: np.ndarray, instance: np.ndarray, order: List[int], things: int
                        ) -> Tuple[np.ndarray, List[dict]]:
    """One image: ADE's semantic map (0 = other, 1-150) and its instance PNG (R: the thing
    class 1-100, G: the instance, 0 = none) -> (panoptic ids (H, W)
    int32, segments_info). Stuff from the semantic map (one segment per class), things from
    the instance map, as mmdet's converter; a segment id is class x 1000 + its number."""
    ids = np.zeros(semantic.shape, np.int32)
    segments = []
    for value in np.unique(semantic):
        if value == 0 or order[value - 1] < things:
            continue
        mask = semantic == value
        segments.append((order[value - 1], mask))
    # the instance annotations' 100 classes are ADE's things in ADE's order (EoMT's INSTANCE_MAPPING
    # rises through them), which is mmdet's thing order: R - 1 is the mmdet class
    cats, inst = instance[..., 0], instance[..., 1]
    for value in np.unique(inst):
        if value == 0:
            continue
        mask = inst == value
        cat = np.unique(cats[mask])
        if len(cat) != 1 or not 1 <= cat[0] <= things:
            raise DatasetError(f'instance {value} has thing class ids {cat.tolist()} (one of 1-{things} expected)')
        segments.append((int(cat[0]) - 1, mask))
    infos = []
    for number, (category, mask) in enumerate(segments, 1):
        segment_id = (category + 1) * 1000 + number
        ids[mask] = segment_id   # things drawn after stuff, as mmdet's converter
        infos.append(dict(id=segment_id, category_id=category, iscrowd=0))
    kept = []
    for info in infos:   # the area each segment keeps after the ones drawn over it
        mask = ids == info['id']
        if mask.any():
            kept.append(dict(info, area=int(mask.sum()), bbox=mask_box(mask)))
    return ids, kept


def _image_annotation(root: Path, folder: str, image: Path, order: List[int], things: int, classes: int
                      ) -> Tuple[np.ndarray, List[dict]]:
    """:func:`panoptic_annotation` of one photo of ``root/images/folder``, its PNGs checked
    against it; a problem is one error naming the files."""
    from PIL import Image
    semantic_path = root / 'annotations' / folder / f'{image.stem}.png'
    instance_path = root / 'annotations_instance' / folder / f'{image.stem}.png'
    for path in (semantic_path, instance_path):
        if not path.is_file():
            raise DatasetError(f'{path} is missing: every image of {root / "images" / folder} needs its semantic '
                               'and instance PNG')
    semantic = np.array(Image.open(semantic_path))
    instance = np.array(Image.open(instance_path).convert('RGB'))
    with Image.open(image) as photo:
        size = photo.size[::-1]
    if not semantic.shape == instance.shape[:2] == size or semantic.max() > classes:
        raise DatasetError(f'{image.name}, {semantic_path} and {instance_path} do not fit each other or ADE20K '
                           f'(sizes {size}, {semantic.shape} and {instance.shape[:2]}, labels up to {semantic.max()})')
    try:
        return panoptic_annotation(semantic, instance, order, things)
    except DatasetError as e:
        raise DatasetError(f'{instance_path}: {e}') from None


def write_panoptic(root, progress: bool = True) -> Dict[str, int]:
    """``root/ade20k_panoptic_{train,val}.json`` and ``root/ade20k_panoptic_{train,val}/*.png``
    from ``root/annotations`` and ``root/annotations_instance``; each split is written into a
    hidden staging folder and moved into place whole. Returns the images per split."""
    from PIL import Image
    from tqdm import tqdm
    root = Path(root)
    order = ade_to_panoptic()
    classes, things = panoptic_classes()
    categories = [dict(id=i, name=name, isthing=int(i < things)) for i, name in enumerate(classes)]
    counts = {}
    for split, folder in SPLITS:
        out_json, out_pngs = root / f'ade20k_panoptic_{split}.json', root / f'ade20k_panoptic_{split}'
        if out_json.is_file() and out_pngs.is_dir():
            counts[split] = len(json.loads(out_json.read_text())['images'])
            continue
        images = sorted((root / 'images' / folder).glob('*.jpg'))
        missing = [d for d in (root / 'annotations' / folder, root / 'annotations_instance' / folder) if not d.is_dir()]
        if missing:
            raise DatasetError(f'ADE20K panoptic needs {" and ".join(map(str, missing))}: ADE20K\'s instance '
                               'annotations (annotations_instance) go beside images/ and annotations/ '
                               '(tools/prepare_ade20k.py --panoptic INSTANCES)')
        staging = root / f'.ade20k_panoptic_{split}.partial'
        shutil.rmtree(staging, ignore_errors=True)   # left by a run that was killed
        (staging / out_pngs.name).mkdir(parents=True)
        entries, annotations = [], []
        try:
            for image in tqdm(images, desc=f'ADE20K panoptic {split}', unit='image', disable=not progress,
                              dynamic_ncols=True, mininterval=1):
                ids, segments = _image_annotation(root, folder, image, order, things, len(classes))
                Image.fromarray(panoptic_rgb(ids)).save(staging / out_pngs.name / f'{image.stem}.png')
                entries.append(dict(id=image.stem, file_name=image.name, height=ids.shape[0], width=ids.shape[1]))
                annotations.append(dict(image_id=image.stem, file_name=f'{image.stem}.png', segments_info=segments))
        except DatasetError:
            shutil.rmtree(staging)   # nothing half-written stays
            raise
        (staging / out_json.name).write_text(json.dumps(dict(images=entries, annotations=annotations,
                                                             categories=categories)))
        shutil.rmtree(out_pngs, ignore_errors=True)
        os.replace(staging / out_pngs.name, out_pngs)
        os.replace(staging / out_json.name, out_json)   # the json last: it marks the split done
        shutil.rmtree(staging)
        counts[split] = len(entries)
    return counts
