# ViT-5-B + SETR multi-level aggregation: MLANeck turns the four 1/16 taps into 256-channel
# maps, SETRMLAHead fuses them; FCN auxiliaries on each MLA level.
_base_ = ['../vit5_upernet_ade20k.py']
width = 768
norm_cfg = dict(type='SyncBN', requires_grad=True)
ce = dict(type='CrossEntropyLoss', use_sigmoid=False)
model = dict(
    neck=dict(_delete_=True, type='MLANeck', in_channels=[width] * 4, out_channels=256, norm_cfg=norm_cfg,
              act_cfg=dict(type='ReLU')),
    decode_head=dict(
        _delete_=True, type='SETRMLAHead', in_channels=(256, 256, 256, 256), channels=512, in_index=(0, 1, 2, 3),
        dropout_ratio=0, mla_channels=128, num_classes=150, norm_cfg=norm_cfg, align_corners=False,
        loss_decode=dict(**ce, loss_weight=1.0)),
    auxiliary_head=[
        dict(type='FCNHead', in_channels=256, channels=256, in_index=i, dropout_ratio=0, num_convs=0, kernel_size=1,
             concat_input=False, num_classes=150, align_corners=False, loss_decode=dict(**ce, loss_weight=0.4))
        for i in range(4)])
