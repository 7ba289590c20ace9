# DINOv2-B (4 registers) as EoMT runs DINOv2: timm's model at patch 16 and 512 (EoMT's models/vit.py), the
# 14-patch kernel and the 37x37 positions resampled when loaded; the recipe of vit5-base_eomt_ade20k.py.
_base_ = ['./vit5-base_eomt_ade20k.py']
model = dict(
    backbone=dict(arch='dinov2-base-reg4', patch_size=16, img_size=512,
                  init_cfg=dict(type='Pretrained',
                                checkpoint='https://dl.fbaipublicfiles.com/dinov2/dinov2_vitb14/'
                                           'dinov2_vitb14_reg4_pretrain.pth')))
