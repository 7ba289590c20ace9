# EoMT's Cityscapes semantic DINOv2-L model (configs/dinov2/cityscapes/semantic/eomt_large_1024.yaml, 84.2 mIoU):
# the ADE20K model's network (dinov2-large_eomt_ade20k.py) at 1024 on Cityscapes' 19 classes, 107 epochs of 186
# iterations and the yaml's windows (each 3317 = 107 x 186 / 6).
_base_ = [
    '../_base_/models/eomt_vit5.py', '../_base_/datasets/cityscapes_eomt.py',
    '../_base_/default_runtime.py', '../_base_/schedules/eomt_adamw_40k.py',
]
crop_size = (1024, 1024)
model = dict(
    data_preprocessor=dict(size=crop_size),
    backbone=dict(arch='dinov2-large-reg4', patch_size=16, img_size=1024,
                  init_cfg=dict(type='Pretrained',
                                checkpoint='https://dl.fbaipublicfiles.com/dinov2/dinov2_vitl14/'
                                           'dinov2_vitl14_reg4_pretrain.pth')),
    decode_head=dict(
        in_channels=1024, num_blocks=4, num_classes=19,
        loss_decode=[  # eomt_vit5.py's, over 19 classes
            dict(type='CrossEntropyLoss', loss_name='loss_cls_ce', loss_weight=2.0, class_weight=[1.0] * 19 + [0.1]),
            dict(type='CrossEntropyLoss', use_sigmoid=True, loss_name='loss_mask_ce', loss_weight=5.0),
            dict(type='DiceLoss', ignore_index=None, naive_dice=True, eps=1, loss_name='loss_mask_dice',
                 loss_weight=5.0)]),
    # EoMT's windows: the short side at 1024, ceil(long / 1024) windows spread along the long side; on a
    # 1024 x L photo with L <= 2048 (every Cityscapes photo) they are these (docs/eomt_zoo.md)
    test_cfg=dict(mode='slide', crop_size=crop_size, stride=crop_size))
# EoMT's epoch: 4 GPUs x 4 images (its README), Lightning's DistributedSampler pads 2975 images to 4 x 744,
# and each rank's loader drops its last incomplete batch (datasets/cityscapes_semantic.py line 89): 744 // 4 = 186
epoch = 186
max_iters = 107 * epoch  # the yaml's max_epochs
param_scheduler = [
    dict(type='TwoStageWarmupPolyLR', warmup_new=500, warmup_backbone=1000, power=0.9, by_epoch=False,
         begin=0, end=max_iters),
]
train_cfg = dict(max_iters=max_iters)
custom_hooks = [
    dict(type='NonFiniteLossHook', action='stop'),
    dict(type='RandomStateHook'),
    dict(type='SkippedSampleHook'),
    dict(type='EoMTMaskAnnealingHook', starts=[3317, 6634, 9951, 13268], ends=[6634, 9951, 13268, 16585]),
]
