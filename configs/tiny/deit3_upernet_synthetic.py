# The DeiT-III twin of vit5_upernet_synthetic.py: the same narrow 4-block model, data and
# schedule, only the backbone preset's switches differ (LayerNorm, qkv bias, no RoPE,
# registers or QK-norm), so the ViT-5 vs DeiT-III comparison runs end to end on CPU.
_base_ = ['./vit5_upernet_synthetic.py']
model = dict(backbone=dict(arch='deit3-small'))
