# ViT-5-Small twin of vit5-base_eomt_coco-panoptic-640.py (EoMT's DINOv2-S protocol: eomt_small_640_2x.yaml).
_base_ = ['./vit5-base_eomt_coco-panoptic-640.py']
model = dict(
    backbone=dict(arch='vit5-small',
                  init_cfg=dict(checkpoint='https://huggingface.co/FengWang3211/ViT-5/resolve/main/'
                                           'vit5_small_patch16_224.pth')),
    decode_head=dict(in_channels=384))
