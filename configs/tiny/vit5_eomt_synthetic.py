# The EoMT config shrunk for CPU, the twin of vit5_upernet_synthetic.py: the same narrow 4-block
# ViT-5 from scratch, data and 300-iteration budget; queries in the last 2 blocks.
_base_ = ['../eomt/vit5-base_eomt_ade20k.py', '../_base_/tiny.py']
tiny = _base_.tiny
width = tiny.width
crop_size = (96, 96)
data_root = 'data/synthetic_ade20k/ADEChallengeData2016'
model = dict(
    data_preprocessor=dict(size=crop_size),
    backbone=tiny.backbone,
    decode_head=dict(in_channels=width, num_queries=16, num_blocks=2,
                     train_cfg=dict(num_points=1024)),  # 24x24 mask maps: 12544 points would be 20 per pixel
    test_cfg=dict(_delete_=True, mode='whole'))
train_pipeline = [
    dict(type='CheckedLoading', num_classes=150, transforms=[
        dict(type='LoadImageFromFile'), dict(type='LoadAnnotations', reduce_zero_label=True)]),
    dict(type='RandomResize', scale=(160, 128), ratio_range=(0.75, 1.5), keep_ratio=True),
    dict(type='RandomCrop', crop_size=crop_size, cat_max_ratio=0.75),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PhotoMetricDistortion'),
    dict(type='PackSegInputs'),
]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='Resize', scale=(160, 128), keep_ratio=True),
    dict(type='LoadAnnotations', reduce_zero_label=True),
    dict(type='CheckSegSample', num_classes=150),
    dict(type='PackSegInputs'),
]
train_dataloader = dict(**tiny.train_loader, dataset=dict(data_root=data_root, pipeline=train_pipeline))
auto_scale_lr = tiny.auto_scale_lr
val_dataloader = dict(**tiny.test_loader, dataset=dict(data_root=data_root, pipeline=test_pipeline))
test_dataloader = val_dataloader
max_iters = tiny.max_iters
# float32 on CPU; from scratch: a larger lr and a looser clip than the pretrained recipe
optim_wrapper = dict(
    _delete_=True, type='OptimWrapper',
    optimizer=dict(type='AdamW', lr=1e-3, betas=(0.9, 0.999), weight_decay=0.05),
    clip_grad=dict(max_norm=1.0, norm_type=2),
    constructor='ViT5OptimWrapperConstructor',
    paramwise_cfg=dict(layer_decay_rate=0.8, layer_numbering='eomt', decay_all=True))
param_scheduler = [
    dict(type='TwoStageWarmupPolyLR', warmup_new=10, warmup_backbone=10, power=0.9, by_epoch=False,
         begin=0, end=max_iters),
]
train_cfg = tiny.train_cfg
default_hooks = tiny.default_hooks
# consecutive sixths of the 300 iterations for the 2 masked blocks (as the tiny runs in docs/eomt.md)
custom_hooks = [
    dict(type='NonFiniteLossHook', action='stop'),
    dict(type='RandomStateHook'),
    dict(type='SkippedSampleHook'),
    dict(type='EoMTMaskAnnealingHook', starts=[50, 100], ends=[100, 150]),
]
