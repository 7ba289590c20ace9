# The DeiT-III-Base twin of vit5-base_upernet_cityscapes.py: only the backbone preset and its weights differ.
_base_ = ['./vit5-base_upernet_cityscapes.py']
model = dict(backbone=dict(
    arch='deit3-base',
    init_cfg=dict(type='Pretrained', checkpoint='https://dl.fbaipublicfiles.com/deit/deit_3_base_224_1k.pth')))
