# COCO instance segmentation as EoMT trains and evaluates it (datasets/coco_instance.py), in mmdet's CocoDataset
# and CocoMetric (mask AP, pycocotools, as EoMT's zoo reports it). mmdet 3.3.0's
# configs/_base_/datasets/coco_instance.py written out with EoMT's pipelines (det_runtime.py says why).
data_root = 'data/coco/'
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
train_dataloader = dict(
    batch_size=2, num_workers=4, persistent_workers=True, sampler=dict(type='InfiniteSampler', shuffle=True),
    batch_sampler=None,
    dataset=dict(type='CocoDataset', data_root=data_root, ann_file='annotations/instances_train2017.json',
                 data_prefix=dict(img='train2017/'), filter_cfg=dict(filter_empty_gt=True, min_size=0),
                 pipeline=train_pipeline, backend_args=None))
val_dataloader = dict(
    batch_size=1, num_workers=2, persistent_workers=True, drop_last=False,
    sampler=dict(type='DefaultSampler', shuffle=False),
    dataset=dict(type='CocoDataset', data_root=data_root, ann_file='annotations/instances_val2017.json',
                 data_prefix=dict(img='val2017/'), test_mode=True, pipeline=test_pipeline, backend_args=None))
test_dataloader = val_dataloader
val_evaluator = dict(type='CocoMetric', ann_file=data_root + 'annotations/instances_val2017.json', metric='segm',
                     format_only=False, backend_args=None)
test_evaluator = val_evaluator
auto_scale_lr = dict(enable=False, base_batch_size=16)
