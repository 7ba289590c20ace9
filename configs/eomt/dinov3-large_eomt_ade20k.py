# EoMT's DINOv3 ADE20K semantic model (configs/dinov3/ade20k/semantic/eomt_large_512.yaml, 59.5 mIoU):
# DINOv3-L, queries in the last 4 of 24 blocks. Its published weights are a delta to Meta's gated ones:
# tools/convert_checkpoint.py RELEASE DST --delta-to DINOV3_L (README, docs/eomt.md).
_base_ = ['./dinov3-base_eomt_ade20k.py']
model = dict(
    backbone=dict(arch='dinov3-large',
                  init_cfg=dict(type='Pretrained',
                                checkpoint='checkpoints/dinov3_vitl16_pretrain_lvd1689m-8aa4cbdd.pth')),
    decode_head=dict(in_channels=1024, num_blocks=4))
# the yaml's attn_mask_annealing_start_steps / end_steps
custom_hooks = [
    dict(type='NonFiniteLossHook', action='stop'),
    dict(type='RandomStateHook'),
    dict(type='SkippedSampleHook'),
    dict(type='EoMTMaskAnnealingHook', starts=[0, 6520, 9780, 13040], ends=[3000, 9780, 13040, 16300]),
]
