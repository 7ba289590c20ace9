# EoMT's COCO panoptic DINOv3-L model (configs/dinov3/coco/panoptic/eomt_large_640.yaml, 56.8 PQ): 4 masked
# blocks, 12 epochs, the DINOv3 optimisation of dinov3-base_eomt_coco-panoptic-640.py.
_base_ = ['./vit5-large_eomt_coco-panoptic-640.py']
model = dict(
    backbone=dict(arch='dinov3-large',
                  init_cfg=dict(checkpoint='checkpoints/dinov3_vitl16_pretrain_lvd1689m-8aa4cbdd.pth')))
optim_wrapper = dict(optimizer=dict(lr=2e-4), paramwise_cfg=dict(full_rate_last_blocks=True))
param_scheduler = [
    dict(type='TwoStageWarmupPolyLR', warmup_new=2000, warmup_backbone=3000, power=0.9, by_epoch=False,
         begin=0, end={{_base_.max_iters}}),
]
custom_hooks = [
    dict(type='NonFiniteLossHook', action='stop'),
    dict(type='RandomStateHook'),
    dict(type='EoMTMaskAnnealingHook', starts=[0, 29564, 44346, 59128], ends=[3000, 44346, 59128, 73910]),
]
