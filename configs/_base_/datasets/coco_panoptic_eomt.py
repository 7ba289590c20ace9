# COCO panoptic as EoMT trains and evaluates it (datasets/coco_panoptic.py, datasets/transforms.py), in mmdet's
# CocoPanopticDataset and CocoPanopticMetric (PQ, SQ, RQ; things and stuff). mmdet 3.3.0's
# configs/_base_/datasets/coco_panoptic.py written out with EoMT's pipelines (det_runtime.py says why).
data_root = 'data/coco/'
image_size = (640, 640)
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadPanopticAnnotations', with_bbox=True, with_mask=True, with_seg=True),
    dict(type='RandomFlip', prob=0.5),
    # EoMT's large-scale jitter: the image fits a 640 square times a factor in [0.1, 2.0]; no colour jitter
    dict(type='RandomResize', scale=image_size, ratio_range=(0.1, 2.0), keep_ratio=True),
    dict(type='Pad', size=image_size, pad_val=dict(img=0, seg=255)),  # raw 0, before the crop, as EoMT
    dict(type='RandomCrop', crop_size=image_size, crop_type='absolute', recompute_bbox=True,
         allow_negative_crop=True),
    # segments the crop emptied are dropped; a crop of stuff only is kept (no things is no error)
    dict(type='FilterAnnotations', min_gt_bbox_wh=(1e-5, 1e-5), by_mask=True, keep_empty=False),
    dict(type='PackDetInputs'),
]
# EoMT's evaluation input: the long side at 640 (PIL's bilinear, as EoMT), padded with raw 0 to 640x640
# by the model's EoMTDetDataPreprocessor
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='Resize', scale=image_size, keep_ratio=True, backend='pillow'),
    dict(type='LoadPanopticAnnotations'),
    dict(type='PackDetInputs', meta_keys=('img_id', 'img_path', 'ori_shape', 'img_shape', 'scale_factor')),
]
# 16 images per iteration, EoMT's batch; dist_train.sh keeps them on 1-8 GPUs by accumulation. Iteration-based,
# as the semantic configs: an infinite sampler (an epoch-based sampler pauses mmengine's iteration loop 2 s an epoch)
train_dataloader = dict(
    batch_size=2, num_workers=4, persistent_workers=True, sampler=dict(type='InfiniteSampler', shuffle=True),
    batch_sampler=None,
    # every image with a segment, thing or stuff, as EoMT keeps them (mmdet's filter_empty_gt: a non-crowd thing)
    dataset=dict(type='EoMTCocoPanopticDataset', data_root=data_root, ann_file='annotations/panoptic_train2017.json',
                 data_prefix=dict(img='train2017/', seg='annotations/panoptic_train2017/'),
                 pipeline=train_pipeline, backend_args=None))
val_dataloader = dict(
    batch_size=1, num_workers=2, persistent_workers=True, drop_last=False,
    sampler=dict(type='DefaultSampler', shuffle=False),
    dataset=dict(type='CocoPanopticDataset', data_root=data_root, ann_file='annotations/panoptic_val2017.json',
                 data_prefix=dict(img='val2017/', seg='annotations/panoptic_val2017/'), test_mode=True,
                 pipeline=test_pipeline, backend_args=None))
test_dataloader = val_dataloader
val_evaluator = dict(type='CocoPanopticMetric', ann_file=data_root + 'annotations/panoptic_val2017.json',
                     seg_prefix=data_root + 'annotations/panoptic_val2017/', backend_args=None)
test_evaluator = val_evaluator
auto_scale_lr = dict(enable=False, base_batch_size=16)
