# The DeiT-III / XCiT recipe: facebookresearch/xcit
# semantic_segmentation/configs/xcit/upernet/upernet_xcit_small_12_p16_160k_ade20k.py.
optim_wrapper = dict(
    type='OptimWrapper',
    optimizer=dict(type='AdamW', lr=6e-5, betas=(0.9, 0.999), weight_decay=0.01),
    # no weight decay on norms, biases, LayerScale, tokens, pos_embed; layer_decay_rate=1: one lr
    constructor='ViT5OptimWrapperConstructor',
    paramwise_cfg=dict(layer_decay_rate=1.0))
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-6, by_epoch=False, begin=0, end=1500),
    dict(type='PolyLR', power=1.0, eta_min=0.0, by_epoch=False, begin=1500, end=160000),
]
train_cfg = dict(type='IterBasedTrainLoop', max_iters=160000, val_interval=16000)
val_cfg = dict(type='ValLoop')
test_cfg = dict(type='TestLoop')
default_hooks = dict(
    timer=dict(type='IterTimerHook'),
    logger=dict(type='LoggerHook', interval=50, log_metric_by_epoch=False),
    param_scheduler=dict(type='ParamSchedulerHook'),
    checkpoint=dict(type='CheckpointHook', by_epoch=False, interval=16000, save_best='mIoU', max_keep_ckpts=3),
    sampler_seed=dict(type='DistSamplerSeedHook'),
    visualization=dict(type='SegVisualizationHook'))
# 16 images per iteration in total; dist_train.sh keeps them on 1-8 GPUs by accumulation.
# --cfg-options auto_scale_lr.enable=True scales the lr by (GPUs x batch x micro-batches) / 16.
auto_scale_lr = dict(enable=False, base_batch_size=16)
