# mmdet's default runtime for the panoptic and instance EoMT configs, with what
# default_runtime.py gives the semantic ones: this package's registrations, ViT5Runner (the lr
# rule of accumulation, the recipe card in the log), iteration-based logging and the safety hooks.
_base_ = ['mmdet::_base_/default_runtime.py']
custom_imports = dict(imports=['vit5seg'], allow_failed_imports=False)
runner_type = 'ViT5Runner'
env_cfg = dict(cudnn_benchmark=True)
log_processor = dict(by_epoch=False)
default_hooks = dict(
    logger=dict(type='LoggerHook', interval=50, log_metric_by_epoch=False),
    checkpoint=dict(type='CheckpointHook', by_epoch=False, interval=14782, max_keep_ckpts=3))
# no fixed name: each Runner (train, then test, in one process) gets its own visualizer and log folder
visualizer = dict(_delete_=True, type='DetLocalVisualizer', vis_backends=[dict(type='LocalVisBackend')])
custom_hooks = [
    dict(type='NonFiniteLossHook', action='stop'),
    dict(type='RandomStateHook'),
]
