"""The PMT tiny twin end to end on CPU (issue #53): tools/train.py trains configs/tiny/vit5_pmt_synthetic.py on
synthetic ADE20K data from a given encoder file; no encoder tensor moves, the decoder's and the head's do, and
tools/test.py scores the trained model well above the untrained one (docs/pmt.md)."""
import re

import pytest
import torch
from mmengine.config import Config

from conftest import REPO, run_script
from vit5seg.datasets import make_synthetic_ade20k
from vit5seg.models.builder import build_segmentor

pytestmark = pytest.mark.slow
CONFIG = REPO / 'configs' / 'tiny' / 'vit5_pmt_synthetic.py'


def miou(out) -> float:
    return float(re.findall(r'mIoU: ([\d.]+)', out.stdout + out.stderr)[-1])


def test_the_tiny_pmt_trains_its_decoder_on_a_frozen_encoder(tmp_path):
    make_synthetic_ade20k(tmp_path / 'data' / 'synthetic_ade20k', num_train=32, num_val=8, size=96, seed=1)
    torch.manual_seed(0)
    untrained = build_segmentor(Config.fromfile(str(CONFIG)).model)
    encoder = {k: v.clone() for k, v in untrained.backbone.state_dict().items()}
    torch.save({'state_dict': encoder}, tmp_path / 'encoder.pth')
    torch.save({'state_dict': untrained.state_dict(), 'meta': {}}, tmp_path / 'untrained.pth')
    given = ['--cfg-options', f'model.backbone.pretrained={tmp_path / "encoder.pth"}']
    trained = run_script(REPO / 'tools' / 'train.py', CONFIG, '--work-dir', 'run', *given, cwd=tmp_path)
    assert trained.returncode == 0, trained.stderr[-3000:]
    first, last = (torch.load(tmp_path / 'run' / f'iter_{i}.pth', map_location='cpu', weights_only=False)['state_dict']
                   for i in (200, 300))   # max_keep_ckpts 2
    assert all(torch.equal(last[f'backbone.{k}'], v) for k, v in encoder.items())   # not one encoder tensor moved
    moved = [k for k in last if k.startswith(('decoder.', 'decode_head.')) and last[k].is_floating_point()
             and not torch.equal(first[k], last[k])]
    assert any(k.startswith('decoder.blocks.') for k in moved) and any(k.startswith('decoder.lateral') for k in moved)
    assert any(k.startswith('decode_head.class_head') for k in moved)
    before = run_script(REPO / 'tools' / 'test.py', CONFIG, tmp_path / 'untrained.pth', '--work-dir', 'before',
                        cwd=tmp_path)
    after = run_script(REPO / 'tools' / 'test.py', CONFIG, tmp_path / 'run' / 'iter_300.pth', '--work-dir', 'after',
                       cwd=tmp_path)
    assert before.returncode == 0 and after.returncode == 0, (before.stderr[-2000:], after.stderr[-2000:])
    print(f'tiny PMT mIoU: untrained {miou(before)}, trained {miou(after)}')   # docs/pmt.md
    assert miou(after) >= 40 and miou(after) >= miou(before) + 30


def test_the_tiny_panoptic_pmt_trains_in_mmdet_on_a_frozen_encoder(tmp_path):
    """The COCO panoptic twin: tools/train.py in mmdet's scope, the encoder untouched, PQ well above an untrained
    model's (tools/test.py)."""
    pytest.importorskip('panopticapi')
    from test_tools_panoptic_e2e import pq_table
    config = REPO / 'configs' / 'tiny' / 'vit5_pmt_coco_panoptic_synthetic.py'
    made = run_script(REPO / 'tools' / 'make_synthetic_data.py', 'coco_panoptic', 'data/synthetic', cwd=tmp_path)
    assert made.returncode == 0, made.stderr[-2000:]
    torch.manual_seed(0)
    from mmdet.registry import MODELS
    from mmengine.registry import DefaultScope
    with DefaultScope.overwrite_default_scope('mmdet'):
        untrained = MODELS.build(Config.fromfile(str(config)).model)
    encoder = {k: v.clone() for k, v in untrained.backbone.state_dict().items()}
    torch.save({'state_dict': encoder}, tmp_path / 'encoder.pth')
    torch.save({'state_dict': untrained.state_dict(), 'meta': {}}, tmp_path / 'untrained.pth')
    trained = run_script(REPO / 'tools' / 'train.py', config, '--work-dir', 'run', '--cfg-options',
                         f'model.backbone.pretrained={tmp_path / "encoder.pth"}', cwd=tmp_path)
    assert trained.returncode == 0, trained.stderr[-3000:]
    last = torch.load(tmp_path / 'run' / 'iter_200.pth', map_location='cpu', weights_only=False)['state_dict']
    assert all(torch.equal(last[f'backbone.{k}'], v) for k, v in encoder.items())
    before = run_script(REPO / 'tools' / 'test.py', config, tmp_path / 'untrained.pth', '--work-dir', 'before',
                        cwd=tmp_path)
    after = run_script(REPO / 'tools' / 'test.py', config, tmp_path / 'run' / 'iter_200.pth', '--work-dir', 'after',
                       cwd=tmp_path)
    assert before.returncode == 0 and after.returncode == 0, (before.stderr[-2000:], after.stderr[-2000:])
    pq_before, pq_after = (pq_table(out.stdout + out.stderr)['All'][0] for out in (before, after))
    print(f'tiny panoptic PMT PQ: untrained {pq_before}, trained {pq_after}')   # docs/pmt.md
    assert pq_after >= 25 and pq_after >= pq_before + 20
