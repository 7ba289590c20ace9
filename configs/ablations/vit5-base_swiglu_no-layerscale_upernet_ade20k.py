# Ablation: SwiGLU without LayerScale, the gated-MLP recipe without the second gate.
# Inherits the SwiGLU ablation and removes LayerScale (the paper's "with and without").
# Only the full ViT-5 has released weights: pretrain this variant on ImageNet-1k at 224 and
# put it at the path below (or pass model.backbone.init_cfg.checkpoint=PATH); see docs/reproduce.md.
_base_ = ['./vit5-base_swiglu_upernet_ade20k.py']
variant = 'swiglu_no-layerscale'
model = dict(backbone=dict(
    layer_scale_init=0,
    init_cfg=dict(checkpoint=f'checkpoints/ablations/vit5-base_{variant}_in1k.pth')))
