# ADE20K panoptic as EoMT trains and evaluates it (datasets/ade20k_panoptic.py: colour jitter on, the COCO
# jitter), in mmdet's ADE20KPanopticDataset (its 100 thing classes first, then the 50 stuff) and
# CocoPanopticMetric, on the panoptic annotations tools/prepare_ade20k.py --panoptic writes as mmdet's
# ade20k2coco.py does. coco_panoptic_eomt.py's loaders, sampler and metric otherwise.
_base_ = ['./coco_panoptic_eomt.py']
data_root = 'data/ade/ADEChallengeData2016/'
image_size = (640, 640)
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadPanopticAnnotations', with_bbox=True, with_mask=True, with_seg=True),
    dict(type='mmseg.EoMTColorJitter', brightness_delta=32, contrast=0.5, saturation=0.5, hue_delta=18),
    dict(type='RandomFlip', prob=0.5),
    dict(type='RandomResize', scale=image_size, ratio_range=(0.1, 2.0), keep_ratio=True),
    dict(type='Pad', size=image_size, pad_val=dict(img=0, seg=255)),
    dict(type='RandomCrop', crop_size=image_size, crop_type='absolute', recompute_bbox=True,
         allow_negative_crop=True),
    dict(type='FilterAnnotations', min_gt_bbox_wh=(1e-5, 1e-5), by_mask=True, keep_empty=False),
    dict(type='PackDetInputs'),
]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='Resize', scale=image_size, keep_ratio=True, backend='pillow'),
    dict(type='LoadPanopticAnnotations'),
    dict(type='PackDetInputs', meta_keys=('img_id', 'img_path', 'ori_shape', 'img_shape', 'scale_factor')),
]
train_dataloader = dict(
    dataset=dict(type='ADE20KPanopticDataset', data_root=data_root, ann_file='ade20k_panoptic_train.json',
                 data_prefix=dict(img='images/training/', seg='ade20k_panoptic_train/'), pipeline=train_pipeline))
val_dataloader = dict(
    dataset=dict(type='ADE20KPanopticDataset', data_root=data_root, ann_file='ade20k_panoptic_val.json',
                 data_prefix=dict(img='images/validation/', seg='ade20k_panoptic_val/'), pipeline=test_pipeline))
test_dataloader = val_dataloader
val_evaluator = dict(ann_file=data_root + 'ade20k_panoptic_val.json', seg_prefix=data_root + 'ade20k_panoptic_val/')
test_evaluator = val_evaluator
