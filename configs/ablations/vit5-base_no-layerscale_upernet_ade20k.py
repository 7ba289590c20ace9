# Ablation: no LayerScale (residual branches added unscaled).
# Paper (IN-1k, averaged over sizes): removing LayerScale costs 0.29 top-1.
# Only the full ViT-5 has released weights: pretrain this variant on ImageNet-1k at 224 and
# put it at the path below (or pass model.backbone.init_cfg.checkpoint=PATH); see docs/reproduce.md.
_base_ = ['../vit5_upernet_ade20k.py']
variant = 'no-layerscale'
model = dict(backbone=dict(
    layer_scale_init=0,
    init_cfg=dict(checkpoint=f'checkpoints/ablations/vit5-base_{variant}_in1k.pth')))
