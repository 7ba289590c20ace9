# The COCO instance EoMT config shrunk for CPU (the twin of ../eomt/dinov2-large_eomt_coco-instance-640.py): the
# panoptic twin's network and training (vit5_eomt_coco_panoptic_synthetic.py) on the same scenes' instance
# annotations, COCO's 80 thing classes, the top 100 instances.
_base_ = ['./vit5_eomt_coco_panoptic_synthetic.py']
image_size = (128, 128)
data_root = 'data/synthetic/coco/'
model = dict(
    num_things_classes=80, num_stuff_classes=0,
    decode_head=dict(
        num_classes=80,
        loss_decode=[  # the panoptic twin's, over 80 classes
            dict(type='CrossEntropyLoss', loss_name='loss_cls_ce', loss_weight=2.0, class_weight=[1.0] * 80 + [0.1]),
            dict(type='CrossEntropyLoss', use_sigmoid=True, loss_name='loss_mask_ce', loss_weight=5.0),
            dict(type='DiceLoss', ignore_index=None, naive_dice=True, eps=1, loss_name='loss_mask_dice',
                 loss_weight=5.0)]),
    test_cfg=dict(panoptic_on=False, instance_on=True))
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations', with_bbox=True, with_mask=True),
    dict(type='RandomFlip', prob=0.5),
    dict(type='RandomResize', scale=image_size, ratio_range=(0.75, 1.5), keep_ratio=True),
    dict(type='Pad', size=image_size, pad_val=dict(img=0)),
    dict(type='RandomCrop', crop_size=image_size, crop_type='absolute', recompute_bbox=True,
         allow_negative_crop=True),
    dict(type='FilterAnnotations', min_gt_bbox_wh=(1e-5, 1e-5), by_mask=True),
    dict(type='PackDetInputs'),
]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='Resize', scale=image_size, keep_ratio=True, backend='pillow'),
    dict(type='LoadAnnotations', with_bbox=True, with_mask=True),
    dict(type='PackDetInputs', meta_keys=('img_id', 'img_path', 'ori_shape', 'img_shape', 'scale_factor')),
]
train_dataloader = dict(dataset=dict(
    _delete_=True, type='CocoDataset', data_root=data_root, ann_file='annotations/instances_train2017.json',
    data_prefix=dict(img='train2017/'), filter_cfg=dict(filter_empty_gt=True, min_size=0), pipeline=train_pipeline,
    backend_args=None))
val_dataloader = dict(dataset=dict(
    _delete_=True, type='CocoDataset', data_root=data_root, ann_file='annotations/instances_val2017.json',
    data_prefix=dict(img='val2017/'), test_mode=True, pipeline=test_pipeline, backend_args=None))
test_dataloader = val_dataloader
val_evaluator = dict(_delete_=True, type='CocoMetric', ann_file=data_root + 'annotations/instances_val2017.json',
                     metric='segm', format_only=False, backend_args=None)
test_evaluator = val_evaluator
