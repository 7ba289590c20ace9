# DeiT-III-Small twin of vit5-small_eomt_coco-panoptic-640.py: the paper's baseline on the same protocol.
_base_ = ['./vit5-small_eomt_coco-panoptic-640.py']
model = dict(
    backbone=dict(arch='deit3-small',
                  init_cfg=dict(checkpoint='https://dl.fbaipublicfiles.com/deit/deit_3_small_224_1k.pth')))
