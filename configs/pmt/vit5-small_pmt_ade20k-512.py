# ViT-5-S twin of vit5-base_pmt_ade20k-512.py.
_base_ = ['./vit5-base_pmt_ade20k-512.py']
model = dict(
    backbone=dict(arch='vit5-small',
                  init_cfg=dict(checkpoint='https://huggingface.co/FengWang3211/ViT-5/resolve/main/'
                                           'vit5_small_patch16_224.pth')),
    decode_head=dict(in_channels=384),
    decoder=dict(embed_dims=384, num_heads=6, hidden_dims=384))
