# Ablation: LayerNorm (eps 1e-6, with bias) instead of RMSNorm, in the blocks, the final
# norm and QK-norm. Paper (IN-1k, averaged over sizes): RMSNorm is worth 0.15.
# Only the full ViT-5 has released weights: pretrain this variant on ImageNet-1k at 224 and
# put it at the path below (or pass model.backbone.init_cfg.checkpoint=PATH); see docs/reproduce.md.
_base_ = ['../vit5_upernet_ade20k.py']
variant = 'layernorm'
model = dict(backbone=dict(
    norm_type='layernorm',
    init_cfg=dict(checkpoint=f'checkpoints/ablations/vit5-base_{variant}_in1k.pth')))
