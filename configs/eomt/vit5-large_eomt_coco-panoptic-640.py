# ViT-5-Large on EoMT's DINOv2-L COCO panoptic protocol (configs/dinov2/coco/panoptic/eomt_large_640.yaml,
# 56.0 PQ): queries in the last 4 of 24 blocks, 12 epochs.
_base_ = ['./vit5-base_eomt_coco-panoptic-640.py']
model = dict(
    backbone=dict(arch='vit5-large',
                  init_cfg=dict(checkpoint='https://huggingface.co/FengWang3211/ViT-5/resolve/main/'
                                           'vit5_large_patch16_224.pth')),
    decode_head=dict(in_channels=1024, num_blocks=4))
max_iters = 12 * 7391  # the yaml's max_epochs
param_scheduler = [
    dict(type='TwoStageWarmupPolyLR', warmup_new=500, warmup_backbone=1000, power=0.9, by_epoch=False,
         begin=0, end=max_iters),
]
train_cfg = dict(max_iters=max_iters)
# the yaml's windows: epochs [2, 4], [4, 6], [6, 8], [8, 10]
custom_hooks = [
    dict(type='NonFiniteLossHook', action='stop'),
    dict(type='RandomStateHook'),
    dict(type='EoMTMaskAnnealingHook', starts=[14782, 29564, 44346, 59128], ends=[29564, 44346, 59128, 73910]),
]
