# ViT-5-B twin of vit5-large_pmt_ade20k-512.py: PMT's 12-block taps and its decoder at the width (its B/S recipes).
_base_ = ['./vit5-large_pmt_ade20k-512.py']
model = dict(
    backbone=dict(arch='vit5-base',
                  init_cfg=dict(checkpoint='https://huggingface.co/FengWang3211/ViT-5/resolve/main/'
                                           'vit5_base_patch16_224.pth')),
    decode_head=dict(in_channels=768),
    decoder=dict(embed_dims=768, num_heads=12, hidden_dims=768, interaction_indices=(2, 5, 8, 11)))
