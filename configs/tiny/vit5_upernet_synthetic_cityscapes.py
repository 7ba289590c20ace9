# configs/cityscapes/vit5-base_upernet_cityscapes.py shrunk for CPU like vit5_upernet_synthetic.py:
# trained from scratch on `python tools/make_synthetic_data.py cityscapes data/synthetic` (128x256
# frames); the dataset class, label files, non-square crops and sliding-window test are the real config's.
_base_ = ['../cityscapes/vit5-base_upernet_cityscapes.py', '../_base_/tiny.py']
tiny = _base_.tiny
width = tiny.width
norm_cfg = tiny.norm_cfg
crop_size = (64, 128)
data_root = 'data/synthetic/cityscapes'
model = dict(
    data_preprocessor=dict(size=crop_size),
    backbone=dict(**tiny.backbone, **tiny.upernet.backbone),
    neck=tiny.upernet.neck,
    decode_head=tiny.upernet.decode_head,
    auxiliary_head=tiny.upernet.auxiliary_head,
    test_cfg=dict(crop_size=crop_size, stride=(43, 86)))
train_pipeline = [
    dict(type='CheckedLoading', num_classes=19, transforms=[
        dict(type='LoadImageFromFile'), dict(type='LoadAnnotations')]),
    dict(type='RandomResize', scale=(256, 128), ratio_range=(0.75, 1.5), keep_ratio=True),
    dict(type='RandomCrop', crop_size=crop_size, cat_max_ratio=0.75),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PhotoMetricDistortion'),
    dict(type='PackSegInputs'),
]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='Resize', scale=(256, 128), keep_ratio=True),
    dict(type='LoadAnnotations'),
    dict(type='CheckSegSample', num_classes=19),
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
