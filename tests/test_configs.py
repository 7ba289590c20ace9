"""Every shipped config loads, builds, and states the protocol; each ViT-5 config has a
DeiT-III twin that differs only in the backbone."""
from pathlib import Path

import pytest
import torch
from mmengine.config import Config
from mmseg.registry import MODELS
from mmseg.utils import register_all_modules

from conftest import REPO

# the UperNet configs; configs/heads/ are built and run in test_models_heads.py, the EoMT ones in test_models_eomt.py,
# the frozen-encoder ones (linear/, pmt/) below
CONFIGS = sorted(p for p in (REPO / 'configs').rglob('*.py')
                 if not {'_base_', 'heads', 'eomt', 'linear', 'pmt'} & set(p.parts) and 'eomt' not in p.name
                 and 'pmt' not in p.name)
LINEAR = sorted((REPO / 'configs' / 'linear').glob('*.py'))
VIT5 = [p for p in CONFIGS if p.name.startswith('vit5') and not {'tiny', 'ablations'} & set(p.parts)]
# dataset -> (folder, name suffix, classes, crop, per-GPU batch, test mode, data_root)
BENCHMARKS = {
    'cityscapes': ('cityscapes', 'cityscapes', 19, (512, 1024), 1, 'slide', 'data/cityscapes/'),
    'pascal_context': ('pascal_context', 'pascal_context_59', 59, (480, 480), 2, 'slide', 'data/VOCdevkit/VOC2010/'),
    'coco_stuff': ('coco_stuff', 'coco_stuff164k', 171, (512, 512), 2, 'whole', 'data/coco_stuff164k'),
}


def _twin(path: Path) -> Path:
    if path.parent.name == 'configs' or path.parent.name in {b[0] for b in BENCHMARKS.values()}:
        return path.with_name(path.name.replace('vit5', 'deit3'))
    return REPO / 'configs' / 'deit3' / path.name.replace('vit5', 'deit3')


@pytest.mark.parametrize('path', CONFIGS, ids=lambda p: str(p.relative_to(REPO / 'configs')))
def test_config_builds(path):
    register_all_modules(init_default_scope=True)
    cfg = Config.fromfile(str(path))
    with torch.device('meta'):  # real sizes, no memory, no weights loaded
        model = MODELS.build(cfg.model)
    backbone = model.backbone
    assert cfg.model.decode_head.in_channels == [backbone.embed_dims] * 4
    assert cfg.model.neck.embed_dim == cfg.model.auxiliary_head.in_channels == backbone.embed_dims
    assert len(backbone.out_indices) == 4 and backbone.out_indices[-1] == backbone.num_layers - 1
    assert cfg.custom_imports.imports == ['vit5seg']


@pytest.mark.parametrize('path', [p for p in VIT5], ids=lambda p: p.name)
def test_every_vit5_config_has_a_deit3_twin_with_the_same_protocol(path):
    vit5, deit3 = Config.fromfile(str(path)), Config.fromfile(str(_twin(path)))
    a, b = vit5.to_dict(), deit3.to_dict()
    assert a['model']['backbone'].pop('arch').replace('vit5', 'deit3') == b['model']['backbone'].pop('arch')
    assert 'deit_3' in b['model']['backbone'].pop('init_cfg')['checkpoint']
    a['model']['backbone'].pop('init_cfg')
    for cfg in (a, b):
        cfg.pop('filename', None)
    assert a == b


@pytest.mark.parametrize('path', LINEAR, ids=lambda p: p.name)
def test_linear_probe_config_builds_a_frozen_encoder_and_differs_from_its_vit5_twin_only_in_it(path):
    register_all_modules(init_default_scope=True)
    cfg = Config.fromfile(str(path))
    with torch.device('meta'):
        model = MODELS.build(cfg.model)
    assert model.backbone.frozen and model.decode_head.in_channels == model.backbone.embed_dims
    assert model.backbone.out_indices == (model.backbone.num_layers - 1,) and model.backbone.final_norm
    family = path.name.split('-')[0]
    twin = Config.fromfile(str(path.with_name(path.name.replace(family, 'vit5', 1)))).to_dict()
    mine = cfg.to_dict()
    for one in (mine, twin):
        one.pop('filename', None)
        for key in ('arch', 'init_cfg', 'img_size'):
            one['model']['backbone'].pop(key, None)
    assert mine == twin


def test_tiny_deit3_twin_differs_only_in_the_preset():
    vit5 = Config.fromfile(str(REPO / 'configs' / 'tiny' / 'vit5_upernet_synthetic.py')).to_dict()
    deit3 = Config.fromfile(str(REPO / 'configs' / 'tiny' / 'deit3_upernet_synthetic.py')).to_dict()
    assert (vit5['model']['backbone'].pop('arch'), deit3['model']['backbone'].pop('arch')) == ('vit5-small',
                                                                                             'deit3-small')
    for cfg in (vit5, deit3):
        cfg.pop('filename', None)
    assert vit5 == deit3
    register_all_modules(init_default_scope=True)
    cfg = Config.fromfile(str(REPO / 'configs' / 'tiny' / 'deit3_upernet_synthetic.py'))
    backbone = MODELS.build(cfg.model).backbone
    assert (backbone.embed_dims, backbone.num_layers, backbone.num_heads) == (64, 4, 2)
    assert backbone.settings['norm_type'] == 'layernorm' and backbone.rope is None and backbone.reg_token is None


def test_entry_config_is_the_protocol():
    cfg = Config.fromfile(str(REPO / 'configs' / 'vit5_upernet_ade20k.py'))
    assert cfg.model.backbone.arch == 'vit5-base' and cfg.model.backbone.init_cfg.type == 'Pretrained'
    assert cfg.model.decode_head.type == 'UPerHead' and cfg.model.decode_head.channels == 512
    assert cfg.model.decode_head.num_classes == 150 and cfg.model.auxiliary_head.loss_decode.loss_weight == 0.4
    assert cfg.model.neck.type == 'Feature2Pyramid' and cfg.model.neck.rescales == [4, 2, 1, 0.5]
    opt = cfg.optim_wrapper.optimizer
    assert (opt.type, opt.lr, opt.weight_decay, opt.betas) == ('AdamW', 6e-5, 0.01, (0.9, 0.999))
    warmup, poly = cfg.param_scheduler
    assert (warmup.type, warmup.end, warmup.start_factor) == ('LinearLR', 1500, 1e-6)
    assert (poly.type, poly.power, poly.end) == ('PolyLR', 1.0, 160000)
    assert cfg.train_cfg.max_iters == 160000 and cfg.train_cfg.val_interval == 16000
    assert cfg.train_dataloader.batch_size * 8 == cfg.auto_scale_lr.base_batch_size == 16
    assert cfg.train_dataloader.dataset.data_root == 'data/ade/ADEChallengeData2016'
    assert cfg.model.data_preprocessor.size == (512, 512)
    assert cfg.default_hooks.checkpoint.save_best == 'mIoU'


@pytest.mark.parametrize('dataset', sorted(BENCHMARKS))
def test_benchmark_configs_follow_mmseg_protocols(dataset):
    folder, name, classes, crop, batch, mode, data_root = BENCHMARKS[dataset]
    for size in ('small', 'base', 'large'):
        for model in ('vit5', 'deit3'):
            assert (REPO / 'configs' / folder / f'{model}-{size}_upernet_{name}.py').is_file()
    cfg = Config.fromfile(str(REPO / 'configs' / folder / f'vit5-base_upernet_{name}.py'))
    assert cfg.crop_size == crop and cfg.model.data_preprocessor.size == crop
    assert cfg.model.decode_head.num_classes == cfg.model.auxiliary_head.num_classes == classes
    assert cfg.train_dataloader.dataset.data_root == data_root and cfg.train_dataloader.batch_size == batch
    assert cfg.auto_scale_lr.base_batch_size == 8 * batch
    assert cfg.model.test_cfg.mode == mode
    if mode == 'slide':
        assert cfg.model.test_cfg.crop_size == crop
    assert cfg.train_cfg.max_iters == cfg.param_scheduler[1].end == 80000 and cfg.train_cfg.val_interval == 8000
    assert cfg.optim_wrapper.optimizer.lr == 6e-5 and cfg.param_scheduler[0].end == 1500
    assert cfg.model.backbone.init_cfg.checkpoint.endswith('vit5_base_patch16_224.pth')
    # mmseg's dataset config underneath, vit5seg's checks in both pipelines
    pipeline = cfg.train_dataloader.dataset.pipeline
    assert pipeline[0]['type'] == 'CheckedLoading' and pipeline[0]['num_classes'] == classes
    assert pipeline[2] == dict(type='RandomCrop', crop_size=crop, cat_max_ratio=0.75)
    assert [t['type'] for t in cfg.test_dataloader.dataset.pipeline][2:4] == ['LoadAnnotations', 'CheckSegSample']
    assert cfg.tta_pipeline[1]['type'] == 'TestTimeAug'  # inherited from mmseg's file


def test_ld_variants_use_the_beit_recipe():
    cfg = Config.fromfile(str(REPO / 'configs' / 'vit5' / 'vit5-base_upernet_ade20k_ld.py'))
    assert cfg.optim_wrapper.optimizer.lr == 1e-4 and cfg.optim_wrapper.optimizer.weight_decay == 0.05
    assert cfg.optim_wrapper.paramwise_cfg.layer_decay_rate == 0.65 and cfg.model.decode_head.channels == 768


@pytest.mark.parametrize('dataset', sorted(BENCHMARKS))
def test_tiny_twins_shrink_only_the_model_sizes_and_schedule(dataset):
    folder, name = BENCHMARKS[dataset][:2]
    real = Config.fromfile(str(REPO / 'configs' / folder / f'vit5-base_upernet_{name}.py'))
    tiny = Config.fromfile(str(REPO / 'configs' / 'tiny' / f'vit5_upernet_synthetic_{dataset}.py'))
    assert tiny.train_dataloader.dataset.data_root.startswith('data/synthetic/')
    assert tiny.train_dataloader.dataset.type == real.train_dataloader.dataset.type
    assert tiny.model.test_cfg.mode == real.model.test_cfg.mode
    assert tiny.model.decode_head.num_classes == real.model.decode_head.num_classes
    for key in ('type', 'ann_file', 'data_prefix'):
        assert tiny.val_dataloader.dataset.get(key) == real.val_dataloader.dataset.get(key)
    assert [t['type'] for t in tiny.train_pipeline] == [t['type'] for t in real.train_pipeline]


def test_tiny_config_inherits_the_real_pipeline():
    cfg = Config.fromfile(str(REPO / 'configs' / 'tiny' / 'vit5_upernet_synthetic.py'))
    assert cfg.train_dataloader.dataset.data_root == 'data/synthetic_ade20k/ADEChallengeData2016'
    assert [t['type'] for t in cfg.train_pipeline] == [
        'CheckedLoading', 'RandomResize', 'RandomCrop', 'RandomFlip', 'PhotoMetricDistortion', 'PackSegInputs']
    assert [t['type'] for t in cfg.train_pipeline[0]['transforms']] == ['LoadImageFromFile', 'LoadAnnotations']
    assert cfg.optim_wrapper.constructor == 'ViT5OptimWrapperConstructor'
    assert cfg.model.decode_head.type == 'UPerHead' and cfg.model.neck.type == 'Feature2Pyramid'
