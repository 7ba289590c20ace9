# DINOv2-L twin of dinov2-base_upernet_ade20k.py (the ViT-5-L UperNet with a DINOv2-L backbone).
_base_ = ['../vit5/vit5-large_upernet_ade20k.py']
model = dict(
    backbone=dict(arch='dinov2-large-reg4', img_size=518,  # DINOv2's pretraining size
                  out_indices=(4, 11, 17, 23),  # DINOv2's dense (DPT) taps, dinov2/hub/depthers.py
                  init_cfg=dict(type='Pretrained',
                                checkpoint='https://dl.fbaipublicfiles.com/dinov2/dinov2_vitl14/'
                                           'dinov2_vitl14_reg4_pretrain.pth')))
