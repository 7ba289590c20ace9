# DeiT-III-Small twin of vit5-small_pmt_coco-panoptic-640.py with Facebook's frozen ImageNet-1k weights.
_base_ = ['./vit5-small_pmt_coco-panoptic-640.py']
model = dict(backbone=dict(
    arch='deit3-small',
    init_cfg=dict(checkpoint='https://dl.fbaipublicfiles.com/deit/deit_3_small_224_1k.pth')))
