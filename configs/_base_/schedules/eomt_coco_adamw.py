# EoMT's COCO optimisation (training/lightning_module.py; the ADE20K one of eomt_adamw_40k.py): AdamW lr 1e-4,
# weight decay 0.05 on every parameter, layer decay 0.8 (the last block at the full rate), the two-stage warm-up
# 500 / 1000, poly 0.9, gradient norm clipped at 0.01, mixed precision. 24 epochs (the S/B "2x" yamls; L and g:
# 12) of 7391 iterations of 16 images, the epoch the yamls' annealing windows count in.
epoch = 7391
max_iters = 24 * epoch
optim_wrapper = dict(
    type='AmpOptimWrapper', dtype='bfloat16',
    optimizer=dict(type='AdamW', lr=1e-4, betas=(0.9, 0.999), weight_decay=0.05),
    clip_grad=dict(max_norm=0.01, norm_type=2),
    constructor='ViT5OptimWrapperConstructor',
    paramwise_cfg=dict(layer_decay_rate=0.8, layer_numbering='eomt', decay_all=True))
param_scheduler = [
    dict(type='TwoStageWarmupPolyLR', warmup_new=500, warmup_backbone=1000, power=0.9, by_epoch=False,
         begin=0, end=max_iters),
]
train_cfg = dict(type='IterBasedTrainLoop', max_iters=max_iters, val_interval=2 * epoch)
val_cfg = dict(type='ValLoop')
test_cfg = dict(type='TestLoop')
