# ViT-5-Small twin of vit5-base_upernet_cityscapes.py (deit3-small_upernet_cityscapes.py).
_base_ = ['./vit5-base_upernet_cityscapes.py']
width = 384
model = dict(
    backbone=dict(arch='vit5-small',
                  init_cfg=dict(type='Pretrained',
                                checkpoint='https://huggingface.co/FengWang3211/ViT-5/resolve/main/'
                                           'vit5_small_patch16_224.pth')),
    neck=dict(embed_dim=width),
    decode_head=dict(in_channels=[width] * 4),
    auxiliary_head=dict(in_channels=width))
