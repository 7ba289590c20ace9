# EoMT's ADE20K panoptic DINOv2-L model at 1280 (configs/dinov2/ade20k/panoptic/eomt_large_1280.yaml, 51.7 PQ):
# the 640 model (dinov2-large_eomt_ade20k-panoptic-640.py) with the yaml's img_size [1280, 1280].
_base_ = ['./dinov2-large_eomt_ade20k-panoptic-640.py']
image_size = (1280, 1280)
model = dict(data_preprocessor=dict(pad_size=image_size), backbone=dict(img_size=1280))
train_pipeline = [  # ade20k_panoptic_eomt.py's, at 1280
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
train_dataloader = dict(dataset=dict(pipeline=train_pipeline))
val_dataloader = dict(dataset=dict(pipeline=test_pipeline))
test_dataloader = val_dataloader
