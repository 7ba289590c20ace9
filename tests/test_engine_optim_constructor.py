"""Layer-wise lr decay and weight-decay exclusions on a real ViT5 segmentor."""
import pytest
from mmengine.config import Config
from mmengine.model.utils import revert_sync_batchnorm
from mmseg.registry import MODELS
from mmseg.utils import register_all_modules

from conftest import REPO
from vit5seg.engine import ViT5OptimWrapperConstructor


@pytest.fixture(scope='module')
def segmentor():
    register_all_modules(init_default_scope=True)
    cfg = Config.fromfile(str(REPO / 'configs' / 'tiny' / 'vit5_upernet_synthetic.py'))
    return revert_sync_batchnorm(MODELS.build(cfg.model))


def _groups_by_param(segmentor, rate, lr=1e-4, wd=0.05):
    constructor = ViT5OptimWrapperConstructor(
        dict(type='OptimWrapper', optimizer=dict(type='AdamW', lr=lr, weight_decay=wd)),
        dict(layer_decay_rate=rate))
    optimizer = constructor(segmentor).optimizer
    by_id = {id(p): g for g in optimizer.param_groups for p in g['params']}
    return {name: by_id[id(p)] for name, p in segmentor.named_parameters() if p.requires_grad}


def test_layer_decay_layer_by_layer(segmentor):
    depth = segmentor.backbone.num_layers  # 4
    groups = _groups_by_param(segmentor, rate=0.65)
    assert groups['backbone.pos_embed']['lr'] == pytest.approx(1e-4 * 0.65 ** (depth + 1))
    for name in ('backbone.patch_embed.proj.weight', 'backbone.cls_token', 'backbone.reg_token'):
        assert groups[name]['lr'] == pytest.approx(1e-4 * 0.65 ** (depth + 1)), name
    for i in range(depth):
        for leaf in ('attn.qkv.weight', 'mlp.fc2.bias', 'gamma_1', 'norm1.weight', 'attn.q_norm.weight'):
            g = groups[f'backbone.blocks.{i}.{leaf}']
            assert g['lr'] == pytest.approx(1e-4 * 0.65 ** (depth - i)), (i, leaf)
            assert g['layer_id'] == i + 1
    for name in ('decode_head.conv_seg.weight', 'neck.upsample_4x.0.weight', 'auxiliary_head.conv_seg.bias'):
        assert groups[name]['lr'] == pytest.approx(1e-4)


def test_no_weight_decay_on_norms_biases_gammas_tokens(segmentor):
    groups = _groups_by_param(segmentor, rate=1.0)
    zero = ['backbone.pos_embed', 'backbone.cls_token', 'backbone.reg_token', 'backbone.blocks.0.gamma_1',
            'backbone.blocks.0.gamma_2', 'backbone.blocks.0.norm1.weight', 'backbone.blocks.0.attn.k_norm.weight',
            'backbone.blocks.0.attn.proj.bias', 'backbone.patch_embed.proj.bias', 'decode_head.conv_seg.bias',
            'decode_head.bottleneck.bn.weight']
    decayed = ['backbone.blocks.0.attn.qkv.weight', 'backbone.blocks.3.mlp.fc1.weight',
               'backbone.patch_embed.proj.weight', 'decode_head.conv_seg.weight', 'neck.upsample_4x.0.weight']
    for name in zero:
        assert groups[name]['weight_decay'] == 0, name
    for name in decayed:
        assert groups[name]['weight_decay'] == 0.05, name
    assert len({g['lr'] for g in groups.values()}) == 1  # rate 1: one lr


def test_frozen_final_norm_is_left_out(segmentor):
    names = {n for n, p in segmentor.named_parameters() if p.requires_grad}
    assert 'backbone.norm.weight' not in names  # final_norm=False in the segmentation configs


def test_unknown_paramwise_key_is_refused(segmentor):
    with pytest.raises(ValueError, match="unknown paramwise_cfg keys \\['decay_rate'\\]"):
        ViT5OptimWrapperConstructor(dict(type='OptimWrapper', optimizer=dict(type='AdamW', lr=1e-4)),
                                    dict(decay_rate=0.9))(segmentor)


def test_mask2former_query_embeddings_get_no_weight_decay():
    from test_models_heads import HAS_MMDET, tiny_segmentor
    if not HAS_MMDET:
        pytest.skip('Mask2Former needs mmdet')  # installed in CI
    model = tiny_segmentor(REPO / 'configs' / 'heads' / 'vit5_mask2former_ade20k.py')
    groups = _groups_by_param(model, rate=1.0)
    for name in ('decode_head.query_embed.weight', 'decode_head.query_feat.weight', 'decode_head.level_embed.weight'):
        assert groups[name]['weight_decay'] == 0, name
    assert groups['decode_head.cls_embed.weight']['weight_decay'] == 0.05
