# EoMT's ADE20K panoptic DINOv2-g model (configs/dinov2/ade20k/panoptic/eomt_giant_640.yaml, 51.3 PQ):
# dinov2-large_eomt_ade20k-panoptic-640.py with the giant's backbone, 5 masked blocks and the yaml's windows.
_base_ = ['./dinov2-large_eomt_ade20k-panoptic-640.py']
model = dict(
    backbone=dict(arch='dinov2-giant-reg4',
                  init_cfg=dict(checkpoint='https://dl.fbaipublicfiles.com/dinov2/dinov2_vitg14/'
                                           'dinov2_vitg14_reg4_pretrain.pth')),
    decode_head=dict(in_channels=1536, num_blocks=5))
custom_hooks = [
    dict(type='NonFiniteLossHook', action='stop'),
    dict(type='RandomStateHook'),
    dict(type='EoMTMaskAnnealingHook', starts=[6520, 11410, 16300, 21190, 26080],
         ends=[13040, 17930, 22820, 27710, 32600]),
]
