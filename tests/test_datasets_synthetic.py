"""The synthetic ADE20K-layout generator and the completeness check."""

import cv2
import numpy as np
from mmseg.datasets import ADE20KDataset

from conftest import REPO, run_script
from vit5seg.datasets import check_ade20k, format_report, make_synthetic_ade20k
from vit5seg.datasets.synthetic import OBJECT_IDS, STUFF_IDS


def test_layout_loads_in_mmseg_ade20k_dataset(tmp_path):
    root = make_synthetic_ade20k(tmp_path, num_train=6, num_val=3, size=64)
    for split, n in (('training', 6), ('validation', 3)):
        assert len(list((root / 'images' / split).glob('ADE_*.jpg'))) == n
        assert len(list((root / 'annotations' / split).glob('ADE_*.png'))) == n
    ds = ADE20KDataset(data_root=str(root), data_prefix=dict(img_path='images/validation',
                       seg_map_path='annotations/validation'), pipeline=[], serialize_data=False)
    assert len(ds) == 3 and ds[0]['seg_map_path'].endswith('.png') and ds[0]['reduce_zero_label']


def test_labels_are_ade_ids_and_colours_carry_the_class(tmp_path):
    root = make_synthetic_ade20k(tmp_path, num_train=12, num_val=0, size=64, seed=3)
    means = {}
    for img_path in sorted((root / 'images' / 'training').glob('*.jpg')):
        img = cv2.imread(str(img_path)).astype(np.float32)
        label = cv2.imread(str(root / 'annotations' / 'training' / f'{img_path.stem}.png'), cv2.IMREAD_UNCHANGED)
        assert label.shape == img.shape[:2] and label.dtype == np.uint8
        assert set(np.unique(label)) <= {0, *STUFF_IDS, *OBJECT_IDS}
        for c in np.unique(label):
            if c:
                means.setdefault(int(c), []).append(img[label == c].mean(0))
    # each class keeps its colour across images: a region's mean colour names its class
    centers = {c: np.mean(v, 0) for c, v in means.items()}
    regions = [(c, m) for c, v in means.items() for m in v]
    right = sum(min(centers, key=lambda k: np.linalg.norm(centers[k] - m)) == c for c, m in regions)
    assert len(centers) >= 6 and right / len(regions) > 0.9


def test_check_reports_unpaired_and_bad_files(tmp_path):
    root = make_synthetic_ade20k(tmp_path, num_train=4, num_val=2, size=32)
    (root / 'annotations' / 'training' / 'ADE_train_00000002.png').unlink()
    cv2.imwrite(str(root / 'annotations' / 'validation' / 'ADE_val_00000099.png'), np.zeros((8, 8), np.uint8))
    cv2.imwrite(str(root / 'annotations' / 'validation' / 'ADE_val_00000001.png'), np.full((32, 40), 200, np.uint8))
    train, val = check_ade20k(tmp_path, check_values=True)
    assert train.images_without_label == [str(root / 'images' / 'training' / 'ADE_train_00000002.jpg')]
    assert val.labels_without_image == [str(root / 'annotations' / 'validation' / 'ADE_val_00000099.png')]
    assert 'value 200 > 150' in val.bad_labels[0]
    text = format_report([train, val])
    assert 'training: 4 images, 3 labels' in text and text.endswith('PROBLEMS FOUND')
    out = run_script(REPO / 'tools' / 'check_ade20k.py', root)
    assert out.returncode == 1 and '1 images without label' in out.stdout
    missing = run_script(REPO / 'tools' / 'check_ade20k.py', tmp_path / 'none')
    assert missing.returncode == 1 and 'is not an ADE20K folder' in missing.stderr
