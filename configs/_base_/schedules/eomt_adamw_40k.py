# EoMT's ADE20K optimisation (shared/eomt-notes.md): AdamW lr 1e-4, weight decay 0.05 on every
# parameter, layer-wise lr decay 0.8 (the last block at the full rate), two-stage warm-up
# (500 iterations of the new parameters with the backbone's lr at 0, then 1000 of the
# backbone), poly 0.9, gradient norm clipped at 0.01, bf16 autocast.
# 31 epochs of 20210 images at 16 per iteration: ~39.1k iterations; the masked-attention
# windows are sixths of it (EoMTMaskAnnealingHook's default: 6520-iteration steps as EoMT's).
max_iters = 39120
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
train_cfg = dict(type='IterBasedTrainLoop', max_iters=max_iters, val_interval=4000)
val_cfg = dict(type='ValLoop')
test_cfg = dict(type='TestLoop')
default_hooks = dict(
    timer=dict(type='IterTimerHook'),
    logger=dict(type='LoggerHook', interval=50, log_metric_by_epoch=False),
    param_scheduler=dict(type='ParamSchedulerHook'),
    checkpoint=dict(type='CheckpointHook', by_epoch=False, interval=4000, save_best='mIoU', max_keep_ckpts=3),
    sampler_seed=dict(type='DistSamplerSeedHook'),
    visualization=dict(type='SegVisualizationHook'))
# 16 images per iteration in total (8 GPUs x 2); see the entry config's note on other counts.
auto_scale_lr = dict(enable=False, base_batch_size=16)
