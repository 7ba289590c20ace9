# The PMT config shrunk for CPU, the twin of vit5_eomt_synthetic.py: the same narrow 4-block ViT-5, frozen
# (random unless given: --cfg-options model.backbone.pretrained=PATH), read at
# every block by a 2-block plain mask decoder; the tiny data and 300-iteration budget.
_base_ = ['./vit5_eomt_synthetic.py']
tiny = _base_.tiny
model = dict(
    backbone=dict(frozen=True),
    decode_head=dict(num_blocks=2),
    decoder=dict(type='PMTDecoder', embed_dims=tiny.width, num_heads=2, num_blocks=2, hidden_dims=tiny.width,
                 interaction_indices=(0, 1, 2, 3), norm_cfg=tiny.norm_cfg))
optim_wrapper = dict(optimizer=dict(lr=2e-3))  # only the decoder and the head learn: a larger lr
param_scheduler = [dict(type='WarmupCosineLR', warmup_iters=20, min_lr=1e-9, by_epoch=False, begin=0, end=300)]
