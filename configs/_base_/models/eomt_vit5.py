# ViT-5-Base as an encoder-only segmentor (EoMT, tue-mps/eomt models/eomt.py): 100 queries join the
# tokens before the last blocks; ADE20K's 150 classes. No neck, no auxiliary head.
_base_ = ['./vit5_inputs.py']

model = dict(
    type='EoMTEncoderDecoder',
    pretrained=None,
    backbone=dict(
        type='ViT5',
        arch='vit5-base',
        img_size=224,  # pretraining size: pos_embed and the RoPE reference grid
        final_norm=True),  # every EoMT prediction reads the tokens through the final norm
    decode_head=dict(
        type='EoMTHead',
        in_channels=768,
        num_classes=150,
        num_queries=100,  # EoMT's ADE20K setting
        num_blocks=3,  # EoMT's ViT-S/B setting (4 for ViT-L)
        patch_size=16,
        ignore_index=255,
        align_corners=False,
        # Mask2Former's losses as EoMT weighs them: 2 x class CE (no-object 0.1), 5 x BCE, 5 x dice
        loss_decode=[
            dict(type='CrossEntropyLoss', loss_name='loss_cls_ce', loss_weight=2.0,
                 class_weight=[1.0] * 150 + [0.1]),
            dict(type='CrossEntropyLoss', use_sigmoid=True, loss_name='loss_mask_ce', loss_weight=5.0),
            dict(type='DiceLoss', ignore_index=None, naive_dice=True, eps=1, loss_name='loss_mask_dice',
                 loss_weight=5.0)],
        train_cfg=dict(
            num_points=12544, oversample_ratio=3.0, importance_sample_ratio=0.75,
            assigner=dict(type='HungarianAssigner', match_costs=[
                dict(type='ClassificationCost', weight=2.0),
                dict(type='CrossEntropyLossCost', weight=5.0, use_sigmoid=True),
                dict(type='DiceCost', weight=5.0, pred_act=True, eps=1.0)]))),
    train_cfg=dict(),
    # EoMT evaluates 512 windows along the long side of a short-side-512 image
    test_cfg=dict(mode='slide', crop_size=(512, 512), stride=(341, 341)))
