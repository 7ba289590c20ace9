"""tools/check_data.py CONFIG: every dataset of a config, any layout, every problem listed."""
import os

import cv2
import numpy as np
import pytest
from mmengine.config import Config

from conftest import REPO, run_script
from vit5seg.datasets import DatasetError, check_config, check_dataset_config, format_report, make_synthetic_data
from vit5seg.paths import repository_root

TINY = REPO / 'configs' / 'tiny'
ENV = {**os.environ, 'OMP_NUM_THREADS': '1'}


def _tool(config, cwd, *extra):
    return run_script(REPO / 'tools' / 'check_data.py', config, *extra, cwd=cwd, env=ENV)


@pytest.mark.parametrize('dataset', ['cityscapes', 'pascal_context', 'coco_stuff'])
def test_each_tiny_twin_dataset_checks_clean(dataset, tmp_path):
    make_synthetic_data(dataset, tmp_path / 'data' / 'synthetic', num_train=5, num_val=2, size=32)
    out = _tool(TINY / f'vit5_upernet_synthetic_{dataset}.py', tmp_path, '--values')
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    # the test set is the val set: checked once
    assert lines[0].startswith('train_dataloader.dataset: 5 images, 5 labels')
    assert 'val_dataloader.dataset: 2 images, 2 labels' in lines and lines[-1] == 'OK'
    assert 'classes never seen (not an error)' in out.stdout


def test_problems_in_a_cityscapes_tree_are_all_listed(tmp_path, monkeypatch):
    root = make_synthetic_data('cityscapes', tmp_path / 'data' / 'synthetic', num_train=6, num_val=2, size=32)
    gt = root / 'gtFine' / 'train'
    (gt / 'aachen' / 'aachen_000001_000019_gtFine_labelTrainIds.png').unlink()
    cv2.imwrite(str(gt / 'bochum' / 'bochum_000000_000019_gtFine_labelTrainIds.png'), np.full((32, 64), 19, np.uint8))
    cv2.imwrite(str(gt / 'bochum' / 'bochum_000007_000019_gtFine_labelTrainIds.png'), np.zeros((32, 64), np.uint8))
    cv2.imwrite(str(gt / 'aachen' / 'aachen_000002_000019_gtFine_labelTrainIds.png'), np.zeros((30, 64), np.uint8))
    monkeypatch.chdir(tmp_path)
    train, val = check_config(Config.fromfile(str(TINY / 'vit5_upernet_synthetic_cityscapes.py')),
                              check_values=True)
    assert (train.images, train.labels, val.ok) == (6, 6, True)
    assert train.images_without_label == [
        'data/synthetic/cityscapes/leftImg8bit/train/aachen/aachen_000001_000019_leftImg8bit.png']
    assert train.labels_without_image == [str(gt / 'bochum' / 'bochum_000007_000019_gtFine_labelTrainIds.png')
                                          .replace(str(tmp_path) + '/', '')]
    bad = dict(line.split(': ', 1) for line in train.bad_labels)
    assert bad['data/synthetic/cityscapes/gtFine/train/bochum/bochum_000000_000019_gtFine_labelTrainIds.png'] == \
        'value 19 > 18 (CityscapesDataset label files hold 0..18, 255 = ignored)'
    assert bad['data/synthetic/cityscapes/gtFine/train/aachen/aachen_000002_000019_gtFine_labelTrainIds.png'] == \
        'size 64x30 differs from its image 64x32'
    text = format_report([train, val])
    assert text.endswith('PROBLEMS FOUND') and '1 images without label' in text and '2 bad labels' in text
    out = _tool(TINY / 'vit5_upernet_synthetic_cityscapes.py', tmp_path, '--phases', 'train')
    assert out.returncode == 1 and 'val_dataloader' not in out.stdout and 'bad labels' not in out.stdout


def test_split_lists_name_what_is_missing(tmp_path, monkeypatch):
    root = make_synthetic_data('pascal_context', tmp_path / 'data' / 'synthetic', num_train=3, num_val=2, size=32)
    (root / 'JPEGImages' / '2008_000002.jpg').unlink()
    (root / 'SegmentationClassContext' / '2010_000001.png').unlink()
    cv2.imwrite(str(root / 'SegmentationClassContext' / '2008_000003.png'), np.full((32, 43), 60, np.uint8))
    monkeypatch.chdir(tmp_path)
    train, val = check_config(Config.fromfile(str(TINY / 'vit5_upernet_synthetic_pascal_context.py')),
                              check_values=True)
    assert train.listed_but_missing == ['data/synthetic/VOCdevkit/VOC2010/JPEGImages/2008_000002.jpg']
    assert train.bad_labels[0].endswith(': value 60 > 59 (PascalContextDataset59 label files hold 0 = ignored, 1..59)')
    assert val.images_without_label == ['data/synthetic/VOCdevkit/VOC2010/JPEGImages/2010_000001.jpg']
    cfg = Config.fromfile(str(TINY / 'vit5_upernet_synthetic_pascal_context.py'))
    assert check_dataset_config(cfg.train_dataloader.dataset, 'train_dataloader.dataset') == 3  # train.py's check
    (root / 'ImageSets' / 'SegmentationContext' / 'val.txt').unlink()
    [val] = check_config(cfg, ('val',))
    assert val.error.startswith('val_dataloader.dataset.ann_file: split list ') and 'does not exist' in val.error
    # at training start (mmseg itself would only fail an assert)
    with pytest.raises(DatasetError, match=r"^val_dataloader.dataset.ann_file: split list .*val.txt does not exist"):
        check_dataset_config(cfg.val_dataloader.dataset, 'val_dataloader.dataset')


def test_missing_data_root_and_config(tmp_path):
    out = _tool(REPO / 'configs' / 'coco_stuff' / 'vit5-base_upernet_coco_stuff164k.py', tmp_path)
    assert out.returncode == 1
    repo = repository_root()  # None in a regular install, whose configs name no clone
    origin = f"; the repository's configs name theirs from the repository root, {repo})" if repo else ')'
    assert out.stdout.splitlines()[0] == (
        f"train_dataloader.dataset.data_root: 'data/coco_stuff164k' does not exist (relative paths are from the "
        f"working directory, {tmp_path}{origin}; "
        f"set data_root in the config or with --cfg-options train_dataloader.dataset.data_root=PATH")
    missing = _tool(tmp_path / 'nope.py', tmp_path)
    assert missing.returncode == 1 and missing.stderr.startswith('error: ') and 'nope.py' in missing.stderr


def test_wrapped_datasets_are_followed(tmp_path, monkeypatch):
    make_synthetic_data('coco_stuff', tmp_path / 'data' / 'synthetic', num_train=3, num_val=2, size=32)
    make_synthetic_data('cityscapes', tmp_path / 'data' / 'synthetic', num_train=4, num_val=2, size=32)
    monkeypatch.chdir(tmp_path)
    coco = Config.fromfile(str(TINY / 'vit5_upernet_synthetic_coco_stuff.py')).train_dataloader.dataset
    city = Config.fromfile(str(TINY / 'vit5_upernet_synthetic_cityscapes.py')).train_dataloader.dataset
    wrapped = dict(type='RepeatDataset', times=2, dataset=dict(type='ConcatDataset', datasets=[coco, city]))
    assert check_dataset_config(wrapped, 'train_dataloader.dataset') == 7
    reports = check_config(Config(dict(train_dataloader=dict(dataset=wrapped))), ('train',))
    assert [(r.split, r.images) for r in reports] == [
        ('train_dataloader.dataset.dataset.datasets[0]', 3), ('train_dataloader.dataset.dataset.datasets[1]', 4)]


def test_a_class_subset_reads_the_files_in_the_full_set(tmp_path, monkeypatch):
    """metainfo classes naming some of the dataset's classes: mmseg's label_map maps the others
    to ignored, so the files' ids of the full set are valid; only kept classes are reported."""
    make_synthetic_data('cityscapes', tmp_path / 'data' / 'synthetic', num_train=4, num_val=2, size=32)
    monkeypatch.chdir(tmp_path)
    cfg = Config.fromfile(str(TINY / 'vit5_upernet_synthetic_cityscapes.py'))
    whole = check_config(cfg, ('train',), check_values=True)[0]
    kept = ('building', 'vegetation', 'train')
    assert {'building', 'vegetation'}.isdisjoint(whole.classes_never_seen) and 'train' in whole.classes_never_seen
    cfg.train_dataloader.dataset.metainfo = dict(classes=kept)
    [subset] = check_config(cfg, ('train',), check_values=True)
    assert subset.ok and subset.bad_labels == [] and subset.classes_never_seen == ['train']
    cfg.train_dataloader.dataset.metainfo = dict(classes=('road', 'spaceship'))
    [wrong] = check_config(cfg, ('train',), check_values=True)
    assert wrong.error.startswith('train_dataloader.dataset.metainfo.classes: new classes') and 'spaceship' in wrong.error
