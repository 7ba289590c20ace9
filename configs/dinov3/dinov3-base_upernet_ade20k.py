# DINOv3-Base in the ViT-5 / DeiT-III UperNet protocol, its backbone swapped, for the four-family table
# (docs/reproduce.md). Meta's weights are gated: request them (docs/checkpoints.md), then put the file at the
# path below or give it: --cfg-options model.backbone.init_cfg.checkpoint=PATH_OR_URL
_base_ = ['../vit5_upernet_ade20k.py']
model = dict(
    backbone=dict(arch='dinov3-base',
                  out_indices=(2, 5, 8, 11),  # DINOv3's dense taps, FOUR_EVEN_INTERVALS (dinov3/eval/segmentation)
                  init_cfg=dict(type='Pretrained',
                                checkpoint='checkpoints/dinov3_vitb16_pretrain_lvd1689m-73cec8be.pth')))
