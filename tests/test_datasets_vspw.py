"""VSPW in mmdet (vit5seg/datasets/vspw.py, configs/_base_/datasets/vspw.py): the synthetic clips read back
through the base config's test pipeline, each frame's labels against the PNG read here with PIL and VSPW's
label rule applied by hand (0, "others", and 255 not scored; class k+1 -> k)."""
import numpy as np
import pytest
from mmengine.config import Config
from mmengine.registry import DefaultScope
from PIL import Image

from conftest import REPO

BASE = REPO / 'configs' / '_base_' / 'datasets' / 'vspw.py'


def _dataset(root, **changes):
    from mmdet.registry import DATASETS
    cfg = Config.fromfile(BASE).test_dataloader.dataset
    cfg.update(data_root=str(root), **changes)
    with DefaultScope.overwrite_default_scope('mmdet'):
        return DATASETS.build(cfg)


@pytest.fixture(scope='module')
def vspw_root(tmp_path_factory):
    from vit5seg.datasets import make_synthetic_data
    return make_synthetic_data('vspw', tmp_path_factory.mktemp('vspw'), num_train=1, num_val=2, size=40, seed=3)


def test_vspw_clips_load_whole_with_each_frames_labels_as_vspw_scores_them(vspw_root):
    dataset = _dataset(vspw_root)
    assert len(dataset) == 2 and len(dataset.metainfo['classes']) == 124
    assert dataset.metainfo['classes'][60] == 'person'
    names = (vspw_root / 'val.txt').read_text().split()
    for v, name in enumerate(names):
        packed = dataset[v]
        frames = packed['data_samples'].video_data_samples
        masks = sorted((vspw_root / 'data' / name / 'mask').glob('*.png'))
        assert len(frames) == len(masks) == 10 and packed['inputs'].shape[0] == 10
        for t, (frame, mask) in enumerate(zip(frames, masks)):
            raw = np.array(Image.open(mask)).astype(np.int64)
            want = np.where((raw == 0) | (raw == 255), 255, raw - 1)
            got = frame.gt_sem_seg.sem_seg[0].numpy()
            assert got.shape == raw.shape and np.array_equal(got, want), (name, t)
            assert frame.frame_id == t and frame.video_id == v and frame.ori_video_length == 10
            assert frame.img_path.endswith(f'{name}/origin/{mask.stem}.jpg')
        labels = np.unique(np.concatenate([f.gt_sem_seg.sem_seg.flatten().numpy() for f in frames]))
        assert 255 in labels and 0 in labels and len(labels) >= 3     # wall, a shape or more, the unscored border


def test_a_missing_split_or_mask_is_one_error_naming_it(vspw_root, tmp_path):
    with pytest.raises(FileNotFoundError, match=r'VSPW: no split file .*test\.txt'):
        _dataset(vspw_root, ann_file='test.txt')
    import shutil
    copy = tmp_path / 'VSPW_480p'
    shutil.copytree(vspw_root, copy)
    name = (copy / 'val.txt').read_text().split()[1]
    (copy / 'data' / name / 'mask' / '00000004.png').unlink()
    with pytest.raises(FileNotFoundError, match=f'VSPW: video {name} frame 00000004.jpg has no mask'):
        _dataset(copy)
