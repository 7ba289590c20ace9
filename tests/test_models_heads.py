"""Every head config: the real segmentor from the config file, shrunk to a tiny backbone,
trains one step (finite loss, gradients in the backbone) and predicts whole-image and
sliding-window on a non-square image."""
import importlib.util

import pytest
import torch
from mmengine.config import Config, ConfigDict
from mmseg.registry import MODELS

from conftest import REPO
from test_models_segmentor import _batch
from vit5seg.models.builder import tiny_segmentor  # the configs' segmentor, 4 blocks 96 wide

HEADS = ['fcn', 'pspnet', 'deeplabv3plus', 'segformer', 'segmenter', 'setr-pup', 'setr-mla', 'dpt', 'mask2former']
HAS_MMDET = importlib.util.find_spec('mmdet') is not None


@pytest.mark.parametrize('head', HEADS)
def test_head_trains_and_predicts(head):
    if head == 'mask2former' and not HAS_MMDET:
        pytest.skip('Mask2Former needs mmdet: pip install -e .[mask2former]')  # installed in CI
    model = tiny_segmentor(REPO / 'configs' / 'heads' / f'vit5_{head}_ade20k.py').train()
    data = model.data_preprocessor(_batch(2, (64, 64), classes=150), training=True)
    losses = model(**data, mode='loss')
    loss = sum(v for k, v in losses.items() if 'loss' in k)
    assert torch.isfinite(loss)
    loss.backward()
    grad = model.backbone.blocks[0].attn.qkv.weight.grad
    assert grad is not None and grad.abs().sum() > 0

    model.eval()
    for test_cfg in (dict(mode='whole'), dict(mode='slide', crop_size=(64, 64), stride=(48, 48))):
        model.test_cfg = ConfigDict(test_cfg)
        with torch.no_grad():
            pred = model(**model.data_preprocessor(_batch(1, (72, 100), classes=150), training=False),
                         mode='predict')
        assert pred[0].seg_logits.data.shape == (150, 72, 100), test_cfg
        assert pred[0].pred_sem_seg.data.shape == (1, 72, 100)


def test_every_head_config_is_tested():
    shipped = sorted(p.stem[len('vit5_'):-len('_ade20k')] for p in (REPO / 'configs' / 'heads').glob('vit5_*.py'))
    assert shipped == sorted(HEADS)


GUIDE_UPERNET = """
_base_ = ['mmseg::vit/vit_vit-b16_mln_upernet_8xb2-80k_ade20k-512x512.py']
custom_imports = dict(imports=['vit5seg'], allow_failed_imports=False)
model = dict(pretrained='checkpoints/vit5_base_patch16_224.pth',
             backbone=dict(_delete_=True, type='ViT5', arch='vit5-base', out_indices=(2, 5, 8, 11)))
"""
GUIDE_SEGMENTER = """
_base_ = ['mmseg::segmenter/segmenter_vit-b_mask_8xb1-160k_ade20k-512x512.py']
custom_imports = dict(imports=['vit5seg'], allow_failed_imports=False)
model = dict(pretrained='checkpoints/vit5_base_patch16_224.pth',
             backbone=dict(_delete_=True, type='ViT5', arch='vit5-base', out_indices=(11,), final_norm=True))
"""


@pytest.mark.parametrize('text', [GUIDE_UPERNET, GUIDE_SEGMENTER], ids=['upernet-vit', 'segmenter'])
def test_docs_guide_mmseg_vit_configs_take_vit5_by_the_backbone_dict(tmp_path, text):
    guide = (REPO / 'docs' / 'configs.md').read_text()
    assert text.strip() in guide  # the guide shows exactly what is tested here
    path = tmp_path / 'cfg.py'
    path.write_text(text)
    cfg = Config.fromfile(str(path))
    assert cfg.model.backbone.type == 'ViT5' and cfg.model.pretrained.endswith('vit5_base_patch16_224.pth')
    full = MODELS.build(cfg.model)  # real size (Segmenter's head cannot be built on 'meta')
    assert full.backbone.embed_dims == 768 and full.backbone.init_cfg == dict(type='Pretrained', checkpoint='checkpoints/vit5_base_patch16_224.pth')
    model = tiny_segmentor(path).eval()
    with torch.no_grad():
        pred = model(**model.data_preprocessor(_batch(1, (72, 100), classes=150), training=False), mode='predict')
    assert pred[0].seg_logits.data.shape == (150, 72, 100)
