"""Class orders that models and datasets both need, below both: mmdet's
``ADE20KPanopticDataset`` order (its 100 thing classes, then the 50 stuff, each in ADE's
order) against ADE's own 150-class order, which EoMT's ADE20K panoptic models predict in
(the release converter permutes their class head by it; the ADE20K panoptic preparation
writes mmdet's category ids by it)."""
from typing import List, Tuple

from ..errors import ToolError


class ClassOrderError(ValueError, ToolError):
    """This mmseg or mmdet release names or orders a dataset's classes otherwise than the
    orders here were written for."""


# EoMT's ADE20K panoptic stuff classes in ADE's order (configs/dinov2/ade20k/panoptic/*.yaml, stuff_classes)
EOMT_STUFF = (0, 1, 2, 3, 4, 5, 6, 9, 11, 13, 16, 17, 21, 25, 26, 28, 29, 34, 40, 46, 48, 51, 52, 54, 59, 60, 61, 63,
              68, 77, 79, 84, 91, 94, 96, 99, 100, 101, 105, 106, 109, 113, 114, 117, 122, 128, 131, 140, 141, 145)
# mmseg's ADE20K names (ADE's order, objectInfo150's first synonym) where mmdet's panoptic list takes another
# synonym of the same objectInfo150 entry
_SYNONYMS = {'windowpane': 'window', 'bathtub': 'tub', 'railing': 'rail', 'streetlight': 'street lamp',
             'television receiver': 'tv', 'apparel': 'clothes', 'swimming pool': 'pool', 'waterfall': 'falls',
             'ashcan': 'trash can'}


def panoptic_classes() -> Tuple[Tuple[str, ...], int]:
    """mmdet's ``ADE20KPanopticDataset`` classes and how many of them are things (they come first)."""
    from mmdet.datasets import ADE20KPanopticDataset
    meta = ADE20KPanopticDataset.METAINFO
    return tuple(meta['classes']), len(meta['thing_classes'])


def ade_to_panoptic() -> List[int]:
    """For each of ADE's 150 classes in ADE's order, its index in mmdet's panoptic order,
    matched by name (mmseg's ADE20K names, through the synonyms above) and checked: one to
    one, the stuff classes are EoMT's, and each group keeps ADE's order."""
    from mmseg.datasets import ADE20KDataset
    ade = [name.strip() for name in ADE20KDataset.METAINFO['classes']]
    classes, things = panoptic_classes()
    first = {name.split(',')[0].strip(): i for i, name in enumerate(classes)}
    order = [first.get(_SYNONYMS.get(name, name)) for name in ade]
    unmatched = [ade[i] for i, j in enumerate(order) if j is None]
    if unmatched or sorted(order) != list(range(len(classes))):
        raise ClassOrderError(f'ADE20K\'s class names do not match mmdet\'s ADE20KPanopticDataset one to one '
                           f'(unmatched: {unmatched}): this mmseg or mmdet release renamed ADE20K classes')
    stuff = tuple(i for i, j in enumerate(order) if j >= things)
    if stuff != EOMT_STUFF:
        raise ClassOrderError(f'mmdet\'s ADE20K stuff classes are not EoMT\'s: ADE ids {sorted(set(stuff) ^ set(EOMT_STUFF))} '
                           f'differ')
    for group in (range(things), range(things, len(classes))):
        if [order.index(j) for j in group] != sorted(order.index(j) for j in group):
            raise ClassOrderError('mmdet\'s ADE20K panoptic classes are not in ADE\'s order within things and stuff')
    return order


__all__ = ['EOMT_STUFF', 'ClassOrderError', 'ade_to_panoptic', 'panoptic_classes']
