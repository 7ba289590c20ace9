# DINOv3-S with Meta's own linear probe (config-ade20k-linear-training.yaml). Meta's weights are gated:
# request them (docs/checkpoints.md), then put the file at the path below or give it:
# --cfg-options model.backbone.init_cfg.checkpoint=PATH_OR_URL
_base_ = ['./vit5-small_linear_ade20k.py']
model = dict(
    backbone=dict(arch='dinov3-small',
                  init_cfg=dict(type='Pretrained',
                                checkpoint='checkpoints/dinov3_vits16_pretrain_lvd1689m-08c60483.pth')))
