# configs/coco_stuff/vit5-base_upernet_coco_stuff164k.py shrunk for CPU like vit5_upernet_synthetic.py:
# trained from scratch on `python tools/make_synthetic_data.py coco_stuff data/synthetic`
# (128x171 images); the dataset class, label files (171 train ids, 255 ignored) and test are the real config's.
_base_ = ['../coco_stuff/vit5-base_upernet_coco_stuff164k.py']
width = 64
norm_cfg = dict(type='BN', requires_grad=True)  # SyncBN needs GPUs
crop_size = (96, 96)
data_root = 'data/synthetic/coco_stuff164k'
model = dict(
    data_preprocessor=dict(size=crop_size),
    backbone=dict(arch='vit5-small', embed_dims=width, num_layers=4, num_heads=2, out_indices=(0, 1, 2, 3),
                  drop_path_rate=0.0, init_cfg=None),
    neck=dict(embed_dim=width, norm_cfg=norm_cfg),
    decode_head=dict(in_channels=[width] * 4, channels=32, norm_cfg=norm_cfg),
    auxiliary_head=dict(in_channels=width, channels=16, norm_cfg=norm_cfg))
train_pipeline = [
    dict(type='CheckedLoading', num_classes=171, transforms=[
        dict(type='LoadImageFromFile'), dict(type='LoadAnnotations')]),
    dict(type='RandomResize', scale=(160, 128), ratio_range=(0.75, 1.5), keep_ratio=True),
    dict(type='RandomCrop', crop_size=crop_size, cat_max_ratio=0.75),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PhotoMetricDistortion'),
    dict(type='PackSegInputs'),
]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='Resize', scale=(160, 128), keep_ratio=True),
    dict(type='LoadAnnotations'),
    dict(type='CheckSegSample', num_classes=171),
    dict(type='PackSegInputs'),
]
train_dataloader = dict(batch_size=8, num_workers=1, persistent_workers=False,
                        dataset=dict(data_root=data_root, pipeline=train_pipeline))
auto_scale_lr = dict(base_batch_size=8)  # one process x 8: the images per iteration its lr was set for
val_dataloader = dict(num_workers=1, persistent_workers=False,
                      dataset=dict(data_root=data_root, pipeline=test_pipeline))
test_dataloader = val_dataloader
max_iters = 300
optim_wrapper = dict(optimizer=dict(lr=1e-3))  # from scratch: no pretrained backbone
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-3, by_epoch=False, begin=0, end=20),
    dict(type='PolyLR', power=1.0, eta_min=0.0, by_epoch=False, begin=20, end=max_iters),
]
train_cfg = dict(max_iters=max_iters, val_interval=max_iters)
default_hooks = dict(logger=dict(interval=10),
                     checkpoint=dict(interval=100, save_best=None, max_keep_ckpts=2))
