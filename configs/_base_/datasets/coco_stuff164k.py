# COCO-Stuff 164k, 171 classes (annotations/*_labelTrainIds.png from mmseg's converter, 255
# ignored): mmseg's dataset config, with the per-sample checks of ade20k.py in its pipelines.
_base_ = ['mmseg::_base_/datasets/coco-stuff164k.py']
num_classes = 171
crop_size = (512, 512)
train_pipeline = [
    dict(type='CheckedLoading', num_classes=num_classes, skip_corrupt=False, transforms=[
        dict(type='LoadImageFromFile'), dict(type='LoadAnnotations')]),
    dict(type='RandomResize', scale=(2048, 512), ratio_range=(0.5, 2.0), keep_ratio=True),
    dict(type='RandomCrop', crop_size=crop_size, cat_max_ratio=0.75),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PhotoMetricDistortion'),
    dict(type='PackSegInputs'),
]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='Resize', scale=(2048, 512), keep_ratio=True),
    dict(type='LoadAnnotations'),
    dict(type='CheckSegSample', num_classes=num_classes),
    dict(type='PackSegInputs'),
]
# per GPU: 8 GPUs x 2 = the 16 images per iteration of mmseg's COCO-Stuff 164k configs (4 x 4)
train_dataloader = dict(batch_size=2, dataset=dict(pipeline=train_pipeline))
val_dataloader = dict(dataset=dict(pipeline=test_pipeline))
test_dataloader = val_dataloader
