# EoMT's ADE20K panoptic DINOv2-L model (configs/dinov2/ade20k/panoptic/eomt_large_640.yaml, 50.6 PQ): the COCO
# panoptic model's network (dinov2-large_eomt_coco-panoptic-640.py) on ADE20K's 100 things and 50 stuff classes,
# 31 epochs of 1263 iterations (20210 images // 16) and the yaml's windows. The zoo's model started from the COCO
# panoptic one (model_zoo/dinov2.md; docs/eomt_zoo.md says how), the yaml from DINOv2 as here.
_base_ = [
    '../_base_/models/eomt_vit5_coco.py', '../_base_/datasets/ade20k_panoptic_eomt.py',
    '../_base_/det_runtime.py', '../_base_/schedules/eomt_coco_adamw.py',
]
model = dict(
    num_things_classes=100, num_stuff_classes=50,
    backbone=dict(arch='dinov2-large-reg4', patch_size=16, img_size=640,
                  init_cfg=dict(type='Pretrained',
                                checkpoint='https://dl.fbaipublicfiles.com/dinov2/dinov2_vitl14/'
                                           'dinov2_vitl14_reg4_pretrain.pth')),
    decode_head=dict(
        in_channels=1024, num_blocks=4, num_classes=150,
        loss_decode=[  # eomt_vit5_coco.py's, over 150 classes
            dict(type='CrossEntropyLoss', loss_name='loss_cls_ce', loss_weight=2.0, class_weight=[1.0] * 150 + [0.1]),
            dict(type='CrossEntropyLoss', use_sigmoid=True, loss_name='loss_mask_ce', loss_weight=5.0),
            dict(type='DiceLoss', ignore_index=None, naive_dice=True, eps=1, loss_name='loss_mask_dice',
                 loss_weight=5.0)]))
max_iters = 31 * 1263  # the yaml's max_epochs
param_scheduler = [
    dict(type='TwoStageWarmupPolyLR', warmup_new=500, warmup_backbone=1000, power=0.9, by_epoch=False,
         begin=0, end=max_iters),
]
train_cfg = dict(max_iters=max_iters, val_interval=4 * 1263)
default_hooks = dict(checkpoint=dict(interval=4 * 1263))
custom_hooks = [
    dict(type='NonFiniteLossHook', action='stop'),
    dict(type='RandomStateHook'),
    dict(type='EoMTMaskAnnealingHook', starts=[6520, 13040, 19560, 26080], ends=[13040, 19560, 26080, 32600]),
]
