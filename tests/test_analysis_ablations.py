"""The ablation configs: each is the entry ViT-5 config with the paper's switch(es) flipped and
nothing else changed, builds its real backbone, and trains one optimizer step when shrunk."""
import pytest
import torch
from mmengine.config import Config
from mmengine.optim import build_optim_wrapper

from conftest import REPO
from test_models_heads import tiny_segmentor
from test_models_segmentor import _batch
from vit5seg.models.backbones.vit5 import VIT5_SWITCHES

ABLATIONS = REPO / 'configs' / 'ablations'
ENTRY = REPO / 'configs' / 'vit5_upernet_ade20k.py'
# file stem (without the vit5-base_ prefix and _upernet_ade20k suffix) -> the switches it flips
FLIPS = {
    'swiglu': dict(mlp_type='swiglu'),
    'swiglu_no-layerscale': dict(mlp_type='swiglu', layer_scale_init=0),
    'no-layerscale': dict(layer_scale_init=0),
    'no-rope': dict(use_rope=False),
    'layernorm': dict(norm_type='layernorm'),
    'register-no-rope': dict(register_rope=False),
    'no-registers': dict(num_registers=0),
    'no-qk-norm': dict(qk_norm=False),
    'qkv-bias': dict(qkv_bias=True),
    'llama-style': dict(mlp_type='swiglu', linear_bias=False, layer_scale_init=0, qk_norm=False),
    'gemma3-style': dict(mlp_type='geglu', sandwich_norm=True, linear_bias=False, layer_scale_init=0),
}


def _path(name):
    return ABLATIONS / f'vit5-base_{name}_upernet_ade20k.py'


def test_every_shipped_ablation_is_listed():
    shipped = sorted(p.name for p in ABLATIONS.glob('*.py'))
    assert shipped == sorted(_path(n).name for n in FLIPS)


@pytest.mark.parametrize('name', FLIPS)
def test_ablation_differs_from_vit5_only_in_its_switches(name):
    entry, ablation = Config.fromfile(str(ENTRY)).to_dict(), Config.fromfile(str(_path(name))).to_dict()
    backbone = ablation['model'].pop('backbone')
    entry_backbone = entry['model'].pop('backbone')
    # its own pretraining: the authors released only the full ViT-5
    assert backbone.pop('init_cfg') == dict(type='Pretrained',
                                            checkpoint=f'checkpoints/ablations/vit5-base_{name}_in1k.pth')
    entry_backbone.pop('init_cfg')
    flipped = {k: v for k, v in backbone.items() if entry_backbone.get(k, VIT5_SWITCHES.get(k)) != v}
    assert flipped == FLIPS[name]
    assert all(VIT5_SWITCHES[k] != v for k, v in FLIPS[name].items())
    for cfg in (entry, ablation):
        cfg.pop('filename', None)
        cfg.pop('variant', None)
    assert entry == ablation


@pytest.mark.parametrize('name', FLIPS)
def test_ablation_trains_one_step(name):
    torch.manual_seed(0)
    cfg = Config.fromfile(str(_path(name)))
    model = tiny_segmentor(_path(name)).train()
    settings = model.backbone.settings
    assert all(settings[k] == v for k, v in FLIPS[name].items())
    optim_wrapper = build_optim_wrapper(model, cfg.optim_wrapper)  # the config's own constructor
    # every trainable backbone tensor moves (the final norm is frozen: final_norm=False)
    before = {n: p.detach().clone() for n, p in model.backbone.named_parameters() if p.requires_grad}
    log_vars = model.train_step(_batch(2, (64, 64), classes=150), optim_wrapper)
    assert torch.isfinite(log_vars['loss'])
    changed = {n for n, p in model.backbone.named_parameters() if n in before and not torch.equal(p, before[n])}
    assert changed == set(before), f'not updated: {sorted(set(before) - changed)[:5]}'


def test_transplants_build_the_language_model_parts():
    gemma = tiny_segmentor(_path('gemma3-style')).backbone.blocks[0]
    assert gemma.post_attn_norm.weight.shape == gemma.post_mlp_norm.weight.shape
    assert gemma.mlp.act.approximate == 'tanh' and gemma.gamma_1 is None
    assert gemma.attn.proj.bias is None and gemma.mlp.fc2.bias is None and gemma.attn.q_norm.weight.numel() > 0
    llama = tiny_segmentor(_path('llama-style')).backbone.blocks[0]
    assert isinstance(llama.mlp.act, torch.nn.SiLU) and isinstance(llama.attn.q_norm, torch.nn.Identity)
    assert isinstance(llama.post_attn_norm, torch.nn.Identity) and llama.mlp.fc1_g.bias is None
