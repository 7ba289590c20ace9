# ViT-5-Base EoMT for COCO panoptic at 640 in mmdet (docs/panoptic.md), on the protocol of EoMT's DINOv2-B
# model (configs/dinov2/coco/panoptic/eomt_base_640_2x.yaml, 51.6 PQ): 200 queries in the last 3 blocks,
# large-scale jitter and a 640 crop, 24 epochs, 8 GPUs x 2.
_base_ = [
    '../_base_/models/eomt_vit5_coco.py', '../_base_/datasets/coco_panoptic_eomt.py',
    '../_base_/det_runtime.py', '../_base_/schedules/eomt_coco_adamw.py',
]
model = dict(
    backbone=dict(init_cfg=dict(type='Pretrained',
                                checkpoint='https://huggingface.co/FengWang3211/ViT-5/resolve/main/'
                                           'vit5_base_patch16_224.pth')))
# the yaml's attn_mask_annealing_start_steps / end_steps: epochs [4, 8], [10, 14], [16, 20] of 7391 iterations
custom_hooks = [
    dict(type='NonFiniteLossHook', action='stop'),
    dict(type='RandomStateHook'),
    dict(type='EoMTMaskAnnealingHook', starts=[29564, 73910, 118256], ends=[59128, 103474, 147820]),
]
