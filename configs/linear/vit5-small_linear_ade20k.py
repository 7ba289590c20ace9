# ViT-5-Small twin of vit5-base_linear_ade20k.py.
_base_ = ['./vit5-base_linear_ade20k.py']
model = dict(
    backbone=dict(arch='vit5-small',
                  init_cfg=dict(type='Pretrained',
                                checkpoint='https://huggingface.co/FengWang3211/ViT-5/resolve/main/'
                                           'vit5_small_patch16_224.pth')),
    decode_head=dict(in_channels=384))
