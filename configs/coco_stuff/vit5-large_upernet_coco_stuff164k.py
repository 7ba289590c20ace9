# ViT-5-Large twin of vit5-base_upernet_coco_stuff164k.py (deit3-large_upernet_coco_stuff164k.py); 24 blocks.
_base_ = ['./vit5-base_upernet_coco_stuff164k.py']
width = 1024
model = dict(
    backbone=dict(arch='vit5-large', out_indices=(7, 11, 15, 23), drop_path_rate=0.2,  # protocol: 0.2-0.3 for L
                  init_cfg=dict(type='Pretrained',
                                checkpoint='https://huggingface.co/FengWang3211/ViT-5/resolve/main/'
                                           'vit5_large_patch16_224.pth')),
    neck=dict(embed_dim=width),
    decode_head=dict(in_channels=[width] * 4),
    auxiliary_head=dict(in_channels=width))
