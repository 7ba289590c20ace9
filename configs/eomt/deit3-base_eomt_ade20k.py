# DeiT-III-Base twin of vit5-base_eomt_ade20k.py: the baseline backbone under the same EoMT recipe.
_base_ = ['./vit5-base_eomt_ade20k.py']
model = dict(backbone=dict(
    arch='deit3-base',
    init_cfg=dict(type='Pretrained', checkpoint='https://dl.fbaipublicfiles.com/deit/deit_3_base_224_1k.pth')))
