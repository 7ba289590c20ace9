"""Check a config's dataset folders before the Runner is built.

mmseg lists the image folder and derives each label path without looking, so a wrong
``data_root`` builds an empty dataset (the error comes from the sampler, about length
0), and an image without a label fails mid-epoch. These checks only list folders.
"""
import inspect
import os.path as osp
from typing import Iterator, List, NamedTuple, Optional, Tuple

from mmengine.fileio import list_dir_or_file

from ..errors import ToolError
from ..paths import repository_root


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
