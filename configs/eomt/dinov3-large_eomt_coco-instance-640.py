# EoMT's COCO instance DINOv3-L model (configs/dinov3/coco/instance/eomt_large_640.yaml, 45.9 mask AP): its
# windows are the DINOv2 ones (no 0-3000 first window, unlike the DINOv3 panoptic yamls).
_base_ = ['./dinov2-large_eomt_coco-instance-640.py']
model = dict(
    backbone=dict(arch='dinov3-large', patch_size=16, img_size=224,
                  init_cfg=dict(checkpoint='checkpoints/dinov3_vitl16_pretrain_lvd1689m-8aa4cbdd.pth')))
optim_wrapper = dict(optimizer=dict(lr=2e-4), paramwise_cfg=dict(full_rate_last_blocks=True))
param_scheduler = [
    dict(type='TwoStageWarmupPolyLR', warmup_new=2000, warmup_backbone=3000, power=0.9, by_epoch=False,
         begin=0, end={{_base_.max_iters}}),
]
