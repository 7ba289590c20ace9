# EoMT's COCO panoptic DINOv3-S model (configs/dinov3/coco/panoptic/eomt_small_640_2x.yaml, 47.2 PQ).
_base_ = ['./dinov3-base_eomt_coco-panoptic-640.py']
model = dict(
    backbone=dict(arch='dinov3-small',
                  init_cfg=dict(checkpoint='checkpoints/dinov3_vits16_pretrain_lvd1689m-08c60483.pth')),
    decode_head=dict(in_channels=384))
