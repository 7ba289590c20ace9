# EoMT's COCO panoptic DINOv2-L model (configs/dinov2/coco/panoptic/eomt_large_640.yaml, 56.0 PQ), on
# vit5-large_eomt_coco-panoptic-640.py's protocol (4 masked blocks, 12 epochs).
_base_ = ['./vit5-large_eomt_coco-panoptic-640.py']
model = dict(
    backbone=dict(arch='dinov2-large-reg4', patch_size=16, img_size=640,
                  init_cfg=dict(checkpoint='https://dl.fbaipublicfiles.com/dinov2/dinov2_vitl14/'
                                           'dinov2_vitl14_reg4_pretrain.pth')))
