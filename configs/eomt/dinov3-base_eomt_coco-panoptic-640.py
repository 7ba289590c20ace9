# EoMT's COCO panoptic DINOv3-B model (configs/dinov3/coco/panoptic/eomt_base_640_2x.yaml, 53.1 PQ). Meta's
# weights are gated (docs/checkpoints.md); EoMT's release is a delta to them: convert it with --delta-to.
_base_ = ['./vit5-base_eomt_coco-panoptic-640.py']
model = dict(
    backbone=dict(arch='dinov3-base',
                  init_cfg=dict(checkpoint='checkpoints/dinov3_vitb16_pretrain_lvd1689m-73cec8be.pth')))
# the yaml: lr 2e-4, warm-up [2000, 3000], llrd 0.8 with llrd_l2_enabled False (the masked blocks at the full lr)
optim_wrapper = dict(optimizer=dict(lr=2e-4), paramwise_cfg=dict(full_rate_last_blocks=True))
param_scheduler = [
    dict(type='TwoStageWarmupPolyLR', warmup_new=2000, warmup_backbone=3000, power=0.9, by_epoch=False,
         begin=0, end={{_base_.max_iters}}),
]
custom_hooks = [
    dict(type='NonFiniteLossHook', action='stop'),
    dict(type='RandomStateHook'),
    dict(type='EoMTMaskAnnealingHook', starts=[0, 73910, 118256], ends=[3000, 103474, 147820]),  # the yaml's
]
