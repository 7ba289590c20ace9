# BEiT/MAE recipe (facebookresearch/mae FINETUNE.md, microsoft/unilm beit/semantic_segmentation):
# layer-wise lr decay 0.75, MAE's value for 24-block ViT-L.
_base_ = ['./deit3-large_upernet_ade20k.py']
optim_wrapper = dict(optimizer=dict(lr=1e-4, weight_decay=0.05), paramwise_cfg=dict(layer_decay_rate=0.75))
model = dict(decode_head=dict(channels=768))
