# EoMT's ADE20K optimisation (tue-mps/eomt configs/dinov2/ade20k/semantic/eomt_large_512.yaml) over the protocol
# schedule's loops and hooks:
# AdamW lr 1e-4, weight decay 0.05 on every parameter, layer-wise lr decay 0.8 (the last block at
# the full rate), two-stage warm-up (500 iterations of the new parameters with the backbone's lr
# at 0, then 1000 of the backbone), poly 0.9, gradient norm clipped at 0.01, bf16 autocast.
# 31 epochs (EoMT's ADE20K yaml) of 1263 iterations (20210 images // 16: its loader drops the
# last incomplete batch); the masked-attention windows are in the model configs
# (docs/eomt.md#annealing-windows).
_base_ = ['./adamw_160k.py']
max_iters = 39153
optim_wrapper = dict(
    type='AmpOptimWrapper', dtype='bfloat16',
    optimizer=dict(lr=1e-4, weight_decay=0.05),
    clip_grad=dict(max_norm=0.01, norm_type=2),
    paramwise_cfg=dict(layer_decay_rate=0.8, layer_numbering='eomt', decay_all=True))
param_scheduler = [
    dict(type='TwoStageWarmupPolyLR', warmup_new=500, warmup_backbone=1000, power=0.9, by_epoch=False,
         begin=0, end=max_iters),
]
train_cfg = dict(max_iters=max_iters, val_interval=4000)
default_hooks = dict(checkpoint=dict(interval=4000))
