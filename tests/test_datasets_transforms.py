"""EoMT's training augmentation against torchvision as EoMT composes it (tue-mps/eomt
datasets/transforms.py): the colour jitter (EoMTColorJitter) and the geometry
(ScaleJitterCrop: ScaleJitter, pad, crop, redraw); and the EoMT configs' pipelines on real
files."""
from pathlib import Path

import numpy as np
import pytest
import torch
from mmengine.config import Config
from scipy import stats
from torchvision import tv_tensors
from torchvision.transforms import v2

from conftest import REPO
from vit5seg.datasets import EoMTColorJitter, ScaleJitterCrop

EOMT_CONFIGS = sorted((REPO / 'configs' / 'eomt').glob('*_eomt_ade20k.py'))  # the semantic ones (mmseg)


def sample(height, width, seed=0, labelled=None):
    """A loaded mmseg sample: a random BGR image, labels 0..149 (or 255 outside ``labelled``,
    a (top, bottom, left, right) box)."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 150, (height, width), dtype=np.uint8)
    if labelled is not None:
        top, bottom, left, right = labelled
        box = labels[top:bottom, left:right].copy()
        labels[:] = 255
        labels[top:bottom, left:right] = box
    return dict(img=rng.integers(0, 256, (height, width, 3), dtype=np.uint8), gt_seg_map=labels,
                seg_fields=['gt_seg_map'], img_shape=(height, width), ori_shape=(height, width))


def eomt_reference(img, labels, scale, crop, top, left):
    """What EoMT's Transforms do with this scale and window: torchvision's ScaleJitter
    (the scale range pinned to ``scale``), pad bottom/right to the crop (image 0, masks
    "no target": 255 in a label map), and the crop at (top, left)."""
    image = torch.from_numpy(img).permute(2, 0, 1)
    mask = tv_tensors.Mask(torch.from_numpy(labels)[None])
    image, mask = v2.ScaleJitter(target_size=crop, scale_range=(scale, scale))(image, mask)
    pad = [0, 0, max(0, crop[1] - image.shape[-1]), max(0, crop[0] - image.shape[-2])]
    image = v2.functional.pad(image, pad, fill=0)
    mask = v2.functional.pad(mask, pad, fill=255)
    image = v2.functional.crop(image, top, left, *crop)
    mask = v2.functional.crop(mask, top, left, *crop)
    return image.permute(1, 2, 0).numpy(), mask[0].numpy()


@pytest.mark.parametrize('height,width', [(512, 683), (683, 512), (300, 1200), (1500, 375), (97, 131), (512, 512),
                                          (341, 1024)])
def test_each_draw_is_eomts_jitter_pad_and_crop(height, width):
    # any aspect ratio: the long side becomes 512 x s (torchvision's sizes, truncated in float32)
    jitter = ScaleJitterCrop(crop_size=(512, 512), scale_range=(0.5, 2.0))
    np.random.seed(height * width)
    for seed in range(3):
        results = sample(height, width, seed)
        img, labels = results['img'].copy(), results['gt_seg_map'].copy()
        out = jitter(results)
        drawn = out['scale_jitter']
        scale, size = drawn['scale'], drawn['size']
        assert 0.5 <= scale <= 2.0 and drawn['draws'] == 1  # every pixel labelled: no redraw
        assert abs(max(size) - 512 * scale) <= 1 and size[0] / size[1] == pytest.approx(height / width, rel=0.02)
        expected_img, expected_labels = eomt_reference(img, labels, scale, (512, 512), *drawn['crop'])
        assert out['img'].shape == (512, 512, 3) and out['img_shape'] == (512, 512)
        assert np.array_equal(out['img'], expected_img)
        assert np.array_equal(out['gt_seg_map'], expected_labels)
        # the model is never fed a side above 512; what lies beyond the image is padding
        assert (out['gt_seg_map'][size[0]:] == 255).all() and (out['gt_seg_map'][:, size[1]:] == 255).all()
        assert out['scale_factor'] == (size[1] / width, size[0] / height)


@pytest.mark.parametrize('height,width,scale', [(561, 512, 1.0), (561, 512, 0.5), (521, 512, 1.5),
                                                (523, 512, 1.5), (512, 683, 1.0), (1500, 375, 2.0)])
def test_sizes_round_as_torchvisions_in_float32(height, width, scale):
    # where float64 lands on the other side of an integer, EoMT's images are torchvision's size
    from vit5seg.datasets.transforms import jitter_size
    resized = v2.ScaleJitter(target_size=(512, 512), scale_range=(scale, scale))(torch.zeros(1, height, width))
    assert jitter_size(height, width, (512, 512), scale) == tuple(resized.shape[-2:])


def test_scales_and_windows_are_uniform():
    """Kolmogorov-Smirnov against the uniform law: the scales, and each window's place in
    its range of (range + 1) positions, made continuous by adding a uniform draw in [0, 1)
    (a discrete uniform place plus it, over range + 1, is exactly uniform on [0, 1))."""
    jitter = ScaleJitterCrop(crop_size=(64, 64), scale_range=(0.5, 2.0))
    np.random.seed(0)
    spread = np.random.default_rng(1)
    scales, places = [], {'top': [], 'left': []}
    for _ in range(600):
        drawn = jitter(sample(48, 80))['scale_jitter']
        scales.append(drawn['scale'])
        for side, position, length in zip(('top', 'left'), drawn['crop'], drawn['size']):
            if length > 64:  # a padded side has one place only
                places[side].append((position + spread.random()) / (length - 64 + 1))
    assert stats.kstest(scales, stats.uniform(0.5, 1.5).cdf).pvalue > 1e-3
    assert min(scales) < 0.52 and max(scales) > 1.98
    for side, values in places.items():
        assert len(values) > 100, side
        assert stats.kstest(values, stats.uniform(0, 1).cdf).pvalue > 1e-3, side


def test_a_window_without_a_labelled_pixel_is_drawn_again_from_the_original():
    # labelled pixels only in a 40x40 corner of a 400x600 image: most windows miss it
    jitter = ScaleJitterCrop(crop_size=(128, 128), scale_range=(0.5, 2.0))
    np.random.seed(1)
    draws = []
    for seed in range(40):
        results = sample(400, 600, seed, labelled=(360, 400, 560, 600))
        img, labels = results['img'].copy(), results['gt_seg_map'].copy()
        out = jitter(results)
        assert (out['gt_seg_map'] != 255).any()
        drawn = out['scale_jitter']
        draws.append(drawn['draws'])
        # the kept draw is a plain draw of the original image: nothing of a rejected one remains
        expected_img, expected_labels = eomt_reference(img, labels, drawn['scale'], (128, 128), *drawn['crop'])
        assert np.array_equal(out['img'], expected_img) and np.array_equal(out['gt_seg_map'], expected_labels)
    assert max(draws) > 3 and sum(d > 1 for d in draws) > 20


def test_an_image_without_labelled_pixels_is_kept_after_one_draw():
    jitter = ScaleJitterCrop(crop_size=(64, 64))
    out = jitter(sample(50, 70, labelled=(0, 0, 0, 0)))
    assert out['scale_jitter']['draws'] == 1 and (out['gt_seg_map'] == 255).all()
    # and max_draws bounds the redraws where labelled pixels are rare
    np.random.seed(0)
    capped = ScaleJitterCrop(crop_size=(64, 64), max_draws=2)
    assert max(capped(sample(400, 600, s, labelled=(398, 400, 598, 600)))['scale_jitter']['draws']
               for s in range(10)) <= 2


def eomt_colour_jitter(rgb, seed):
    """EoMT's Transforms.color_jitter on a (3, H, W) uint8 RGB tensor, seeded: each step
    with probability 1/2, factors uniform around 1 (hue: around 0), in EoMT's draw order."""
    torch.manual_seed(seed)

    def factor(spread, centre=1.0):
        return torch.empty(1).uniform_(centre - spread, centre + spread).item()

    def contrast(img):
        return v2.functional.adjust_contrast(img, factor(0.5)) if torch.rand(()) < 0.5 else img

    def saturation_and_hue(img):
        if torch.rand(()) < 0.5:
            img = v2.functional.adjust_saturation(img, factor(0.5))
        if torch.rand(()) < 0.5:
            img = v2.functional.adjust_hue(img, factor(18 / 360, centre=0.0))
        return img

    if torch.rand(()) < 0.5:
        rgb = v2.functional.adjust_brightness(rgb, factor(32 / 255))
    if torch.rand(()) < 0.5:
        return saturation_and_hue(contrast(rgb))
    return contrast(saturation_and_hue(rgb))


def test_the_colour_jitter_is_eomts_on_the_rgb_image():
    jitter = EoMTColorJitter()
    bgr = np.random.default_rng(0).integers(0, 256, (40, 56, 3), dtype=np.uint8)
    changed = 0
    for seed in range(24):
        torch.manual_seed(seed)
        out = jitter(dict(img=bgr.copy()))['img']
        expected = eomt_colour_jitter(torch.from_numpy(bgr[..., ::-1].copy()).permute(2, 0, 1), seed)
        assert out.dtype == np.uint8 and np.array_equal(out, expected.permute(1, 2, 0).numpy()[..., ::-1])
        changed += not np.array_equal(out, bgr)
    assert changed > 18  # 1 - 1/2 ** 4 of the draws change something
    with pytest.raises(ValueError, match=r'hue_delta must be within \[0, 180\]'):
        EoMTColorJitter(hue_delta=200)


@pytest.mark.parametrize('kwargs,match', [(dict(crop_size=(512,)), 'crop_size must be two positive ints'),
                                          (dict(scale_range=(2.0, 0.5)), r'0 < low <= high'),
                                          (dict(max_draws=0), 'max_draws must be at least 1')])
def test_bad_values_are_one_error(kwargs, match):
    with pytest.raises(ValueError, match=match):
        ScaleJitterCrop(**kwargs)


@pytest.mark.parametrize('path', EOMT_CONFIGS, ids=lambda p: p.name)
def test_eomt_configs_train_on_eomts_jitter_and_upernet_keeps_mmsegs(path):
    steps = [t['type'] for t in Config.fromfile(str(path)).train_dataloader.dataset.pipeline]
    assert steps == ['CheckedLoading', 'EoMTColorJitter', 'RandomFlip', 'ScaleJitterCrop', 'PackSegInputs']
    jitter = Config.fromfile(str(path)).train_dataloader.dataset.pipeline[3]
    assert (tuple(jitter.crop_size), tuple(jitter.scale_range)) == ((512, 512), (0.5, 2.0))
    # the UperNet twin of the same backbone keeps the paper's protocol: mmseg's own ADE20K geometry
    import mmseg
    geometry = ('RandomResize', 'RandomCrop')
    mmseg_ade = Path(mmseg.__file__).parent / '.mim' / 'configs' / '_base_' / 'datasets' / 'ade20k.py'
    expected = [t for t in Config.fromfile(str(mmseg_ade)).train_pipeline if t['type'] in geometry]
    upernet = Config.fromfile(str(REPO / 'configs' / 'vit5_upernet_ade20k.py')).train_dataloader.dataset.pipeline
    assert [t for t in upernet if t['type'] in geometry] == expected


def test_the_eomt_pipeline_on_real_files(tmp_path):
    # the EoMT config's own train dataset, built by mmseg from files of any aspect ratio
    import cv2
    from mmseg.registry import DATASETS
    from mmseg.utils import register_all_modules
    register_all_modules(init_default_scope=True)
    root = tmp_path / 'ADEChallengeData2016'
    rng = np.random.default_rng(0)
    for i, (h, w) in enumerate([(120, 160), (200, 90), (64, 256)]):
        for sub, array in (('images', rng.integers(0, 256, (h, w, 3), dtype=np.uint8)),
                           ('annotations', rng.integers(0, 151, (h, w), dtype=np.uint8))):
            folder = root / sub / 'training'
            folder.mkdir(parents=True, exist_ok=True)
            cv2.imwrite(str(folder / f'ADE_train_{i:08d}.{"jpg" if sub == "images" else "png"}'), array)
    cfg = Config.fromfile(str(REPO / 'configs' / 'eomt' / 'vit5-small_eomt_ade20k.py')).train_dataloader.dataset
    cfg.data_root = str(root)
    dataset = DATASETS.build(cfg)
    np.random.seed(0)
    for i in range(len(dataset)):
        packed = dataset[i]
        labels = packed['data_samples'].gt_sem_seg.data
        assert packed['inputs'].shape == (3, 512, 512) and labels.shape == (1, 512, 512)
        assert ((labels < 150) | (labels == 255)).all() and (labels != 255).any()


def dinov3_photometric_reference(rgb: np.ndarray, rng_seed: int) -> np.ndarray:
    """Meta's linear-probe distortion from its definition (facebookresearch/dinov3
    dinov3/eval/segmentation/transforms.py PhotoMetricDistortion) on an RGB uint8 (H, W, 3) image, numpy's
    global generator seeded: brightness (add U(-32, 32)); a mode; contrast first in mode 1 (times U(0.5,
    1.5)); saturation (torchvision's, U(0.5, 1.5)); hue (torchvision's, U(-0.5, 0.5)); contrast last in
    mode 0; every step with p 0.5, each value clipped to 0-255 and truncated to uint8."""
    np.random.seed(rng_seed)

    def scaled(img, alpha=1.0, beta=0.0):
        return np.clip(img.astype(np.float32) * alpha + beta, 0, 255).astype(np.uint8)

    def kernel(img, fn):
        return fn(torch.from_numpy(img.copy()).permute(2, 0, 1)).permute(1, 2, 0).numpy()

    img = rgb
    if np.random.randint(2):
        img = scaled(img, beta=np.random.uniform(-32, 32))
    mode = np.random.randint(2)
    if mode == 1 and np.random.randint(2):
        img = scaled(img, alpha=np.random.uniform(0.5, 1.5))
    if np.random.randint(2):
        factor = np.random.uniform(0.5, 1.5)
        img = kernel(img, lambda t: v2.functional.adjust_saturation(t, factor))
    if np.random.randint(2):
        factor = np.random.uniform(-0.5, 0.5)
        img = kernel(img, lambda t: v2.functional.adjust_hue(t, factor))
    if mode == 0 and np.random.randint(2):
        img = scaled(img, alpha=np.random.uniform(0.5, 1.5))
    return img


def test_the_linear_probes_distortion_is_metas_draw_for_draw():
    """DINOv3PhotoMetricDistortion (configs/_base_/datasets/ade20k_linear.py) against Meta's distortion
    written from its definition, the same numpy seed: the same image for every one of 40 seeds, each
    step both taken and skipped among them; mmseg's PhotoMetricDistortion (its saturation on HSV's S)
    is not."""
    from mmseg.datasets.transforms import PhotoMetricDistortion

    from vit5seg.datasets.transforms import DINOv3PhotoMetricDistortion
    rng = np.random.default_rng(0)
    bgr = np.clip(rng.normal(128, 60, (40, 56, 3)), 0, 255).astype(np.uint8)
    ours, theirs = DINOv3PhotoMetricDistortion(), PhotoMetricDistortion(hue_delta=90)
    mmseg_differs = 0
    for seed in range(40):
        expected = dinov3_photometric_reference(bgr[..., ::-1].copy(), seed)[..., ::-1]
        np.random.seed(seed)
        got = ours.transform(dict(img=bgr.copy()))['img']
        assert np.array_equal(got, expected), seed
        np.random.seed(seed)
        mmseg_differs += not np.array_equal(theirs.transform(dict(img=bgr.copy()))['img'], expected)
    assert mmseg_differs > 10
    with pytest.raises(ValueError, match='hue_range'):
        DINOv3PhotoMetricDistortion(hue_range=(-0.7, 0.5))
