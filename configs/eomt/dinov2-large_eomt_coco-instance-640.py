# EoMT's COCO instance DINOv2-L model (configs/dinov2/coco/instance/eomt_large_640.yaml, 45.2 mask AP): the
# panoptic model's network and schedule (dinov2-large_eomt_coco-panoptic-640.py) on COCO's 80 thing classes.
_base_ = [
    '../_base_/models/eomt_vit5_coco.py', '../_base_/datasets/coco_instance_eomt.py',
    '../_base_/det_runtime.py', '../_base_/schedules/eomt_coco_adamw.py',
]
model = dict(
    num_things_classes=80, num_stuff_classes=0,
    backbone=dict(arch='dinov2-large-reg4', patch_size=16, img_size=640,
                  init_cfg=dict(type='Pretrained',
                                checkpoint='https://dl.fbaipublicfiles.com/dinov2/dinov2_vitl14/'
                                           'dinov2_vitl14_reg4_pretrain.pth')),
    decode_head=dict(
        in_channels=1024, num_blocks=4, num_classes=80,
        loss_decode=[  # eomt_vit5_coco.py's, over 80 classes
            dict(type='CrossEntropyLoss', loss_name='loss_cls_ce', loss_weight=2.0, class_weight=[1.0] * 80 + [0.1]),
            dict(type='CrossEntropyLoss', use_sigmoid=True, loss_name='loss_mask_ce', loss_weight=5.0),
            dict(type='DiceLoss', ignore_index=None, naive_dice=True, eps=1, loss_name='loss_mask_dice',
                 loss_weight=5.0)]),
    # EoMT's instance eval_step: the top 100 of queries x classes; no panoptic map
    test_cfg=dict(panoptic_on=False, instance_on=True))
# EoMT's instance epoch counts the images its dataset keeps, those with an annotation (datasets/dataset.py lines
# 126-130): COCO 2017 train's 117266 of 118287 (mmdet's filter_empty_gt keeps the same), on 4 GPUs x 4 images,
# padded to 4 x 29317 by the DistributedSampler, each rank's last incomplete batch dropped (datasets/coco_instance.py
# line 89): 29317 // 4 = 7329. The yaml's annealing windows are the panoptic yaml's, in its 7391-iteration epochs.
epoch = 7329
max_iters = 12 * epoch  # the yaml's max_epochs
param_scheduler = [
    dict(type='TwoStageWarmupPolyLR', warmup_new=500, warmup_backbone=1000, power=0.9, by_epoch=False,
         begin=0, end=max_iters),
]
train_cfg = dict(max_iters=max_iters, val_interval=2 * epoch)  # the yaml's check_val_every_n_epoch 2
default_hooks = dict(checkpoint=dict(interval=2 * epoch))
custom_hooks = [
    dict(type='NonFiniteLossHook', action='stop'),
    dict(type='RandomStateHook'),
    dict(type='EoMTMaskAnnealingHook', starts=[14782, 29564, 44346, 59128], ends=[29564, 44346, 59128, 73910]),
]
