# PMT's ADE20K semantic model (tue-mps/pmt image/configs/ade20k/semantic/pmt_l_512.yaml, 58.5 mIoU): a frozen
# DINOv3-L read at 4 blocks by a 6-block plain mask decoder; EoMT's data, losses and evaluation. Its release holds
# the decoder only: tools/convert_checkpoint.py RELEASE DST --delta-to DINOV3_L (docs/pmt.md).
_base_ = ['../eomt/dinov3-large_eomt_ade20k.py']
model = dict(
    backbone=dict(frozen=True),  # frozen_encoder: True
    decode_head=dict(num_blocks=6),
    decoder=dict(type='PMTDecoder', embed_dims=1024, num_heads=16, num_blocks=6, hidden_dims=1024,  # the yaml
                 interaction_indices=(5, 11, 17, 23)),
    # PMT's evaluation (EoMT's eval_step): ceil(long side / 512) windows spread evenly; mmseg's slide at stride 512
    # places the same windows wherever two suffice (every image of aspect <= 2)
    test_cfg=dict(stride=(512, 512)))
optim_wrapper = dict(optimizer=dict(lr=2e-4))  # the yaml's lr
param_scheduler = [
    dict(type='WarmupCosineLR', warmup_iters=6000, min_lr=1e-9, by_epoch=False, begin=0,  # the yaml
         end={{_base_.max_iters}}),
]
# the yaml's attn_mask_annealing_start_steps / end_steps
custom_hooks = [
    dict(type='NonFiniteLossHook', action='stop'),
    dict(type='RandomStateHook'),
    dict(type='SkippedSampleHook'),
    dict(type='EoMTMaskAnnealingHook', starts=[0, 5384, 7403, 9422, 11442, 13461],
         ends=[3000, 8749, 10769, 12788, 14807, 16826]),
]
