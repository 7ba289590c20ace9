# Ablation: registers without their own 2D RoPE (left unrotated, as the cls token).
# Paper (IN-1k, Base): 83.90 vs ViT-5's 84.16.
# Only the full ViT-5 has released weights: pretrain this variant on ImageNet-1k at 224 and
# put it at the path below (or pass model.backbone.init_cfg.checkpoint=PATH); see docs/reproduce.md.
_base_ = ['../vit5_upernet_ade20k.py']
variant = 'register-no-rope'
model = dict(backbone=dict(
    register_rope=False,
    init_cfg=dict(checkpoint=f'checkpoints/ablations/vit5-base_{variant}_in1k.pth')))
