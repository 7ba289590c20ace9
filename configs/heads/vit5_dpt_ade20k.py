# ViT-5-B + DPT. DPT reassembles raw taps with their cls token (readout 'project'), so the
# backbone returns mmseg ViT's (map, cls) pairs and there is no neck.
_base_ = ['../vit5_upernet_ade20k.py']
width = 768
norm_cfg = dict(type='SyncBN', requires_grad=True)
model = dict(
    backbone=dict(out_indices=(2, 5, 8, 11), output_cls_token=True),
    neck=None,
    decode_head=dict(
        _delete_=True, type='DPTHead', in_channels=(width,) * 4, channels=256, embed_dims=width,
        post_process_channels=[96, 192, 384, 768], num_classes=150, readout_type='project',
        input_transform='multiple_select', in_index=(0, 1, 2, 3), norm_cfg=norm_cfg,
        loss_decode=dict(type='CrossEntropyLoss', use_sigmoid=False, loss_weight=1.0)),
    auxiliary_head=None)
