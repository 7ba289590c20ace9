# EoMT's ADE20K semantic model (configs/dinov2/ade20k/semantic/eomt_large_512.yaml, 58.4 mIoU): DINOv2-L with
# 4 registers at patch 16 and 512 (EoMT's models/vit.py), in vit5-large_eomt_ade20k.py's recipe and windows.
# Its published weights: tools/convert_checkpoint.py (README, docs/eomt.md).
_base_ = ['./vit5-large_eomt_ade20k.py']
model = dict(
    backbone=dict(arch='dinov2-large-reg4', patch_size=16, img_size=512,
                  init_cfg=dict(type='Pretrained',
                                checkpoint='https://dl.fbaipublicfiles.com/dinov2/dinov2_vitl14/'
                                           'dinov2_vitl14_reg4_pretrain.pth')))
