"""tools/make_synthetic_data.py: each benchmark's official layout and label encoding, read
by mmseg's own dataset class through the real config; the label tables against mmseg's
converters."""
import importlib.util
from pathlib import Path

import cv2
import mmseg
import numpy as np
import pytest
from mmengine.config import Config
from mmseg.registry import DATASETS
from mmseg.utils import register_all_modules

from conftest import REPO, run_script
from vit5seg.datasets import CUSTOM_CLASSES, DATA_ROOTS, make_synthetic_ade20k, make_synthetic_data
from vit5seg.datasets.layouts import COCO_STUFF_RAW_IDS, CITYSCAPES_TRAIN_IDS

# dataset -> the real config that reads it, and the classes the synthetic data draws
REAL_CONFIGS = {
    'ade20k': 'vit5_upernet_ade20k.py',
    'cityscapes': 'cityscapes/vit5-base_upernet_cityscapes.py',
    'pascal_context': 'pascal_context/vit5-base_upernet_pascal_context_59.py',
    'coco_stuff': 'coco_stuff/vit5-base_upernet_coco_stuff164k.py',
}
DRAWN = {
    'ade20k': ('wall', 'sky', 'floor', 'road', 'person', 'table', 'chair', 'car'),
    'cityscapes': ('road', 'building', 'vegetation', 'sky', 'person', 'car', 'traffic sign', 'bus'),
    'pascal_context': ('sky', 'grass', 'wall', 'road', 'person', 'car', 'dog', 'chair'),
    'coco_stuff': ('sky-other', 'grass', 'wall-concrete', 'road', 'person', 'car', 'dog', 'chair'),
}


def _converter(name: str):
    path = Path(mmseg.__file__).parent / '.mim' / 'tools' / 'dataset_converters' / f'{name}.py'
    spec = importlib.util.spec_from_file_location(f'mmseg_converter_{name}', path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize('dataset', sorted(REAL_CONFIGS))
def test_the_real_config_reads_each_layout_with_mmseg_dataset_classes(dataset, tmp_path, monkeypatch):
    data_root = make_synthetic_data(dataset, tmp_path / 'data', num_train=6, num_val=3, size=48, seed=1)
    assert data_root == tmp_path / 'data' / DATA_ROOTS[dataset]
    monkeypatch.chdir(tmp_path)  # the configs read data/... relative to where the tools run
    register_all_modules(init_default_scope=True)
    cfg = Config.fromfile(str(REPO / 'configs' / REAL_CONFIGS[dataset]))
    for phase, count in (('train', 6), ('val', 3)):
        ds_cfg = cfg[f'{phase}_dataloader'].dataset.copy()
        ds_cfg.pipeline = [t for t in ds_cfg.pipeline if t['type'] in ('CheckedLoading', 'LoadImageFromFile',
                                                                         'LoadAnnotations', 'CheckSegSample')]
        ds = DATASETS.build(ds_cfg)
        assert len(ds) == count
        classes = ds.metainfo['classes']
        seen = set()
        for i in range(count):
            sample = ds[i]  # the pipeline's own checks pass: ids in range, sizes match
            seg = sample['gt_seg_map']
            assert sample['img'].shape[:2] == seg.shape
            seen |= {classes[v] for v in np.unique(seg) if v != 255}
            assert 255 in seg  # the frame is ignored in every encoding
        assert seen <= set(DRAWN[dataset]) and len(seen) >= 3


def test_cityscapes_writes_official_label_ids_and_the_train_ids_derived_from_them(tmp_path):
    root = make_synthetic_data('cityscapes', tmp_path, num_train=4, num_val=2, size=32)
    table = np.full(256, 255, np.uint8)
    table[:34] = CITYSCAPES_TRAIN_IDS
    train_files = sorted((root / 'gtFine').rglob('*_gtFine_labelTrainIds.png'))
    assert len(train_files) == 6 and len(list((root / 'leftImg8bit').rglob('*_leftImg8bit.png'))) == 6
    assert {p.parent.name for p in train_files} == {'aachen', 'bochum', 'frankfurt', 'lindau'}
    for path in train_files:
        label_ids = cv2.imread(str(path).replace('_labelTrainIds', '_labelIds'), cv2.IMREAD_UNCHANGED)
        assert np.array_equal(table[label_ids], cv2.imread(str(path), cv2.IMREAD_UNCHANGED))
        assert 0 in label_ids  # 'unlabeled' frame
    # labels.py facts, as the 19 evaluated classes: road = 7, sky = 23, bicycle = 33
    assert (CITYSCAPES_TRAIN_IDS[7], CITYSCAPES_TRAIN_IDS[23], CITYSCAPES_TRAIN_IDS[33]) == (0, 10, 18)
    assert sorted(v for v in CITYSCAPES_TRAIN_IDS if v != 255) == list(range(19))


def test_coco_stuff_raw_ids_map_to_train_ids_as_mmsegs_converter_does(tmp_path):
    converter = _converter('coco_stuff164k')
    assert {raw: train for train, raw in enumerate(COCO_STUFF_RAW_IDS)} | {255: 255} == converter.clsID_to_trID
    root = make_synthetic_data('coco_stuff', tmp_path, num_train=3, num_val=2, size=32)
    for raw_path in sorted((root / 'annotations' / 'train2017').glob('*[0-9].png')):
        raw = cv2.imread(str(raw_path), cv2.IMREAD_UNCHANGED)
        expected = np.full_like(raw, 255)
        for cls_id, train_id in converter.clsID_to_trID.items():
            expected[raw == cls_id] = train_id
        train = cv2.imread(str(raw_path.with_name(raw_path.stem + '_labelTrainIds.png')), cv2.IMREAD_UNCHANGED)
        assert np.array_equal(train, expected)


def test_pascal_context_masks_and_split_lists(tmp_path):
    root = make_synthetic_data('pascal_context', tmp_path, num_train=3, num_val=2, size=32)
    lists = root / 'ImageSets' / 'SegmentationContext'
    train, val = (lists / 'train.txt').read_text().split(), (lists / 'val.txt').read_text().split()
    assert len(train) == 3 and len(val) == 2 and not set(train) & set(val)
    for name in train + val:
        assert (root / 'JPEGImages' / f'{name}.jpg').is_file()
        mask = cv2.imread(str(root / 'SegmentationClassContext' / f'{name}.png'), cv2.IMREAD_UNCHANGED)
        assert mask.max() <= 59 and 0 in mask  # converted masks: 0 = background, 1..59


def test_custom_folder_and_the_ade20k_entry(tmp_path):
    root = make_synthetic_data('custom', tmp_path, num_train=3, num_val=2, size=32)
    masks = sorted((root / 'annotations' / 'train').glob('*.png'))
    assert len(masks) == 3 and len(list((root / 'images' / 'val').glob('*.jpg'))) == 2
    values = set(np.unique(np.concatenate([cv2.imread(str(m), cv2.IMREAD_UNCHANGED).ravel() for m in masks])))
    assert values <= set(range(len(CUSTOM_CLASSES))) | {255}
    # the ade20k entry writes what make_synthetic_ade20k writes, one level down
    ade = make_synthetic_data('ade20k', tmp_path / 'a', num_train=2, num_val=1, size=32, seed=4)
    plain = make_synthetic_ade20k(tmp_path / 'b', num_train=2, num_val=1, size=32, seed=4)
    for a in sorted(p for p in ade.rglob('*') if p.suffix in ('.jpg', '.png')):
        assert a.read_bytes() == (plain / a.relative_to(ade)).read_bytes()


def test_never_writes_into_a_real_dataset_and_replaces_its_own(tmp_path):
    real = tmp_path / 'cityscapes'
    real.mkdir()
    (real / 'README').write_text('the real thing')
    with pytest.raises(FileExistsError, match='already holds files that this tool did not write'):
        make_synthetic_data('cityscapes', tmp_path)
    assert sorted(p.name for p in real.iterdir()) == ['README']
    root = make_synthetic_data('coco_stuff', tmp_path, num_train=4, num_val=1, size=32)
    make_synthetic_data('coco_stuff', tmp_path, num_train=2, num_val=1, size=32)
    assert len(list((root / 'images' / 'train2017').glob('*.jpg'))) == 2
    out = run_script(REPO / 'tools' / 'make_synthetic_data.py', 'cityscapes', tmp_path)
    assert out.returncode == 1 and out.stderr.startswith('error: ') and 'choose another ROOT' in out.stderr
    with pytest.raises(ValueError, match='unknown dataset'):
        make_synthetic_data('voc', tmp_path)
