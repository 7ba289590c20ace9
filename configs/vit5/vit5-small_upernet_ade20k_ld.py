# BEiT/MAE recipe (facebookresearch/mae FINETUNE.md, microsoft/unilm beit/semantic_segmentation):
# layer-wise lr decay 0.65 as the protocol's B value.
_base_ = ['./vit5-small_upernet_ade20k.py']
optim_wrapper = dict(optimizer=dict(lr=1e-4, weight_decay=0.05), paramwise_cfg=dict(layer_decay_rate=0.65))
model = dict(decode_head=dict(channels=768))
