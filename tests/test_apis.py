"""Python API, tools/infer.py (folder with a corrupt file, glob, video) and the overlays."""

import cv2
import numpy as np
import pytest
import torch
from mmengine.config import Config
from mmseg.datasets import ADE20KDataset
from mmseg.registry import MODELS
from mmseg.utils import register_all_modules
from PIL import Image

from conftest import REPO, run_script
from vit5seg.apis import inference_model, init_model
from vit5seg.datasets.synthetic import synthetic_sample

TINY = REPO / 'configs' / 'tiny' / 'vit5_upernet_synthetic.py'
PALETTE = np.asarray(ADE20KDataset.METAINFO['palette'], np.uint8)


@pytest.fixture(scope='module')
def checkpoint(tmp_path_factory):
    register_all_modules(init_default_scope=True)
    torch.manual_seed(0)  # the same classes whatever ran before in this worker
    model = MODELS.build(Config.fromfile(str(TINY)).model)
    model.init_weights()
    # a decisive classifier, so the prediction has several classes
    with torch.no_grad():
        model.decode_head.conv_seg.weight.normal_(0, 1.0)
    path = tmp_path_factory.mktemp('ckpt') / 'tiny.pth'
    meta = {k: ADE20KDataset.METAINFO[k] for k in ('classes', 'palette')}
    torch.save({'state_dict': model.state_dict(), 'meta': {'dataset_meta': meta}}, path)
    return path


@pytest.fixture(scope='module')
def images(tmp_path_factory):
    folder = tmp_path_factory.mktemp('images')
    rng = np.random.default_rng(0)
    for i in range(3):
        img, _ = synthetic_sample(64 + 16 * i, rng)
        cv2.imwrite(str(folder / f'img{i}.jpg'), img)
    (folder / 'broken.jpg').write_bytes((folder / 'img0.jpg').read_bytes()[:300])
    (folder / 'notes.txt').write_text('not an image')
    return folder


def test_api_on_tiny_checkpoint(checkpoint, images):
    model = init_model(str(TINY), str(checkpoint), device='cpu')
    assert model.dataset_meta['classes'] == ADE20KDataset.METAINFO['classes']
    img = cv2.imread(str(images / 'img1.jpg'))
    for inp in (img, str(images / 'img1.jpg')):
        result = inference_model(model, inp)
        assert result.pred_sem_seg.data.shape == (1, *img.shape[:2])
    batch = inference_model(model, [img, img])
    assert len(batch) == 2 and torch.equal(batch[0].pred_sem_seg.data, batch[1].pred_sem_seg.data)


def _infer(checkpoint, inputs, out_dir, *extra):
    out = run_script(REPO / 'tools' / 'infer.py', TINY, checkpoint, *inputs, '--out-dir', out_dir, '--no-progress',
                   *extra)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout


def test_cli_folder_skips_the_corrupt_file_and_writes_masks_and_overlays(checkpoint, images, tmp_path):
    stdout = _infer(checkpoint, [images], tmp_path, '--opacity', '1.0', '--batch-size', '2')
    assert 'summary: 3 done, 1 skipped' in stdout and 'broken.jpg: unreadable or corrupt image' in stdout
    for i in range(3):
        img = cv2.imread(str(images / f'img{i}.jpg'))
        label = np.array(Image.open(tmp_path / 'masks' / f'img{i}.png'))  # ids, not colours
        overlay = cv2.imread(str(tmp_path / 'overlays' / f'img{i}.jpg'))
        assert label.shape == img.shape[:2] and overlay.shape == img.shape
        assert label.max() < 150
        checked = 0
        for c in np.unique(label):
            # opacity 1: the class's palette colour (BGR); inside the region only, as JPEG
            # smears colours across region borders
            inner = cv2.erode((label == c).astype(np.uint8), np.ones((5, 5), np.uint8)).astype(bool)
            if inner.sum() < 20:
                continue
            median = np.median(overlay[inner].astype(int), 0)
            distance = np.abs(PALETTE[:, ::-1].astype(int) - median).sum(1)
            # ADE20K's palette gives two classes (6 and 48) one colour: a tie is a match
            assert distance[c] == distance.min(), (c, median, PALETTE[c][::-1])
            checked += 1
        assert checked
    assert len(np.unique(np.array(Image.open(tmp_path / 'masks' / 'img2.png')))) >= 2


def test_cli_side_by_side_legend_and_glob(checkpoint, images, tmp_path):
    stdout = _infer(checkpoint, [f'{images}/img[01].jpg'], tmp_path, '--side-by-side', '--legend')
    assert 'summary: 2 done, 0 skipped' in stdout
    img = cv2.imread(str(images / 'img1.jpg'))
    view = cv2.imread(str(tmp_path / 'overlays' / 'img1.jpg'))
    assert view.shape[1] == 2 * img.shape[1] and view.shape[0] > img.shape[0]  # legend strip below
    assert np.abs(view[:img.shape[0], :img.shape[1]].astype(int) - img).mean() < 8  # left: the input


def test_cli_video_and_missing_input(checkpoint, tmp_path):
    video = tmp_path / 'clip.avi'
    writer = cv2.VideoWriter(str(video), cv2.VideoWriter_fourcc(*'MJPG'), 5, (80, 64))
    rng = np.random.default_rng(1)
    for _ in range(4):
        writer.write(synthetic_sample(64, rng)[0])
    writer.release()
    stdout = _infer(checkpoint, [video, tmp_path / 'nothing.png'], tmp_path / 'out')
    assert 'summary: 4 done, 1 skipped' in stdout and 'nothing.png: no such file or folder' in stdout
    masks = sorted(p.name for p in (tmp_path / 'out' / 'masks').iterdir())
    assert masks == [f'clip_{i:06d}.png' for i in range(4)]
    assert np.array(Image.open(tmp_path / 'out' / 'masks' / 'clip_000003.png')).shape == (64, 80)


def test_cli_sliding_window_and_test_resize(checkpoint, images, tmp_path):
    stdout = _infer(checkpoint, [images / 'img2.jpg'], tmp_path, '--mode', 'slide', '--crop', '64', '64',
                    '--scale', '200', '100')
    assert 'summary: 1 done, 0 skipped' in stdout
    img = cv2.imread(str(images / 'img2.jpg'))
    assert np.array(Image.open(tmp_path / 'masks' / 'img2.png')).shape == img.shape[:2]


def test_train_logs_to_tensorboard_when_asked(tmp_path):
    from vit5seg.datasets import make_synthetic_ade20k
    make_synthetic_ade20k(tmp_path / 'data' / 'synthetic_ade20k', num_train=4, num_val=2, size=64)
    out = run_script(REPO / 'tools' / 'train.py', TINY, '--work-dir', 'w', '--tensorboard', '--cfg-options',
                   'train_cfg.max_iters=2', 'train_cfg.val_interval=2', 'default_hooks.logger.interval=1', cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    assert list((tmp_path / 'w').glob('*/vis_data/events.out.tfevents.*'))
    assert list((tmp_path / 'w').glob('*/vis_data/scalars.json'))
