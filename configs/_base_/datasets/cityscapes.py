# Cityscapes fine, 19 classes (gtFine/*_labelTrainIds.png, 255 ignored): mmseg's dataset
# config, with the per-sample checks of ade20k.py in its pipelines.
_base_ = ['mmseg::_base_/datasets/cityscapes.py']
num_classes = 19
crop_size = (512, 1024)
train_pipeline = [
    dict(type='CheckedLoading', num_classes=num_classes, skip_corrupt=False, transforms=[
        dict(type='LoadImageFromFile'), dict(type='LoadAnnotations')]),
    dict(type='RandomResize', scale=(2048, 1024), ratio_range=(0.5, 2.0), keep_ratio=True),
    dict(type='RandomCrop', crop_size=crop_size, cat_max_ratio=0.75),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PhotoMetricDistortion'),
    dict(type='PackSegInputs'),
]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='Resize', scale=(2048, 1024), keep_ratio=True),
    dict(type='LoadAnnotations'),
    dict(type='CheckSegSample', num_classes=num_classes),
    dict(type='PackSegInputs'),
]
# per GPU: 8 GPUs x 1 = the 8 images per iteration of mmseg's 80k Cityscapes configs (4 x 2)
train_dataloader = dict(batch_size=1, num_workers=4, dataset=dict(pipeline=train_pipeline))
val_dataloader = dict(dataset=dict(pipeline=test_pipeline))
test_dataloader = val_dataloader
