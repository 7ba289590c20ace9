# DINOv2-B (4 registers) in the ViT-5 / DeiT-III UperNet protocol (vit5_upernet_ade20k.py), for the
# four-family table (docs/reproduce.md). Patch 14: a 512 crop is padded to a 37x37 grid, the pretraining one.
_base_ = ['../vit5_upernet_ade20k.py']
model = dict(
    backbone=dict(arch='dinov2-base-reg4', img_size=518,  # DINOv2's pretraining size
                  out_indices=(2, 5, 8, 11),  # DINOv2's dense (DPT) taps, dinov2/hub/depthers.py
                  init_cfg=dict(type='Pretrained',
                                checkpoint='https://dl.fbaipublicfiles.com/dinov2/dinov2_vitb14/'
                                           'dinov2_vitb14_reg4_pretrain.pth')))
