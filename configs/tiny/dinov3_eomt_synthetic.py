# The DINOv3 twin of vit5_eomt_synthetic.py: the same narrow 4-block EoMT from scratch, DINOv3's switches
# (its RoPE with the training rescale, storage tokens, masked key bias, LayerNorm 1e-5).
_base_ = ['./vit5_eomt_synthetic.py']
model = dict(backbone=dict(arch='dinov3-small'))
