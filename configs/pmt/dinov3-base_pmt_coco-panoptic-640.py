# PMT's COCO panoptic DINOv3-B model (tue-mps/pmt image/configs/coco/panoptic/pmt_b_640.yaml, 52.8 PQ): a frozen
# DINOv3-B read at 4 blocks by a 6-block plain mask decoder; EoMT's data, losses and evaluation, in mmdet. Its release
# holds the decoder only: tools/convert_checkpoint.py RELEASE DST --delta-to DINOV3_B (docs/pmt.md).
_base_ = ['../eomt/dinov3-base_eomt_coco-panoptic-640.py']
model = dict(
    backbone=dict(frozen=True),  # frozen_encoder: True
    decode_head=dict(num_blocks=6),
    decoder=dict(type='PMTDecoder', embed_dims=768, num_heads=12, num_blocks=6, hidden_dims=768,  # the yaml
                 interaction_indices=(2, 5, 8, 11)))
max_iters = 12 * 7391  # the yaml's max_epochs
param_scheduler = [
    dict(type='WarmupCosineLR', warmup_iters=6000, min_lr=1e-9, by_epoch=False, begin=0, end=max_iters),  # the yaml
]
train_cfg = dict(max_iters=max_iters)
# the yaml's attn_mask_annealing_start_steps / end_steps
custom_hooks = [
    dict(type='NonFiniteLossHook', action='stop'),
    dict(type='RandomStateHook'),
    dict(type='EoMTMaskAnnealingHook', starts=[0, 23651, 32520, 41389, 50258, 59128],
         ends=[3000, 38433, 47302, 56171, 65040, 73910]),
]
