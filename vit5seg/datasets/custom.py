"""From a folder of images and masks to a training config (``tools/make_custom_config.py``).

The folder::

    DIR/images/{train,val}/NAME.jpg|png
    DIR/annotations/{train,val}/NAME.png     # class ids 0..K-1, 255 = ignored

is checked completely first (``check_split``: pairs, values, sizes); then a short config
is written that inherits one of ours (model, recipe, official pretrained weights) and
states only the dataset: mmseg's ``BaseSegDataset`` with the class names, so test
tables name the user's classes.
"""
import os.path as osp
import pprint
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from ..paths import config_path, repository_root, tool_path
from .checks import DatasetError, check_split

SPLITS = ('train', 'val')
IMAGE_SUFFIXES = ('.jpg', '.jpeg', '.png')
# --arch -> the config whose backbone, weights and recipe a custom config inherits
ARCH_CONFIGS = {
    'vit5-small': 'vit5/vit5-small_upernet_ade20k.py', 'vit5-base': 'vit5_upernet_ade20k.py',
    'vit5-large': 'vit5/vit5-large_upernet_ade20k.py', 'deit3-small': 'deit3/deit3-small_upernet_ade20k.py',
    'deit3-base': 'deit3_upernet_ade20k.py', 'deit3-large': 'deit3/deit3-large_upernet_ade20k.py',
}


@dataclass
class CustomDataset:
    root: Path
    classes: Tuple[str, ...]
    img_suffixes: Dict[str, str] = field(default_factory=dict)  # per split
    counts: Dict[str, int] = field(default_factory=dict)
    never_seen: Dict[str, List[str]] = field(default_factory=dict)  # per split: classes with no pixel


def dataset_config(root, classes: Sequence[str], split: str, img_suffix: str) -> dict:
    """One split as the written config reads it."""
    return dict(type='BaseSegDataset', data_root=str(root), metainfo=dict(classes=tuple(classes)),
                img_suffix=img_suffix, seg_map_suffix='.png', reduce_zero_label=False,
                data_prefix=dict(img_path=f'images/{split}', seg_map_path=f'annotations/{split}'))


def _image_suffix(folder: Path) -> str:
    found = {}
    for p in sorted(folder.rglob('*')):
        if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES:
            found.setdefault(p.suffix, []).append(p.name)
    if not found:
        raise DatasetError(f'{folder}: no images ({", ".join(IMAGE_SUFFIXES)}): the split is empty')
    if len(found) > 1:
        mix = '; '.join(f'{len(v)} {s} ({", ".join(v[:2])}{" ..." if len(v) > 2 else ""})' for s, v in found.items())
        raise DatasetError(f'{folder} mixes image types: {mix}. mmseg reads one file type per split: convert '
                           'them to one (e.g. all .jpg)')
    return next(iter(found))


def check_custom_folder(root, classes: Sequence[str], show: int = 5) -> CustomDataset:
    """Every problem of the folder in one :class:`DatasetError`, naming the files."""
    root = Path(root)
    if len(classes) < 2 or len(set(classes)) != len(classes):
        raise DatasetError(f'--classes needs two or more distinct names, got {list(classes)}')
    if len(classes) > 255:
        raise DatasetError(f'{len(classes)} classes: 8-bit masks hold ids 0..254 (255 = ignored)')
    for sub in [f'{kind}/{split}' for kind in ('images', 'annotations') for split in SPLITS]:
        if not (root / sub).is_dir():
            raise DatasetError(f'{root / sub} does not exist: the folder needs images/{{train,val}}/*.jpg|png and '
                               'annotations/{train,val}/*.png (same names, class ids 0..K-1, 255 = ignored)')
    found = CustomDataset(root, tuple(classes))
    problems = []
    for split in SPLITS:
        try:
            suffix = _image_suffix(root / 'images' / split)
        except DatasetError as e:
            problems.append(str(e))
            continue
        rep = check_split(dataset_config(root, classes, split, suffix), split, check_values=True)
        found.img_suffixes[split], found.counts[split], found.never_seen[split] = suffix, rep.images, \
            rep.classes_never_seen
        if rep.error:
            problems.append(rep.error)
        for title, items in ((f'images in images/{split} without a mask', rep.images_without_label),
                             (f'masks in annotations/{split} without an image', rep.labels_without_image),
                             (f'bad masks in annotations/{split}', rep.bad_labels)):
            if items:
                shown = '\n    '.join(items[:show]) + (f'\n    ... and {len(items) - show} more' if len(items) > show
                                                      else '')
                problems.append(f'{len(items)} {title}:\n    {shown}')
    if problems:
        raise DatasetError(f'{root} is not ready for training ({len(classes)} classes: mask ids 0..'
                           f'{len(classes) - 1}, 255 = ignored):\n  ' + '\n  '.join(problems))
    return found


def default_palette(num_classes: int) -> List[List[int]]:
    from mmseg.datasets import ADE20KDataset
    colours = ADE20KDataset.METAINFO['palette']
    return [list(colours[i % len(colours)]) for i in range(num_classes)]


def _base_path(base: Path, out: Path) -> str:
    """The ``_base_`` entry: relative when config and base share a tree (a clone's
    configs/custom/), absolute otherwise (a config kept with the data)."""
    base, out, root = base.resolve(), out.resolve(), repository_root()
    if root is not None and out.is_relative_to(root) and base.is_relative_to(root):
        return osp.relpath(base, out.parent)
    return str(base)


def write_custom_config(found: CustomDataset, out, base: Optional[str] = None, arch: str = 'vit5-base',
                        crop: Tuple[int, int] = (512, 512), scale: Optional[Tuple[int, int]] = None,
                        iters: int = 40000, palette=None) -> Path:
    """Write the config; returns its path. ``base`` (a config path) replaces ``arch``."""
    from mmengine.config import Config
    out = Path(out)
    if base is None:
        if arch not in ARCH_CONFIGS:
            raise DatasetError(f'--arch {arch!r}: choose one of {", ".join(ARCH_CONFIGS)}')
        base_path = config_path(ARCH_CONFIGS[arch])
    else:
        base_path = Path(base).resolve()
    if not base_path.is_file():
        raise DatasetError(f'base config {base_path} does not exist')
    base_cfg = Config.fromfile(str(base_path))
    if iters < 10:
        raise DatasetError(f'--iters {iters}: train for at least 10 iterations')
    num_classes = len(found.classes)
    palette = default_palette(num_classes) if palette is None else [list(map(int, c)) for c in palette]
    if len(palette) != num_classes or any(len(c) != 3 or not all(0 <= v <= 255 for v in c) for c in palette):
        raise DatasetError(f'--palette needs one R,G,B colour (0..255) per class: {num_classes} classes, '
                           f'got {palette}')
    crop = tuple(int(v) for v in crop)
    scale = tuple(int(v) for v in scale) if scale else (4 * max(crop), min(crop))
    if min(crop) < 16 or min(scale) < 16:
        raise DatasetError(f'--crop {crop} / --scale {scale}: each side at least one 16-pixel patch')
    warmup = base_cfg.param_scheduler[0]
    warmup_iters = min(int(warmup['end']), max(1, iters // 10))
    interval = max(1, iters // 10)
    weights = (base_cfg.model.backbone.get('init_cfg') or {}).get('checkpoint')
    start = f'from {weights}' if weights else 'from scratch (the base config loads no weights)'
    has_aux = bool(base_cfg.model.get('auxiliary_head'))
    data_root = str(found.root.resolve())  # absolute: the tools run from any folder
    text = f'''# {num_classes} classes from {data_root}, written by tools/make_custom_config.py.
# Model and recipe: {base_path.name}; the backbone starts {start}.
# Below: only this dataset (images/{{train,val}}, masks with ids 0..{num_classes - 1}, 255 = ignored).
_base_ = ['{_base_path(base_path, out)}']
data_root = '{data_root}'
classes = {pprint.pformat(tuple(found.classes), width=100, compact=True)}
palette = {pprint.pformat(palette, width=100, compact=True)}
num_classes = {num_classes}
crop_size = {crop}
max_iters = {iters}
model = dict(
    data_preprocessor=dict(size=crop_size),
    decode_head=dict(num_classes=num_classes),{"""
    auxiliary_head=dict(num_classes=num_classes),""" if has_aux else ""}
)
train_pipeline = [
    dict(type='CheckedLoading', num_classes=num_classes, transforms=[
        dict(type='LoadImageFromFile'), dict(type='LoadAnnotations')]),
    # short side to about {scale[1]} px (long side at most {scale[0]}), x0.5-2.0
    dict(type='RandomResize', scale={scale}, ratio_range=(0.5, 2.0), keep_ratio=True),
    dict(type='RandomCrop', crop_size=crop_size, cat_max_ratio=0.75),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PhotoMetricDistortion'),
    dict(type='PackSegInputs'),
]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='Resize', scale={scale}, keep_ratio=True),
    dict(type='LoadAnnotations'),
    dict(type='CheckSegSample', num_classes=num_classes),
    dict(type='PackSegInputs'),
]
metainfo = dict(classes=classes, palette=palette)
train_dataloader = dict(dataset=dict(
    type='BaseSegDataset', data_root=data_root, metainfo=metainfo, reduce_zero_label=False,
    img_suffix='{found.img_suffixes['train']}', seg_map_suffix='.png', pipeline=train_pipeline,
    data_prefix=dict(img_path='images/train', seg_map_path='annotations/train')))
val_dataloader = dict(dataset=dict(
    type='BaseSegDataset', data_root=data_root, metainfo=metainfo, reduce_zero_label=False,
    img_suffix='{found.img_suffixes['val']}', seg_map_suffix='.png', pipeline=test_pipeline,
    data_prefix=dict(img_path='images/val', seg_map_path='annotations/val')))
test_dataloader = val_dataloader
param_scheduler = [
    dict(type='LinearLR', start_factor={warmup['start_factor']}, by_epoch=False, begin=0, end={warmup_iters}),
    dict(type='PolyLR', power=1.0, eta_min=0.0, by_epoch=False, begin={warmup_iters}, end=max_iters),
]
train_cfg = dict(max_iters=max_iters, val_interval={interval})
default_hooks = dict(checkpoint=dict(interval={interval}))
'''
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    Config.fromfile(str(out))  # fails here, not at training time, if its _base_ does not resolve
    return out


def commands(config: Path, iters: int, gpus: int = 8) -> List[str]:
    """A look at some samples, then the train and test commands (one GPU or CPU, then
    ``gpus`` GPUs), runnable from here."""
    tools = tool_path('train.py').parent
    if Path.cwd().resolve().is_relative_to(tools.parent):
        tools = Path(osp.relpath(tools))
    checkpoint = Path('work_dirs') / config.stem / f'iter_{iters}.pth'  # train.py's default work dir
    return [f'python {tools / "browse_dataset.py"} {config} --out {checkpoint.parent / "samples"}',
            f'python {tools / "train.py"} {config}',
            f'python {tools / "test.py"} {config} {checkpoint}',
            f'bash {tools / "dist_train.sh"} {config} {gpus}',
            f'bash {tools / "dist_test.sh"} {config} {checkpoint} {gpus}']
