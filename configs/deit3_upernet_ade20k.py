# The DeiT-III-Base twin of vit5_upernet_ade20k.py: identical protocol, only the backbone
# preset and its ImageNet-1k weights differ (Facebook or timm layout, both load).
_base_ = ['./vit5_upernet_ade20k.py']
model = dict(
    backbone=dict(
        arch='deit3-base',
        init_cfg=dict(type='Pretrained', checkpoint='https://dl.fbaipublicfiles.com/deit/deit_3_base_224_1k.pth')))
