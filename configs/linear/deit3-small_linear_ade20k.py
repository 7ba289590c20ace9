# DeiT-III-Small twin of vit5-small_linear_ade20k.py with Facebook's ImageNet-1k weights.
_base_ = ['./vit5-small_linear_ade20k.py']
model = dict(backbone=dict(
    arch='deit3-small',
    init_cfg=dict(type='Pretrained', checkpoint='https://dl.fbaipublicfiles.com/deit/deit_3_small_224_1k.pth')))
