# DINOv3-B with EoMT's DINOv3 ADE20K recipe (configs/dinov3/ade20k/semantic/eomt_large_512.yaml; its rule for
# S/B in docs/eomt.md). Meta's weights are gated: request them (docs/checkpoints.md), then put the file at the
# path below or give it: --cfg-options model.backbone.init_cfg.checkpoint=PATH_OR_URL
_base_ = ['./vit5-base_eomt_ade20k.py']
model = dict(
    backbone=dict(arch='dinov3-base',
                  init_cfg=dict(type='Pretrained',
                                checkpoint='checkpoints/dinov3_vitb16_pretrain_lvd1689m-73cec8be.pth')))
max_iters = 20208  # the yaml's max_epochs 16, of 1263 iterations (20210 images // 16)
# lr 2e-4 and llrd 1.0: every parameter at the lr (the yaml's lr_mult 0.1 is never applied: docs/eomt.md)
optim_wrapper = dict(optimizer=dict(lr=2e-4), paramwise_cfg=dict(layer_decay_rate=1.0))
param_scheduler = [
    dict(type='TwoStageWarmupPolyLR', warmup_new=2000, warmup_backbone=3000, power=0.9, by_epoch=False,  # the yaml
         begin=0, end=max_iters),
]
train_cfg = dict(max_iters=max_iters)
# the first block as every DINOv3 recipe of EoMT, the other two as the ViT-L yaml's last two (docs/eomt.md)
custom_hooks = [
    dict(type='NonFiniteLossHook', action='stop'),
    dict(type='RandomStateHook'),
    dict(type='SkippedSampleHook'),
    dict(type='EoMTMaskAnnealingHook', starts=[0, 9780, 13040], ends=[3000, 13040, 16300]),
]
