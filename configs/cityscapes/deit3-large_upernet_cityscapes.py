# DeiT-III-Large twin of vit5-large_upernet_cityscapes.py with Facebook's ImageNet-1k weights.
_base_ = ['./vit5-large_upernet_cityscapes.py']
model = dict(backbone=dict(
    arch='deit3-large',
    init_cfg=dict(type='Pretrained', checkpoint='https://dl.fbaipublicfiles.com/deit/deit_3_large_224_1k.pth')))
