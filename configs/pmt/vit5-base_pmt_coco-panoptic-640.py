# ViT-5-Base twin of dinov3-base_pmt_coco-panoptic-640.py: PMT's COCO panoptic recipe on the authors' frozen
# ImageNet-1k ViT-5 (the decoder's own RoPE tables).
_base_ = ['./dinov3-base_pmt_coco-panoptic-640.py']
model = dict(
    backbone=dict(arch='vit5-base',
                  init_cfg=dict(checkpoint='https://huggingface.co/FengWang3211/ViT-5/resolve/main/'
                                           'vit5_base_patch16_224.pth')))
