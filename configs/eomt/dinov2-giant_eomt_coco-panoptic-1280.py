# EoMT's COCO panoptic DINOv2-g model at 1280 (configs/dinov2/coco/panoptic/eomt_giant_1280.yaml, 59.2 PQ):
# dinov2-large_eomt_coco-panoptic-1280.py with the giant's backbone, 5 masked blocks and the yaml's five windows.
_base_ = ['./dinov2-large_eomt_coco-panoptic-1280.py']
model = dict(
    backbone=dict(arch='dinov2-giant-reg4',
                  init_cfg=dict(checkpoint='https://dl.fbaipublicfiles.com/dinov2/dinov2_vitg14/'
                                           'dinov2_vitg14_reg4_pretrain.pth')),
    decode_head=dict(in_channels=1536, num_blocks=5))
custom_hooks = [
    dict(type='NonFiniteLossHook', action='stop'),
    dict(type='RandomStateHook'),
    dict(type='EoMTMaskAnnealingHook', starts=[14782, 25869, 36955, 48042, 59128],
         ends=[29564, 40651, 51737, 62824, 73910]),
]
