# DINOv2-S twin of dinov2-base_eomt_ade20k.py.
_base_ = ['./dinov2-base_eomt_ade20k.py']
model = dict(
    backbone=dict(arch='dinov2-small-reg4',
                  init_cfg=dict(type='Pretrained',
                                checkpoint='https://dl.fbaipublicfiles.com/dinov2/dinov2_vits14/'
                                           'dinov2_vits14_reg4_pretrain.pth')),
    decode_head=dict(in_channels=384))
