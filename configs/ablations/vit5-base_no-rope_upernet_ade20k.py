# Ablation: no 2D RoPE; the learned absolute pos_embed is the only position signal, and the
# registers are not rotated either. Paper (IN-1k, averaged over sizes): 2D RoPE is worth 0.24.
# Only the full ViT-5 has released weights: pretrain this variant on ImageNet-1k at 224 and
# put it at the path below (or pass model.backbone.init_cfg.checkpoint=PATH); see docs/reproduce.md.
_base_ = ['../vit5_upernet_ade20k.py']
variant = 'no-rope'
model = dict(backbone=dict(
    use_rope=False,
    init_cfg=dict(checkpoint=f'checkpoints/ablations/vit5-base_{variant}_in1k.pth')))
