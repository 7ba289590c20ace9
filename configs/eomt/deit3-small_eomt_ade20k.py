# DeiT-III-Small twin of vit5-small_eomt_ade20k.py: the baseline backbone under the same EoMT recipe.
_base_ = ['./vit5-small_eomt_ade20k.py']
model = dict(backbone=dict(
    arch='deit3-small',
    init_cfg=dict(type='Pretrained', checkpoint='https://dl.fbaipublicfiles.com/deit/deit_3_small_224_1k.pth')))
