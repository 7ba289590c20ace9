"""tools/browse_dataset.py: each sample's image, its labels painted over it, and the class shares."""

import cv2
import numpy as np
import pytest
from mmengine.config import Config
from mmseg.datasets import ADE20KDataset, CityscapesDataset

from conftest import REPO, run_script
from vit5seg.datasets import DatasetError, make_synthetic_ade20k, make_synthetic_data
from vit5seg.datasets.browse import browse_dataset, main

TINY = REPO / 'configs' / 'tiny'


def _halves(picture: np.ndarray, height: int, width: int):
    """The image and the painted copy of a picture (legend strip below them)."""
    return picture[:height, :width], picture[:height, width:2 * width]


def _expected_paint(img: np.ndarray, train_ids: np.ndarray, palette, opacity: float) -> np.ndarray:
    colours = np.asarray(palette, np.float32)[np.minimum(train_ids, len(palette) - 1)][..., ::-1]
    blended = (img.astype(np.float32) * (1 - opacity) + colours * opacity).round().astype(np.uint8)
    return np.where((train_ids < len(palette))[..., None], blended, img)


def test_labels_are_painted_where_the_files_put_them(tmp_path, monkeypatch):
    make_synthetic_data('cityscapes', tmp_path / 'data' / 'synthetic', num_train=5, num_val=2, size=32)
    monkeypatch.chdir(tmp_path)
    summary = main([str(TINY / 'vit5_upernet_synthetic_cityscapes.py'), '--out', 'pics', '--num', '3',
                    '--opacity', '0.6'])
    assert [p.name for p in summary.written] == ['00000_aachen_000000_000019_leftImg8bit.png',
                                                 '00002_aachen_000002_000019_leftImg8bit.png',
                                                 '00004_bochum_000001_000019_leftImg8bit.png']
    for path in summary.written:
        stem = path.stem.split('_', 1)[1].replace('_leftImg8bit', '')
        city = stem.split('_')[0]
        img = cv2.imread(f'data/synthetic/cityscapes/leftImg8bit/train/{city}/{stem}_leftImg8bit.png')
        ids = cv2.imread(f'data/synthetic/cityscapes/gtFine/train/{city}/{stem}_gtFine_labelTrainIds.png',
                         cv2.IMREAD_UNCHANGED)
        assert (ids == 255).any() and (ids < 19).any()
        shown, painted = _halves(cv2.imread(str(path)), *img.shape[:2])
        np.testing.assert_array_equal(shown, img)  # at the file's size: nothing resized or cropped
        np.testing.assert_array_equal(painted, _expected_paint(img, ids, CityscapesDataset.METAINFO['palette'], 0.6))
    assert set(summary.pixels) <= {*CityscapesDataset.METAINFO['classes'], 'ignored'}
    assert abs(sum(float(s.split()[-1][:-1]) for s in summary.shares().split(', ')) - 100) < 0.5


def test_ids_are_shown_after_reduce_zero_label(tmp_path, monkeypatch):
    make_synthetic_ade20k(tmp_path / 'data' / 'synthetic_ade20k', num_train=2, num_val=1, size=32)
    monkeypatch.chdir(tmp_path)
    summary = browse_dataset(Config.fromfile(str(TINY / 'vit5_upernet_synthetic.py')), 'pics', num=1)
    [path] = summary.written
    root = 'data/synthetic_ade20k/ADEChallengeData2016'
    stem = path.stem.split('_', 1)[1]
    img = cv2.imread(f'{root}/images/training/{stem}.jpg')
    file_ids = cv2.imread(f'{root}/annotations/training/{stem}.png', cv2.IMREAD_UNCHANGED)
    assert (file_ids == 0).any()
    train_ids = np.where(file_ids == 0, 255, file_ids.astype(np.int64) - 1)  # file 0 = other, k = class k-1
    _, painted = _halves(cv2.imread(str(path)), *img.shape[:2])
    np.testing.assert_array_equal(painted, _expected_paint(img, train_ids, ADE20KDataset.METAINFO['palette'], 0.5))
    assert 'ignored' in summary.pixels


def test_augmented_shows_training_crops(tmp_path, monkeypatch):
    make_synthetic_data('cityscapes', tmp_path / 'data' / 'synthetic', num_train=3, num_val=2, size=32)
    monkeypatch.chdir(tmp_path)
    cfg = Config.fromfile(str(TINY / 'vit5_upernet_synthetic_cityscapes.py'))
    crop_h, crop_w = cfg.crop_size
    raw = browse_dataset(cfg, 'raw', num=2)
    crops = browse_dataset(cfg, 'crops', num=2, augmented=True)
    assert {cv2.imread(str(p)).shape[1] for p in raw.written} == {2 * 64}  # the files are 64 wide
    assert {cv2.imread(str(p)).shape[1] for p in crops.written} == {2 * crop_w}
    val = browse_dataset(cfg, 'val', phase='val', num=5)
    assert len(val.written) == 2  # all there is
    with pytest.raises(DatasetError, match='augmented shows the training pipeline'):
        browse_dataset(cfg, 'x', phase='val', augmented=True)


def test_missing_data_is_one_error_line(tmp_path):
    out = run_script(REPO / 'tools' / 'browse_dataset.py', TINY / 'vit5_upernet_synthetic_cityscapes.py', '--out', 'pics',
                   cwd=tmp_path)
    assert out.returncode == 1 and out.stderr.startswith(
        "error: train_dataloader.dataset.data_root: 'data/synthetic/cityscapes' does not exist")
    assert len(out.stderr.strip().splitlines()) == 1 and not (tmp_path / 'pics').exists()
