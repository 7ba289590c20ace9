# EoMT's COCO panoptic DINOv2-S model (configs/dinov2/coco/panoptic/eomt_small_640_2x.yaml, 46.7 PQ).
_base_ = ['./dinov2-base_eomt_coco-panoptic-640.py']
model = dict(
    backbone=dict(arch='dinov2-small-reg4',
                  init_cfg=dict(checkpoint='https://dl.fbaipublicfiles.com/dinov2/dinov2_vits14/'
                                           'dinov2_vits14_reg4_pretrain.pth')),
    decode_head=dict(in_channels=384))
