# DeiT-III-Large twin of vit5-large_linear_ade20k.py with Facebook's ImageNet-1k weights.
_base_ = ['./vit5-large_linear_ade20k.py']
model = dict(backbone=dict(
    arch='deit3-large',
    init_cfg=dict(type='Pretrained', checkpoint='https://dl.fbaipublicfiles.com/deit/deit_3_large_224_1k.pth')))
