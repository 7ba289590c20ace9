# DeiT-III-Base twin of vit5-base_pmt_ade20k-512.py with Facebook's frozen ImageNet-1k weights.
_base_ = ['./vit5-base_pmt_ade20k-512.py']
model = dict(backbone=dict(
    arch='deit3-base',
    init_cfg=dict(checkpoint='https://dl.fbaipublicfiles.com/deit/deit_3_base_224_1k.pth')))
