# Meta's linear-probe optimisation (facebookresearch/dinov3 dinov3/eval/segmentation/configs/
# config-ade20k-linear-training.yaml) over the protocol schedule's loops and hooks: AdamW lr 1e-3, betas
# (0.9, 0.999), weight decay 1e-3 on every trained parameter, no clipping, WarmupOneCycleLR (1500 warm-up
# iterations from 1e-6, cosine to 0; its loop skips scheduler.step() at the first iteration, dinov3/eval/
# segmentation/train.py:140, so iteration t runs at the lr of t - 1), 40000 iterations of 16 images (8 GPUs x 2),
# float32.
_base_ = ['./adamw_160k.py']
max_iters = 40000
optim_wrapper = dict(
    optimizer=dict(lr=1e-3, weight_decay=1e-3),
    # one group as Meta's (the frozen backbone in none): decay on norms and biases too
    paramwise_cfg=dict(layer_decay_rate=1.0, decay_all=True))
param_scheduler = [
    dict(type='WarmupOneCycleLR', warmup_iters=1500, warmup_ratio=1e-6, final_div_factor=float('inf'),
         anneal_strategy='cos', lag=1, by_epoch=False, begin=0, end=max_iters),
]
train_cfg = dict(max_iters=max_iters, val_interval=5000)  # eval_interval
default_hooks = dict(checkpoint=dict(interval=5000))
