# ViT-5-B + SegFormer's all-MLP head. It fuses four scales: the Feature2Pyramid levels.
_base_ = ['../vit5_upernet_ade20k.py']
width = 768
norm_cfg = dict(type='SyncBN', requires_grad=True)
model = dict(
    decode_head=dict(
        _delete_=True, type='SegformerHead', in_channels=[width] * 4, in_index=[0, 1, 2, 3], channels=256,
        dropout_ratio=0.1, num_classes=150, norm_cfg=norm_cfg, align_corners=False,
        loss_decode=dict(type='CrossEntropyLoss', use_sigmoid=False, loss_weight=1.0)),
    auxiliary_head=None)
