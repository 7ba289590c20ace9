# Ablation: plain GELU MLP -> SwiGLU (hidden 2/3 x 4C, same parameter count), LayerScale kept.
# Paper (IN-1k, Base): SwiGLU with LayerScale "over-gates", 83.70 vs ViT-5's 84.16.
# Only the full ViT-5 has released weights: pretrain this variant on ImageNet-1k at 224 and
# put it at the path below (or pass model.backbone.init_cfg.checkpoint=PATH); see docs/reproduce.md.
_base_ = ['../vit5_upernet_ade20k.py']
variant = 'swiglu'
model = dict(backbone=dict(
    mlp_type='swiglu',
    init_cfg=dict(checkpoint=f'checkpoints/ablations/vit5-base_{variant}_in1k.pth')))
