"""A config's class names and palette, as its dataset states them: what mmseg's ``init_model``
and mmdet's ``init_detector`` read from a checkpoint's ``meta['dataset_meta']``.

mmseg and mmdet fall back to another dataset's names where a checkpoint has none (mmdet: COCO's
80), so a converted release carries its config's. Read from the dataset class the config's test
loader names, in the config's registry scope, with the config's own ``metainfo`` over it: the
classes in the model's order (mmdet's panoptic datasets: things, then stuff).
"""
import copy
import importlib
from typing import Optional

# what a visualizer and an inferencer read; mmdet's init_detector lower-cases every key
META_KEYS = ('classes', 'thing_classes', 'stuff_classes', 'palette')


def _plain(value):
    """Tuples of tuples as lists of lists: a checkpoint's meta loads with ``weights_only``."""
    return [_plain(v) for v in value] if isinstance(value, (list, tuple)) else value


def config_dataset_meta(cfg) -> Optional[dict]:
    """``{'classes': [...], 'palette': [...], ...}`` of the dataset ``cfg``'s test (else val)
    loader builds; None where the config names no dataset this environment registers."""
    loader = cfg.get('test_dataloader') or cfg.get('val_dataloader') or {}
    dataset = loader.get('dataset') or {}
    while 'dataset' in dataset and 'type' in dataset.get('dataset', {}):  # wrappers (RepeatDataset, ...)
        dataset = dataset['dataset']
    scope = cfg.get('default_scope') or 'mmseg'
    cls = importlib.import_module(f'{scope}.registry').DATASETS.get(dataset.get('type', ''))
    if cls is None:
        return None
    meta = copy.deepcopy(dict(getattr(cls, 'METAINFO', {})))
    if 'dataset_version' in dataset and hasattr(cls, 'set_dataset_classes'):
        # mmdet's YouTube-VIS: the year's classes, which its constructor sets on the class; put back after
        before = cls.__dict__.get('METAINFO')
        cls.set_dataset_classes(dataset['dataset_version'])
        meta = copy.deepcopy(dict(cls.METAINFO))
        if before is None:
            del cls.METAINFO
        else:
            cls.METAINFO = before
    meta.update(dict(dataset.get('metainfo') or {}))
    return {key: _plain(meta[key]) for key in META_KEYS if key in meta} or None


__all__ = ['META_KEYS', 'config_dataset_meta']
