# mmdet's default runtime (mmdet 3.3.0 configs/_base_/default_runtime.py, written out: mmdet's own
# tools/train.py, `mim train mmdet`, reads these configs before anything imports vit5seg, and an
# `mmdet::` base needs pkg_resources, gone from setuptools >= 81) with what default_runtime.py gives
# the semantic configs: this package's registrations, ViT5Runner (the lr rule of accumulation, the
# recipe card in the log), iteration-based logging and the safety hooks.
default_scope = 'mmdet'
custom_imports = dict(imports=['vit5seg'], allow_failed_imports=False)
runner_type = 'ViT5Runner'
default_hooks = dict(
    timer=dict(type='IterTimerHook'),
    logger=dict(type='LoggerHook', interval=50, log_metric_by_epoch=False),
    param_scheduler=dict(type='ParamSchedulerHook'),
    checkpoint=dict(type='CheckpointHook', by_epoch=False, interval=14782, max_keep_ckpts=3),
    sampler_seed=dict(type='DistSamplerSeedHook'),
    visualization=dict(type='DetVisualizationHook'))
env_cfg = dict(
    cudnn_benchmark=True,
    mp_cfg=dict(mp_start_method='fork', opencv_num_threads=0),
    dist_cfg=dict(backend='nccl'))  # vit5seg.compat switches to gloo where there is no GPU
# no fixed name: each Runner (train, then test, in one process) gets its own visualizer and log folder
visualizer = dict(type='DetLocalVisualizer', vis_backends=[dict(type='LocalVisBackend')])
log_processor = dict(type='LogProcessor', window_size=50, by_epoch=False)
custom_hooks = [
    dict(type='NonFiniteLossHook', action='stop'),
    dict(type='RandomStateHook'),
]
log_level = 'INFO'
load_from = None
resume = False
