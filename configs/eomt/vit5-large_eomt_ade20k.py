# ViT-5-Large EoMT: queries in the last 4 of 24 blocks, as EoMT's ADE20K ViT-L recipe.
_base_ = ['./vit5-base_eomt_ade20k.py']
model = dict(
    backbone=dict(arch='vit5-large',
                  init_cfg=dict(type='Pretrained',
                                checkpoint='https://huggingface.co/FengWang3211/ViT-5/resolve/main/'
                                           'vit5_large_patch16_224.pth')),
    decode_head=dict(in_channels=1024, num_blocks=4))
