# A frozen ViT-5-Base read by Meta's linear probe (facebookresearch/dinov3 dinov3/eval/segmentation:
# configs/config-ade20k-linear-training.yaml, models/heads/linear_head.py): BatchNorm and a 1x1 conv on the
# last block's normed patch tokens, ADE20K's 150 classes; no neck, no auxiliary head.
_base_ = ['./vit5_inputs.py']
model = dict(
    type='EncoderDecoder',
    pretrained=None,
    backbone=dict(
        type='ViT5',
        arch='vit5-base',
        img_size=224,  # pretraining size: pos_embed and the RoPE reference grid
        out_indices=-1,  # backbone_out_layers: LAST (use_cls_token: False)
        final_norm=True,  # use_backbone_norm: True
        frozen=True),
    decode_head=dict(
        type='LinearProbeHead',
        in_channels=768,
        num_classes=150,
        dropout_ratio=0.1,
        norm_cfg=dict(type='SyncBN', requires_grad=True),  # use_batchnorm: True
        align_corners=False,
        loss_decode=dict(type='CrossEntropyLoss', use_sigmoid=False, loss_weight=1.0)),  # celoss 1, diceloss 0
    train_cfg=dict(),
    test_cfg=dict(mode='slide', crop_size=(512, 512), stride=(341, 341)))
