# The entry config shrunk for CPU: a narrow 4-block ViT-5 trained from scratch on the
# synthetic ADE20K-layout data of `python tools/make_synthetic_ade20k.py data/synthetic_ade20k`.
# Used by the demo and the tests; everything not set here is the real protocol's.
_base_ = ['../vit5_upernet_ade20k.py', '../_base_/tiny.py']
tiny = _base_.tiny
width = tiny.width
norm_cfg = tiny.norm_cfg
crop_size = (96, 96)
data_root = 'data/synthetic_ade20k/ADEChallengeData2016'
model = dict(
    data_preprocessor=dict(size=crop_size),
    backbone=dict(**tiny.backbone, **tiny.upernet.backbone),
    neck=tiny.upernet.neck,
    decode_head=tiny.upernet.decode_head,
    auxiliary_head=tiny.upernet.auxiliary_head)
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
optim_wrapper = dict(optimizer=dict(lr=tiny.upernet_lr))
param_scheduler = tiny.upernet_schedule
train_cfg = tiny.train_cfg
default_hooks = tiny.default_hooks
