"""The demo's training measurably learns, and its trained model under bf16 autocast
(tools/test.py --amp, init_model(amp=)) keeps its labels and mIoU."""
import json
from pathlib import Path

import pytest
import torch

from conftest import REPO, run_script
from vit5seg.datasets import make_synthetic_ade20k

pytestmark = pytest.mark.slow


def _run(args, cwd):
    out = run_script(*args, cwd=cwd)
    assert out.returncode == 0, (out.stdout[-2000:], out.stderr[-4000:])
    return out.stdout + out.stderr


def test_demo_training_learns(tmp_path):
    from mmengine.config import Config
    from mmseg.registry import MODELS
    from mmseg.utils import register_all_modules

    from vit5seg.demo import TINY_CONFIG, run

    data = tmp_path / 'data'
    make_synthetic_ade20k(data, num_train=32, num_val=8, size=96, seed=2)
    register_all_modules(init_default_scope=True)
    untrained = MODELS.build(Config.fromfile(str(TINY_CONFIG)).model)
    untrained.init_weights()
    torch.save({'state_dict': untrained.state_dict()}, tmp_path / 'untrained.pth')
    root = data / 'ADEChallengeData2016'
    opts = [f'{k}.dataset.data_root={root}' for k in ('train_dataloader', 'val_dataloader', 'test_dataloader')]
    _run([REPO / 'tools' / 'test.py', TINY_CONFIG, tmp_path / 'untrained.pth', '--work-dir', tmp_path / 'u',
          '--cfg-options', *opts], tmp_path)
    before = json.loads(sorted((tmp_path / 'u').glob('*/*.json'))[-1].read_text())['mIoU']
    metrics, checkpoint, overlays = run(tmp_path / 'demo', data, iters=60)  # mIoU 43 here, from 0.6: far past the bar
    assert Path(checkpoint).is_file() and len(overlays) == 8
    assert metrics['mIoU'] > before + 15, (before, metrics)

    # the trained model under bf16 autocast (issue #17): tools/test.py --amp and init_model(amp=)
    _run([REPO / 'tools' / 'test.py', TINY_CONFIG, checkpoint, '--amp', '--work-dir', tmp_path / 'amp',
          '--cfg-options', *opts], tmp_path)
    amp_metrics = json.loads(sorted((tmp_path / 'amp').glob('*/*.json'))[-1].read_text())
    assert abs(amp_metrics['mIoU'] - metrics['mIoU']) <= 0.5, (amp_metrics, metrics)
    from vit5seg.apis import inference_model, init_model
    images = sorted(str(p) for p in (root / 'images' / 'validation').glob('*.jpg'))
    fp32, bf16 = (init_model(TINY_CONFIG, checkpoint, device='cpu', amp=amp) for amp in (None, 'bf16'))
    assert bf16.forward.amp_dtype == torch.bfloat16
    agree = [(a.pred_sem_seg.data == b.pred_sem_seg.data).float().mean().item()
             for a, b in zip(inference_model(fp32, images), inference_model(bf16, images))]
    assert min(agree) >= 0.99, agree
