# ViT-5-Base EoMT as an mmdet model (vit5seg.models.mask_classification.detector.EoMT) for COCO panoptic: the semantic
# EoMT's backbone and head (eomt_vit5.py) with EoMT's panoptic counts, and mmdet's MaskFormerFusionHead
# with EoMT's thresholds (training/mask_classification_panoptic.py; docs/panoptic.md).
num_things_classes, num_stuff_classes = 80, 53
num_classes = num_things_classes + num_stuff_classes
model = dict(
    type='EoMT',
    num_things_classes=num_things_classes,
    num_stuff_classes=num_stuff_classes,
    data_preprocessor=dict(
        type='EoMTDetDataPreprocessor',
        pad_size=(640, 640),  # EoMT pads to its img_size with raw 0, then normalises
        mean=[123.675, 116.28, 103.53], std=[58.395, 57.12, 57.375], bgr_to_rgb=True,  # ImageNet, RGB
        pad_mask=True, mask_pad_value=0, pad_seg=True, seg_pad_value=255),
    backbone=dict(
        type='ViT5',
        arch='vit5-base',
        img_size=224,  # pretraining size: pos_embed and the RoPE reference grid
        final_norm=True),  # every EoMT prediction reads the tokens through the final norm
    decode_head=dict(
        type='EoMTHead',
        in_channels=768,
        num_classes=num_classes,
        num_queries=200,  # EoMT's panoptic and instance models
        num_blocks=3,  # EoMT's ViT-S/B setting (4 for ViT-L, 5 for ViT-g)
        patch_size=16,
        ignore_index=255,
        align_corners=False,
        # the semantic EoMT's losses (eomt_vit5.py): 2 x class CE (no-object 0.1), 5 x BCE, 5 x dice
        loss_decode=[
            dict(type='CrossEntropyLoss', loss_name='loss_cls_ce', loss_weight=2.0,
                 class_weight=[1.0] * num_classes + [0.1]),
            dict(type='CrossEntropyLoss', use_sigmoid=True, loss_name='loss_mask_ce', loss_weight=5.0),
            dict(type='DiceLoss', ignore_index=None, naive_dice=True, eps=1, loss_name='loss_mask_dice',
                 loss_weight=5.0)]),
    panoptic_fusion_head=dict(type='MaskFormerFusionHead', loss_panoptic=None, init_cfg=None),
    train_cfg=dict(
        num_points=12544, oversample_ratio=3.0, importance_sample_ratio=0.75,
        assigner=dict(type='HungarianAssigner', match_costs=[
            dict(type='ClassificationCost', weight=2.0),
            dict(type='CrossEntropyLossCost', weight=5.0, use_sigmoid=True),
            dict(type='DiceCost', weight=5.0, pred_act=True, eps=1.0)])),
    # EoMT's mask_thresh 0.8 (a class score), overlap_thresh 0.8; its instance rule: the top 100
    test_cfg=dict(panoptic_on=True, semantic_on=False, instance_on=False, object_mask_thr=0.8, iou_thr=0.8,
                  filter_low_score=True, max_per_image=100))
