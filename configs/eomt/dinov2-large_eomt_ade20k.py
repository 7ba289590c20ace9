# EoMT's ADE20K semantic model (configs/dinov2/ade20k/semantic/eomt_large_512.yaml, 58.4 mIoU): DINOv2-L with
# 4 registers at patch 16; queries in the last 4 of 24 blocks. Its published weights: tools/convert_checkpoint.py.
_base_ = ['./dinov2-base_eomt_ade20k.py']
model = dict(
    backbone=dict(arch='dinov2-large-reg4',
                  init_cfg=dict(type='Pretrained',
                                checkpoint='https://dl.fbaipublicfiles.com/dinov2/dinov2_vitl14/dinov2_vitl14_reg4_pretrain.pth')),
    decode_head=dict(in_channels=1024, num_blocks=4))
# the yaml's attn_mask_annealing_start_steps / end_steps
custom_hooks = [
    dict(type='NonFiniteLossHook', action='stop'),
    dict(type='RandomStateHook'),
    dict(type='SkippedSampleHook'),
    dict(type='EoMTMaskAnnealingHook', starts=[6520, 13040, 19560, 26080], ends=[13040, 19560, 26080, 32600]),
]
