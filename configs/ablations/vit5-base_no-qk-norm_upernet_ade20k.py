# Ablation: no QK-norm. The paper's claim for QK-norm is stability (fewer loss spikes), not
# score: compare the runs with `python tools/analyze_logs.py` as well as by mIoU.
# Only the full ViT-5 has released weights: pretrain this variant on ImageNet-1k at 224 and
# put it at the path below (or pass model.backbone.init_cfg.checkpoint=PATH); see docs/reproduce.md.
_base_ = ['../vit5_upernet_ade20k.py']
variant = 'no-qk-norm'
model = dict(backbone=dict(
    qk_norm=False,
    init_cfg=dict(checkpoint=f'checkpoints/ablations/vit5-base_{variant}_in1k.pth')))
