# DINOv3-S twin of dinov3-base_eomt_ade20k.py.
_base_ = ['./dinov3-base_eomt_ade20k.py']
model = dict(
    backbone=dict(arch='dinov3-small',
                  init_cfg=dict(type='Pretrained',
                                checkpoint='checkpoints/dinov3_vits16_pretrain_lvd1689m-08c60483.pth')),
    decode_head=dict(in_channels=384))
