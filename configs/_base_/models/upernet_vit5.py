# ViT-5-Base + feature pyramid + UperNet (+ FCN auxiliary head), ADE20K's 150 classes.
# DeiT-III's recipe (arXiv 2204.07118: ADE20K on XCiT's code, facebookresearch/xcit semantic_segmentation/).
_base_ = ['./vit5_inputs.py']

# SyncBN for multi-GPU runs; mmengine's Runner turns it into BN when not distributed.
norm_cfg = dict(type='SyncBN', requires_grad=True)
embed_dims = 768
model = dict(
    type='EncoderDecoder',
    pretrained=None,
    backbone=dict(
        type='ViT5',
        arch='vit5-base',
        img_size=224,  # pretraining size: pos_embed and the RoPE reference grid
        out_indices=(3, 5, 7, 11),  # 4 evenly spaced taps
        final_norm=False,  # XCiT/DeiT-III segmentation taps raw block outputs
        drop_path_rate=0.1),  # pretrained: init_cfg=dict(type='Pretrained', checkpoint=PATH)
    # Feature2Pyramid (deconvs + max-pool) is the pyramid of the XCiT segmentation code
    # that DeiT-III's ADE20K numbers come from; 1/16 -> 1/4, 1/8, 1/16, 1/32.
    neck=dict(type='Feature2Pyramid', embed_dim=embed_dims, rescales=[4, 2, 1, 0.5], norm_cfg=norm_cfg),
    decode_head=dict(
        type='UPerHead',
        in_channels=[embed_dims] * 4,
        in_index=[0, 1, 2, 3],
        pool_scales=(1, 2, 3, 6),
        channels=512,
        dropout_ratio=0.1,
        num_classes=150,
        norm_cfg=norm_cfg,
        align_corners=False,
        loss_decode=dict(type='CrossEntropyLoss', use_sigmoid=False, loss_weight=1.0)),
    auxiliary_head=dict(
        type='FCNHead',
        in_channels=embed_dims,
        in_index=2,  # the third tap
        channels=256,
        num_convs=1,
        concat_input=False,
        dropout_ratio=0.1,
        num_classes=150,
        norm_cfg=norm_cfg,
        align_corners=False,
        loss_decode=dict(type='CrossEntropyLoss', use_sigmoid=False, loss_weight=0.4)),
    train_cfg=dict(),
    test_cfg=dict(mode='whole'))
