# The COCO panoptic PMT config shrunk for CPU, the twin of vit5_eomt_coco_panoptic_synthetic.py: its narrow 4-block
# ViT-5, frozen (random unless given: --cfg-options model.backbone.pretrained=PATH), read at every block by a
# 2-block plain mask decoder; its data and 200-iteration budget.
_base_ = ['./vit5_eomt_coco_panoptic_synthetic.py']
tiny = _base_.tiny
model = dict(
    backbone=dict(frozen=True),
    decoder=dict(type='PMTDecoder', embed_dims=tiny.width, num_heads=2, num_blocks=2, hidden_dims=tiny.width,
                 interaction_indices=(0, 1, 2, 3), norm_cfg=tiny.norm_cfg))
param_scheduler = [dict(type='WarmupCosineLR', warmup_iters=20, min_lr=1e-9, by_epoch=False, begin=0, end=200)]
