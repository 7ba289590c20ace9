# Pascal Context, 59 classes (VOC2010 + SegmentationClassContext masks: 0 = background,
# ignored under reduce_zero_label): mmseg's dataset config, with the per-sample checks of
# ade20k.py in its pipelines.
_base_ = ['mmseg::_base_/datasets/pascal_context_59.py']
num_classes = 59
img_scale = (520, 520)
crop_size = (480, 480)
train_pipeline = [
    dict(type='CheckedLoading', num_classes=num_classes, skip_corrupt=False, transforms=[
        dict(type='LoadImageFromFile'), dict(type='LoadAnnotations', reduce_zero_label=True)]),
    dict(type='RandomResize', scale=img_scale, ratio_range=(0.5, 2.0), keep_ratio=True),
    dict(type='RandomCrop', crop_size=crop_size, cat_max_ratio=0.75),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PhotoMetricDistortion'),
    dict(type='PackSegInputs'),
]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='Resize', scale=img_scale, keep_ratio=True),
    dict(type='LoadAnnotations', reduce_zero_label=True),
    dict(type='CheckSegSample', num_classes=num_classes),
    dict(type='PackSegInputs'),
]
# per GPU: 8 GPUs x 2 = the 16 images per iteration of mmseg's Pascal Context configs (4 x 4)
train_dataloader = dict(batch_size=2, dataset=dict(pipeline=train_pipeline))
val_dataloader = dict(dataset=dict(pipeline=test_pipeline))
test_dataloader = val_dataloader
