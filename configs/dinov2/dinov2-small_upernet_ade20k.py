# DINOv2-S twin of dinov2-base_upernet_ade20k.py (the ViT-5-S UperNet with a DINOv2-S backbone).
_base_ = ['../vit5/vit5-small_upernet_ade20k.py']
model = dict(
    backbone=dict(arch='dinov2-small-reg4', img_size=518,  # DINOv2's pretraining size
                  out_indices=(2, 5, 8, 11),  # DINOv2's dense (DPT) taps, dinov2/hub/depthers.py
                  init_cfg=dict(type='Pretrained',
                                checkpoint='https://dl.fbaipublicfiles.com/dinov2/dinov2_vits14/'
                                           'dinov2_vits14_reg4_pretrain.pth')))
