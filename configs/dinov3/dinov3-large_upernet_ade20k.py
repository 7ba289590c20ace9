# DINOv3-Large in the ViT-5 / DeiT-III UperNet protocol, its backbone swapped, for the four-family table
# (docs/reproduce.md). Meta's weights are gated: request them (docs/checkpoints.md), then put the file at the
# path below or give it: --cfg-options model.backbone.init_cfg.checkpoint=PATH_OR_URL
_base_ = ['../vit5/vit5-large_upernet_ade20k.py']
model = dict(
    backbone=dict(arch='dinov3-large',
                  out_indices=(4, 11, 17, 23),  # DINOv3's FOUR_EVEN_INTERVALS for 24 blocks ('used in the paper')
                  init_cfg=dict(type='Pretrained',
                                checkpoint='checkpoints/dinov3_vitl16_pretrain_lvd1689m-8aa4cbdd.pth')))
