# ViT-5-B + Segmenter's mask transformer. It decodes the last block's normalized tokens
# at 1/16 (one tap, final norm, no pyramid), as mmseg's Segmenter configs.
_base_ = ['../vit5_upernet_ade20k.py']
width = 768
model = dict(
    backbone=dict(out_indices=(11,), final_norm=True),
    neck=None,
    decode_head=dict(
        _delete_=True, type='SegmenterMaskTransformerHead', in_channels=width, channels=width, num_classes=150,
        num_layers=2, num_heads=12, embed_dims=width, dropout_ratio=0.0,
        loss_decode=dict(type='CrossEntropyLoss', use_sigmoid=False, loss_weight=1.0)),
    auxiliary_head=None)
