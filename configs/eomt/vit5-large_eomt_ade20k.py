# ViT-5-Large EoMT: queries in the last 4 of 24 blocks, as EoMT's ADE20K ViT-L recipe.
_base_ = ['./vit5-base_eomt_ade20k.py']
model = dict(
    backbone=dict(arch='vit5-large',
                  init_cfg=dict(type='Pretrained',
                                checkpoint='https://huggingface.co/FengWang3211/ViT-5/resolve/main/'
                                           'vit5_large_patch16_224.pth')),
    decode_head=dict(in_channels=1024, num_blocks=4))
# EoMT's ADE20K ViT-L windows: consecutive sixths of the schedule, the first block first
custom_hooks = [
    dict(type='NonFiniteLossHook', action='stop'),
    dict(type='RandomStateHook'),
    dict(type='SkippedSampleHook'),
    dict(type='EoMTMaskAnnealingHook', starts=[6520, 13040, 19560, 26080], ends=[13040, 19560, 26080, 32600]),
]
