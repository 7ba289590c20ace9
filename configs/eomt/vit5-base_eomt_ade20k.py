# ViT-5-Base as an EoMT segmentor on ADE20K: 512 crops, EoMT's 39153-iteration recipe, 8 GPUs x 2.
# No decoder: 100 queries join the last 3 blocks (docs/eomt.md).
_base_ = [
    '../_base_/models/eomt_vit5.py', '../_base_/datasets/ade20k_eomt.py',
    '../_base_/default_runtime.py', '../_base_/schedules/eomt_adamw_40k.py',
]
crop_size = (512, 512)
model = dict(
    data_preprocessor=dict(size=crop_size),
    backbone=dict(
        arch='vit5-base',
        init_cfg=dict(type='Pretrained',
                      checkpoint='https://huggingface.co/FengWang3211/ViT-5/resolve/main/vit5_base_patch16_224.pth')))
# the default runtime's hooks, and the masked-attention annealing. EoMT has no ADE20K recipe for
# ViT-S/B: these are its COCO S/B windows (2 epochs of 12 each, 1-epoch gaps, the last ending at
# 10/12) in twelfths of this schedule (docs/eomt.md#annealing-windows)
custom_hooks = [
    dict(type='NonFiniteLossHook', action='stop'),
    dict(type='RandomStateHook'),
    dict(type='SkippedSampleHook'),
    dict(type='EoMTMaskAnnealingHook', starts=[6526, 16314, 26102], ends=[13051, 22839, 32628]),
]
