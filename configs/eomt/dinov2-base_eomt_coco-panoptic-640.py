# EoMT's COCO panoptic DINOv2-B model (configs/dinov2/coco/panoptic/eomt_base_640_2x.yaml, 51.6 PQ): timm's
# DINOv2-B with 4 registers at patch 16 and 640 (EoMT's models/vit.py), on vit5-base_eomt_coco-panoptic-640.py's
# protocol. Its published weights: tools/convert_checkpoint.py (docs/panoptic.md).
_base_ = ['./vit5-base_eomt_coco-panoptic-640.py']
model = dict(
    backbone=dict(arch='dinov2-base-reg4', patch_size=16, img_size=640,
                  init_cfg=dict(checkpoint='https://dl.fbaipublicfiles.com/dinov2/dinov2_vitb14/'
                                           'dinov2_vitb14_reg4_pretrain.pth')))
