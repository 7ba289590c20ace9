# ViT-5-B + DeepLabV3+. ASPP on the 1/16 level of the pyramid, its decoder skip from 1/4
# (Feature2Pyramid as in the entry config), so in_index=2 and c1 = level 0.
_base_ = ['../vit5_upernet_ade20k.py']
width = 768
norm_cfg = dict(type='SyncBN', requires_grad=True)
model = dict(
    decode_head=dict(
        _delete_=True, type='DepthwiseSeparableASPPHead', in_channels=width, in_index=2, channels=512,
        dilations=(1, 6, 12, 18),  # output stride 16
        c1_in_channels=width, c1_channels=48, dropout_ratio=0.1, num_classes=150, norm_cfg=norm_cfg,
        align_corners=False, loss_decode=dict(type='CrossEntropyLoss', use_sigmoid=False, loss_weight=1.0)))
