# ViT-5-L twin of dinov3-large_pmt_ade20k-512.py: PMT's ADE20K recipe on the authors' frozen ImageNet-1k ViT-5-L
# (the decoder's own RoPE tables: ViT-5's are not DINOv3's).
_base_ = ['./dinov3-large_pmt_ade20k-512.py']
model = dict(backbone=dict(
    arch='vit5-large',
    init_cfg=dict(checkpoint='https://huggingface.co/FengWang3211/ViT-5/resolve/main/vit5_large_patch16_224.pth')))
