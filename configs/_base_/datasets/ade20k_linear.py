# ADE20K as Meta's linear probe reads it (facebookresearch/dinov3 dinov3/eval/segmentation/transforms.py,
# CustomResize, RandomCropWithLabel, make_segmentation_train_transforms): the short side at 512 x r, r uniform
# in [0.5, 2.0], resized by PIL (torchvision's Resize of a PIL image, transforms.py:186: antialiased bilinear,
# nearest for labels), a 512 crop (at most 75% one class), a flip, then its PhotoMetricDistortion
# (transforms.py:431). Evaluation: the short side at 512, by PIL too.
_base_ = ['./ade20k.py']
train_pipeline = [
    dict(type='CheckedLoading', num_classes=150, skip_corrupt=False, transforms=[
        dict(type='LoadImageFromFile'),
        dict(type='LoadAnnotations', reduce_zero_label=True),
    ]),
    # Meta sets the short side only: a long side of 65536 never binds
    dict(type='RandomResize', scale=(65536, 512), ratio_range=(0.5, 2.0), keep_ratio=True, backend='pillow'),
    dict(type='RandomCrop', crop_size=(512, 512), cat_max_ratio=0.75),
    dict(type='RandomFlip', prob=0.5),
    dict(type='DINOv3PhotoMetricDistortion'),   # brightness +-32, contrast, saturation 0.5-1.5, hue +-0.5
    dict(type='PackSegInputs'),
]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='Resize', scale=(65536, 512), keep_ratio=True, backend='pillow'),
    dict(type='LoadAnnotations', reduce_zero_label=True),
    dict(type='CheckSegSample', num_classes=150),
    dict(type='PackSegInputs'),
]
train_dataloader = dict(dataset=dict(pipeline=train_pipeline))
val_dataloader = dict(dataset=dict(pipeline=test_pipeline))
test_dataloader = val_dataloader
