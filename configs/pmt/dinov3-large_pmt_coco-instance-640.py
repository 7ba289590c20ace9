# PMT's COCO instance DINOv3-L model (tue-mps/pmt image/configs/coco/instance/pmt_l_640.yaml, 45.4 mask AP): the
# panoptic model's decoder and schedule on COCO's 80 thing classes, EoMT's instance data and evaluation.
_base_ = ['../eomt/dinov3-large_eomt_coco-instance-640.py']
model = dict(
    backbone=dict(frozen=True),  # frozen_encoder: True
    decode_head=dict(num_blocks=6),
    decoder=dict(type='PMTDecoder', embed_dims=1024, num_heads=16, num_blocks=6, hidden_dims=1024,  # the yaml
                 interaction_indices=(5, 11, 17, 23)))
param_scheduler = [
    dict(type='WarmupCosineLR', warmup_iters=6000, min_lr=1e-9, by_epoch=False, begin=0,  # the yaml
         end={{_base_.max_iters}}),
]
# the yaml's attn_mask_annealing_start_steps / end_steps
custom_hooks = [
    dict(type='NonFiniteLossHook', action='stop'),
    dict(type='RandomStateHook'),
    dict(type='EoMTMaskAnnealingHook', starts=[0, 23651, 32520, 41389, 50258, 59128],
         ends=[3000, 38433, 47302, 56171, 65040, 73910]),
]
