# ViT-5-B + FCN. FCN wants one dense map: the last block's 1/16 tap, no neck.
_base_ = ['../vit5_upernet_ade20k.py']
width = 768
norm_cfg = dict(type='SyncBN', requires_grad=True)
model = dict(
    backbone=dict(out_indices=(11,)),
    neck=None,
    decode_head=dict(
        _delete_=True, type='FCNHead', in_channels=width, in_index=0, channels=512, num_convs=2,
        concat_input=True, dropout_ratio=0.1, num_classes=150, norm_cfg=norm_cfg, align_corners=False,
        loss_decode=dict(type='CrossEntropyLoss', use_sigmoid=False, loss_weight=1.0)),
    auxiliary_head=None)
