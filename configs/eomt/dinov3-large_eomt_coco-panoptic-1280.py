# EoMT's COCO panoptic DINOv3-L model at 1280 (coco_panoptic_eomt_large_1280_dinov3, 58.9 PQ): the 640 model
# (dinov3-large_eomt_coco-panoptic-640.py) at 1280. Its yaml (configs/dinov3/coco/panoptic/eomt_large_1280.yaml)
# equals the 640 one but for the run's name and never sets the data's img_size, which falls back to 640; the zoo's
# 1280 input, FPS (33 vs 137 at 640) and PQ (58.9 vs 56.8) are the 1280 model's, so the size follows the zoo
# (docs/eomt_zoo.md). DINOv3 has no position grid: the same weights run at either size.
_base_ = ['./dinov3-large_eomt_coco-panoptic-640.py']
image_size = (1280, 1280)
model = dict(data_preprocessor=dict(pad_size=image_size))
train_pipeline = [  # coco_panoptic_eomt.py's, at 1280
    dict(type='LoadImageFromFile'),
    dict(type='LoadPanopticAnnotations', with_bbox=True, with_mask=True, with_seg=True),
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
