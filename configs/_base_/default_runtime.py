default_scope = 'mmseg'
# vit5seg.engine.runner: the lr follows the images per iteration under gradient accumulation too, and the
# training's log and saved config carry the recipe card (mmseg's tools/train.py builds it as well)
runner_type = 'ViT5Runner'
env_cfg = dict(
    cudnn_benchmark=True,
    mp_cfg=dict(mp_start_method='fork', opencv_num_threads=0),
    dist_cfg=dict(backend='nccl'))  # vit5seg.compat switches to gloo where there is no GPU
vis_backends = [dict(type='LocalVisBackend')]
# no fixed name: each Runner (train, then test, in one process) gets its own visualizer
visualizer = dict(type='SegLocalVisualizer', vis_backends=vis_backends)
log_processor = dict(by_epoch=False)
# vit5seg.engine.hooks: stop on a NaN/inf loss before it reaches the weights (action='skip'
# drops such an update instead), keep the RNG state for an exact resume, log skipped samples.
custom_hooks = [
    dict(type='NonFiniteLossHook', action='stop'),
    dict(type='RandomStateHook'),
    dict(type='SkippedSampleHook'),
]
log_level = 'INFO'
load_from = None
resume = False
tta_model = dict(type='SegTTAModel')
