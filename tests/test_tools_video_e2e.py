"""The tiny VidEoMT twin (configs/tiny/vit5_videomt_synthetic.py, issue #60) trained by tools/train.py on synthetic
YouTube-VIS clips and scored by tools/test.py: mmdet's YouTubeVISMetric AP, and how often an object keeps one
identity from frame to frame, both far from an untrained model's (the same config, its initial weights)."""
import json
import re

import numpy as np
import pytest
import torch
from pycocotools import mask as mask_utils

from conftest import REPO, run_script

pytestmark = pytest.mark.slow

CONFIG = REPO / 'configs' / 'tiny' / 'vit5_videomt_synthetic.py'
SIZE = 128            # the twin's frames


def _test(checkpoint, root, out, *extra):
    done = run_script(REPO / 'tools' / 'test.py', CONFIG, checkpoint, '--work-dir', out / 'work', '--cfg-options',
                      f'test_dataloader.dataset.data_root={root}/', f'test_evaluator.outfile_prefix={out}/results',
                      *extra)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout + done.stderr


@pytest.fixture(scope='module')
def scored(tmp_path_factory):
    """{'trained' | 'untrained': (AP, the YouTube-VIS results)} on the synthetic val clips."""
    from mmengine.config import Config
    from mmengine.registry import DefaultScope

    from vit5seg.datasets import make_synthetic_data
    torch.manual_seed(0)   # a module fixture is built before the autouse seed
    folder = tmp_path_factory.mktemp('videomt_twin')
    root = make_synthetic_data('ytvis', folder / 'data', num_train=32, num_val=8, size=SIZE)
    done = run_script(REPO / 'tools' / 'train.py', CONFIG, '--work-dir', folder / 'train', '--cfg-options',
                      f'train_dataloader.dataset.data_root={root}/', f'val_dataloader.dataset.data_root={root}/',
                      f'val_evaluator.outfile_prefix={folder}/val', 'randomness.seed=0')
    assert done.returncode == 0, done.stderr[-3000:]
    trained = sorted((folder / 'train').glob('iter_*.pth'), key=lambda p: int(re.findall(r'\d+', p.name)[0]))[-1]
    from mmdet.registry import MODELS
    with DefaultScope.overwrite_default_scope('mmdet'):
        model = MODELS.build(Config.fromfile(str(CONFIG)).model)
    model.init_weights()
    untrained = folder / 'untrained.pth'
    torch.save({'state_dict': model.state_dict(), 'meta': {}}, untrained)
    out = {}
    for name, checkpoint in (('trained', trained), ('untrained', untrained)):
        log = _test(checkpoint, root, folder / name)
        ap = float(re.search(r'youtube_vis/segm_mAP: (-?[\d.]+)', log).group(1))
        _test(checkpoint, root, folder / name, 'test_evaluator.format_only=True')
        out[name] = (ap, json.loads((folder / name / 'results.json').read_text()))
    return out, json.loads((root / 'valid.json').read_text())


def broken_tracks(results: list, truth: dict) -> float:
    """The share of consecutive frame pairs of a ground-truth object (both frames where it is seen) on which it
    does not keep one identity: on each frame its identity is the prediction of its video whose mask overlaps it
    best, if their IoU is 0.5 or more (else none), and a pair counts where the two differ or either is none.
    Written here for the twin: YouTube-VIS's AP does not count identity switches."""
    by_video = {}
    for r in results:
        by_video.setdefault(r['video_id'], []).append(r['segmentations'])
    pairs = broken = 0
    for annotation in truth['annotations']:
        predictions = by_video.get(annotation['video_id'], [])
        identities = []
        for t, gt in enumerate(annotation['segmentations']):
            if gt is None:
                identities.append('unseen')
                continue
            ious = [mask_utils.iou([p[t]], [gt], [False])[0][0] if p[t] is not None else 0 for p in predictions]
            identities.append(int(np.argmax(ious)) if ious and max(ious) >= 0.5 else None)
        for a, b in zip(identities, identities[1:]):
            if 'unseen' in (a, b):
                continue
            pairs += 1
            broken += a is None or a != b
    return broken / pairs


def test_the_video_twin_trains_to_an_ap_and_identities_far_from_an_untrained_models(scored):
    (trained_ap, trained), (untrained_ap, untrained) = scored[0]['trained'], scored[0]['untrained']
    truth = scored[1]
    kept, lost = broken_tracks(trained, truth), broken_tracks(untrained, truth)
    print(f'AP {trained_ap:.3f} (untrained {untrained_ap:.3f}); broken frame pairs {kept:.3f} (untrained {lost:.3f})')
    assert trained_ap >= 0.15 and untrained_ap <= 0.02   # seeds 0-2 on a 2-core Xeon: 0.275, 0.225, 0.235
    assert kept <= 0.6 and lost >= 0.9
