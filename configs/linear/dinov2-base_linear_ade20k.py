# DINOv2-B twin of vit5-base_linear_ade20k.py (the registers model of this project's DINOv2 configs).
_base_ = ['./vit5-base_linear_ade20k.py']
model = dict(
    backbone=dict(arch='dinov2-base-reg4', img_size=518,  # DINOv2's pretraining size
                  init_cfg=dict(type='Pretrained',
                                checkpoint='https://dl.fbaipublicfiles.com/dinov2/dinov2_vitb14/'
                                           'dinov2_vitb14_reg4_pretrain.pth')))
