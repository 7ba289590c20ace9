# COCO instance segmentation as EoMT trains and evaluates it (datasets/coco_instance.py), in mmdet's
# CocoDataset and CocoMetric (mask AP, pycocotools, as EoMT's zoo reports it).
_base_ = ['mmdet::_base_/datasets/coco_instance.py']
image_size = (640, 640)
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations', with_bbox=True, with_mask=True),
    dict(type='RandomFlip', prob=0.5),
    dict(type='RandomResize', scale=image_size, ratio_range=(0.1, 2.0), keep_ratio=True),  # as panoptic
    dict(type='Pad', size=image_size, pad_val=dict(img=0)),
    dict(type='RandomCrop', crop_size=image_size, crop_type='absolute', recompute_bbox=True,
         allow_negative_crop=True),
    # a crop without an instance is drawn again (EoMT draws the same image again; mmdet another one)
    dict(type='FilterAnnotations', min_gt_bbox_wh=(1e-5, 1e-5), by_mask=True),
    dict(type='PackDetInputs'),
]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='Resize', scale=image_size, keep_ratio=True, backend='pillow'),
    dict(type='LoadAnnotations', with_bbox=True, with_mask=True),
    dict(type='PackDetInputs', meta_keys=('img_id', 'img_path', 'ori_shape', 'img_shape', 'scale_factor')),
]
# iteration-based, as the semantic configs: an infinite sampler (mmengine's epoch-based loop over an
# iteration count pauses 2 s at every epoch end)
train_dataloader = dict(
    batch_size=2, num_workers=4, sampler=dict(type='InfiniteSampler', shuffle=True), batch_sampler=None,
    dataset=dict(filter_cfg=dict(filter_empty_gt=True, min_size=0), pipeline=train_pipeline))
val_dataloader = dict(dataset=dict(pipeline=test_pipeline))
test_dataloader = val_dataloader
val_evaluator = dict(metric='segm')
test_evaluator = val_evaluator
auto_scale_lr = dict(enable=False, base_batch_size=16)
