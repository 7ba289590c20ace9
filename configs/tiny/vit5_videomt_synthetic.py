# VidEoMT shrunk for CPU (the twin of tue-mps/videomt configs/ytvis19/videomt/*/videomt_online_*.yaml): the COCO
# instance twin's network and optimiser (vit5_eomt_coco_instance_synthetic.py) with VidEoMT's decoder over
# YouTube-VIS 2019's 40 classes, trained online on clips of 3 frames of tools/make_synthetic_data.py's ytvis clips.
_base_ = ['./vit5_eomt_coco_instance_synthetic.py']
image = _base_.model
image_size = (128, 128)
data_root = 'data/synthetic/youtube_vis_2019/'
dataset_type = 'YouTubeVISDataset'
model = dict(
    _delete_=True,
    type='VideoMaskClassifier',
    backbone=image.backbone,
    decode_head=dict(
        image.decode_head,
        num_classes=40,
        loss_decode=[  # the image twin's, over YouTube-VIS's 40 classes (VidEoMT's NO_OBJECT_WEIGHT 0.1)
            dict(type='CrossEntropyLoss', loss_name='loss_cls_ce', loss_weight=2.0, class_weight=[1.0] * 40 + [0.1]),
            dict(type='CrossEntropyLoss', use_sigmoid=True, loss_name='loss_mask_ce', loss_weight=5.0),
            dict(type='DiceLoss', ignore_index=None, naive_dice=True, eps=1, loss_name='loss_mask_dice',
                 loss_weight=5.0)]),
    decoder=dict(type='VidEoMTDecoder', embed_dims=_base_.width),
    train_cfg=image.train_cfg,
    test_cfg=dict(task='instance', max_per_video=10),  # VidEoMT's TEST.MAX_NUM (configs/ytvis19/Base_R50.yaml)
    # VidEoMT normalises, then pads with 0 to its SIZE_DIVISIBILITY 32
    data_preprocessor=dict(type='TrackDataPreprocessor', mean=[123.675, 116.28, 103.53], std=[58.395, 57.12, 57.375],
                           bgr_to_rgb=True, pad_size_divisor=32))
train_pipeline = [
    dict(type='UniformRefFrameSample', num_ref_imgs=2, frame_range=1, filter_key_img=True),  # 3 frames in a row
    dict(type='TransformBroadcaster', share_random_params=True, transforms=[
        dict(type='LoadImageFromFile'),
        dict(type='LoadTrackAnnotations', with_mask=True),
        dict(type='Resize', scale=image_size, keep_ratio=True),
        dict(type='RandomFlip', prob=0.5)]),  # VidEoMT's RANDOM_FLIP flip_by_clip
    dict(type='PackTrackInputs')]
test_pipeline = [
    dict(type='TransformBroadcaster', transforms=[
        dict(type='LoadImageFromFile'),
        dict(type='Resize', scale=image_size, keep_ratio=True),
        dict(type='LoadTrackAnnotations', with_mask=True)]),
    dict(type='PackTrackInputs')]
train_dataloader = dict(
    _delete_=True, batch_size=2, num_workers=0, persistent_workers=False,
    sampler=dict(type='InfiniteSampler', shuffle=True), batch_sampler=dict(type='TrackAspectRatioBatchSampler'),
    dataset=dict(type=dataset_type, data_root=data_root, dataset_version='2019',
                 ann_file='annotations/youtube_vis_2019_train.json', data_prefix=dict(img_path='train/JPEGImages'),
                 pipeline=train_pipeline))
val_dataloader = dict(
    _delete_=True, batch_size=1, num_workers=0, persistent_workers=False, drop_last=False,
    sampler=dict(type='DefaultSampler', shuffle=False, round_up=False),
    dataset=dict(type=dataset_type, data_root=data_root, dataset_version='2019',
                 ann_file='annotations/youtube_vis_2019_valid.json', data_prefix=dict(img_path='valid/JPEGImages'),
                 test_mode=True, pipeline=test_pipeline))
test_dataloader = val_dataloader
val_evaluator = dict(_delete_=True, type='YouTubeVISMetric', metric='youtube_vis_ap',
                     outfile_prefix='work_dirs/vit5_videomt_synthetic/results', format_only=False)
test_evaluator = val_evaluator
custom_hooks = [dict(type='NonFiniteLossHook', action='stop'), dict(type='RandomStateHook')]  # no mask annealing
default_hooks = dict(visualization=dict(_delete_=True, type='TrackVisualizationHook', draw=False))
visualizer = dict(_delete_=True, type='TrackLocalVisualizer', vis_backends=[dict(type='LocalVisBackend')],
                  name='visualizer')
auto_scale_lr = dict(base_batch_size=2)  # one process x 2 clips: what its lr was set for
max_iters = 400  # 2 clips a step
param_scheduler = [
    dict(type='TwoStageWarmupPolyLR', warmup_new=10, warmup_backbone=10, power=0.9, by_epoch=False,
         begin=0, end=max_iters),
]
train_cfg = dict(max_iters=max_iters, val_interval=max_iters)
