# ViT-5-B + SETR progressive upsampling. SETR reads raw 1/16 taps itself (no pyramid):
# the main head on the last tap, auxiliary PUP heads on the three earlier ones.
_base_ = ['../vit5_upernet_ade20k.py']
width = 768
norm_cfg = dict(type='SyncBN', requires_grad=True)
pup = dict(type='SETRUPHead', in_channels=width, channels=256, num_classes=150, dropout_ratio=0, norm_cfg=norm_cfg,
           kernel_size=3, align_corners=False)
ce = dict(type='CrossEntropyLoss', use_sigmoid=False)
model = dict(
    neck=None,
    decode_head=dict(_delete_=True, **pup, in_index=3, num_convs=4, up_scale=2,
                     loss_decode=dict(**ce, loss_weight=1.0)),
    auxiliary_head=[dict(**pup, in_index=i, num_convs=1, up_scale=4, loss_decode=dict(**ce, loss_weight=0.4))
                    for i in (0, 1, 2)])
