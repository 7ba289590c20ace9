# DINOv3-B with Meta's own linear probe (config-ade20k-linear-training.yaml). Meta's weights are gated:
# request them (docs/checkpoints.md), then put the file at the path below or give it:
# --cfg-options model.backbone.init_cfg.checkpoint=PATH_OR_URL
_base_ = ['./vit5-base_linear_ade20k.py']
model = dict(
    backbone=dict(arch='dinov3-base',
                  init_cfg=dict(type='Pretrained',
                                checkpoint='checkpoints/dinov3_vitb16_pretrain_lvd1689m-73cec8be.pth')))
